"""The OpenAI-compatible provider against a real llama.cpp server (SmolLM2, function calling).

The server is the session fixture in tests/conftest.py; answers are tiny (max_tokens) and only
their shape is asserted, since a 135M model's wording is not ours to pin down.
"""

from contextlib import aclosing

import pytest

from thinkloop.models.base import ModelSettings
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.presets import COMPAT
from thinkloop.models.registry import default_registry
from thinkloop.types import Message, ModelResponse, TextDelta, ToolSpec

pytestmark = pytest.mark.slow

CALC = ToolSpec(
    "calculator",
    "Evaluate an arithmetic expression.",
    {"type": "object", "properties": {"expression": {"type": "string"}},
     "required": ["expression"]},
)
FORCE_CALC = {"tool_choice": {"type": "function", "function": {"name": "calculator"}}}
TASK = [Message.system("You are a helpful assistant."), Message.user("What is 12*7?")]


def _model(base_url: str) -> OpenAICompatModel:
    # The way users reach it: the openai preset pointed at a local server.
    model = default_registry().resolve("openai:smollm2", {"OPENAI_BASE_URL": base_url})
    assert isinstance(model, OpenAICompatModel)
    assert model.quirks == COMPAT
    return model


async def test_chat_completion(llama_server: str) -> None:
    async with aclosing(_model(llama_server)) as model:
        response = await model.complete(TASK, [], ModelSettings(max_tokens=8, temperature=0))
    assert response.message.content.strip()
    assert response.message.tool_calls == ()
    assert response.usage.requests == 1
    assert response.usage.input_tokens > 0
    assert 0 < response.usage.output_tokens <= 8
    assert response.finish_reason in ("stop", "length")


async def test_streaming_yields_the_text_it_returns(llama_server: str) -> None:
    async with aclosing(_model(llama_server)) as model:
        items = [i async for i in model.stream(TASK, [], ModelSettings(max_tokens=8))]
    deltas = [i for i in items if isinstance(i, TextDelta)]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert len(deltas) >= 2
    assert all(d.kind == "text" for d in deltas)
    assert "".join(d.text for d in deltas) == final.message.content
    assert final.message.content.strip()


async def test_tool_call_round_trip(llama_server: str) -> None:
    settings = ModelSettings(max_tokens=32, temperature=0, extra=FORCE_CALC)
    async with aclosing(_model(llama_server)) as model:
        first = await model.complete(TASK, [CALC], settings)
        assert first.finish_reason == "tool_calls"
        (call,) = first.message.tool_calls
        assert call.name == "calculator"
        assert call.id
        # The arguments came back as JSON text and were decoded (or the failure recorded).
        assert isinstance(call.arguments, dict)
        assert call.parse_error is None or "arguments" in call.parse_error
        history = [*TASK, first.message, Message.tool(call.id, "calculator", "84")]
        second = await model.complete(history, [], ModelSettings(max_tokens=16))
    # The server accepted the assistant tool call and its result (a 4xx/5xx would raise).
    assert isinstance(second, ModelResponse)
    assert second.message.content or second.message.tool_calls
    assert second.usage.input_tokens > 0


async def test_tool_call_streams_argument_deltas(llama_server: str) -> None:
    settings = ModelSettings(max_tokens=32, temperature=0, extra=FORCE_CALC)
    async with aclosing(_model(llama_server)) as model:
        items = [i async for i in model.stream(TASK, [CALC], settings)]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    (call,) = final.message.tool_calls
    assert call.name == "calculator"
    args = "".join(i.text for i in items if isinstance(i, TextDelta) and i.kind == "tool_call")
    assert args.startswith("{")
