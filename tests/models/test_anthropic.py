"""The anthropic provider through the real SDK, against a loopback Messages API server."""

from contextlib import aclosing

import pytest

from thinkloop.errors import ContextOverflowError, ModelAuthError
from thinkloop.models.anthropic import AnthropicModel, build_anthropic
from thinkloop.models.anthropic_wire import BLOCKS_KEY
from thinkloop.models.base import ModelSettings
from thinkloop.models.retry import RetriesExhaustedError, RetryPolicy
from thinkloop.testing.openai_server import Reply
from thinkloop.types import Message, ModelResponse, TextDelta, ToolCall, ToolSpec, Usage

from .anthropic_server import AnthropicServer, events, message

FAST = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.01)
SETTINGS = ModelSettings(timeout_s=5)
CALC = ToolSpec("calculator", "Evaluate arithmetic.", {
    "type": "object", "properties": {"expression": {"type": "string"}},
    "required": ["expression"]})
CALL = ToolCall("toolu_1", "calculator", {"expression": "12*7"})
HISTORY = [
    Message.system("Be exact."),
    Message.system("Use tools."),
    Message.user("What is 12*7?"),
    Message.user("Quickly."),
    Message.assistant("Let me compute.", (CALL,)),
    Message.tool("toolu_1", "calculator", "84"),
    Message.user("And now?"),
]
THINKING = {"type": "thinking", "thinking": "12*7 needs the tool", "signature": "sig=="}
TOOL_USE = {"type": "tool_use", "id": "toolu_2", "name": "calculator",
            "input": {"expression": "84+1"}}


def _model(srv: AnthropicServer, retry: RetryPolicy = FAST) -> AnthropicModel:
    return AnthropicModel("claude-haiku-4-5", api_key="test-key", base_url=srv.api_url,
                          retry=retry)


async def test_request_maps_system_alternation_tools_and_results(
    anthropic_server: AnthropicServer,
) -> None:
    anthropic_server.enqueue(Reply(body=message([{"type": "text", "text": "85"}])))
    async with aclosing(_model(anthropic_server)) as model:
        await model.complete(HISTORY, [CALC], ModelSettings(max_tokens=50, temperature=0.5,
                                                             tool_choice="required"))
    (sent,) = anthropic_server.requests
    headers = anthropic_server.headers[0]
    # SDK 2.x sends a bearer token; older ones sent x-api-key.
    assert "Bearer test-key" in (headers.get("authorization"), f"Bearer {headers.get('x-api-key')}")
    assert anthropic_server.headers[0]["anthropic-version"]
    assert sent["model"] == "claude-haiku-4-5"
    assert (sent["max_tokens"], sent["temperature"]) == (50, 0.5)
    assert sent["system"] == "Be exact.\n\nUse tools."
    assert sent["tools"] == [{"name": "calculator", "description": "Evaluate arithmetic.",
                              "input_schema": CALC.parameters}]
    assert sent["tool_choice"] == {"type": "any"}
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is 12*7?"},
                                     {"type": "text", "text": "Quickly."}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me compute."},
            {"type": "tool_use", "id": "toolu_1", "name": "calculator",
             "input": {"expression": "12*7"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "84"},
            {"type": "text", "text": "And now?"}]},
    ]


async def test_response_maps_tool_use_thinking_and_usage(anthropic_server: AnthropicServer) -> None:
    body = message([THINKING, {"type": "text", "text": "Adding one."}, TOOL_USE], "tool_use",
                   model="claude-haiku-4-5-20251001", input_tokens=1000, output_tokens=100)
    anthropic_server.enqueue(Reply(body=body), Reply(body=message([{"type": "text",
                                                                    "text": "85"}])))
    async with aclosing(_model(anthropic_server)) as model:
        response = await model.complete(HISTORY, [CALC], SETTINGS)
        msg = response.message
        assert (msg.content, msg.thought) == ("Adding one.", "12*7 needs the tool")
        assert msg.tool_calls == (ToolCall("toolu_2", "calculator", {"expression": "84+1"}),)
        assert response.finish_reason == "tool_calls"
        assert response.usage == Usage(1, 1000, 100, (1000 * 1.00 + 100 * 5.00) / 1e6)
        # The signed thinking block goes back ahead of the tool use, as the API requires.
        await model.complete([*HISTORY, msg, Message.tool("toolu_2", "calculator", "85")],
                             [CALC], SETTINGS)
    replayed = anthropic_server.requests[1]["messages"][-2]
    assert replayed == {"role": "assistant", "content": [
        THINKING, {"type": "text", "text": "Adding one."}, TOOL_USE]}
    assert msg.cache[BLOCKS_KEY] == [THINKING]


async def test_streaming_yields_text_thought_and_tool_deltas(
    anthropic_server: AnthropicServer,
) -> None:
    body = message([THINKING, {"type": "text", "text": "Adding one now."}, TOOL_USE],
                   "tool_use", input_tokens=30, output_tokens=20)
    anthropic_server.enqueue(Reply(sse=events(body)))
    async with aclosing(_model(anthropic_server)) as model:
        items = [i async for i in model.stream(HISTORY, [CALC], SETTINGS)]
    assert anthropic_server.requests[0]["stream"] is True
    deltas = [i for i in items if isinstance(i, TextDelta)]
    assert deltas[0] == TextDelta("12*7 needs the tool", "thought")
    assert "".join(d.text for d in deltas if d.kind == "text") == "Adding one now."
    assert "".join(d.text for d in deltas if d.kind == "tool_call") == '{"expression":"84+1"}'
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert final.message.content == "Adding one now."
    assert final.message.thought == "12*7 needs the tool"
    assert final.message.tool_calls == (ToolCall("toolu_2", "calculator",
                                                 {"expression": "84+1"}),)
    assert final.message.cache[BLOCKS_KEY] == [THINKING]
    assert (final.finish_reason, final.usage.input_tokens, final.usage.output_tokens) == (
        "tool_calls", 30, 20)


async def test_rate_limits_are_retried_by_thinkloop_not_the_sdk(
    anthropic_server: AnthropicServer,
) -> None:
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    anthropic_server.enqueue(Reply(429, error, {"retry-after": "0"}),
                             Reply(body=message([{"type": "text", "text": "ok"}])))
    async with aclosing(_model(anthropic_server)) as model:
        response = await model.complete(HISTORY, [], SETTINGS)
        assert response.message.content == "ok"
        assert len(anthropic_server.requests) == 2
        anthropic_server.enqueue(*[Reply(529, {"type": "error", "error": {
            "type": "overloaded_error", "message": "Overloaded"}})] * 3)
        with pytest.raises(RetriesExhaustedError, match="gave up after 3 attempts: model "
                                                        "endpoint answered HTTP 529"):
            await model.complete(HISTORY, [], SETTINGS)
    assert len(anthropic_server.requests) == 5


async def test_errors_map_to_the_thinkloop_tree(anthropic_server: AnthropicServer) -> None:
    too_long = {"type": "error", "error": {"type": "invalid_request_error",
                                           "message": "prompt is too long: 210000 tokens > "
                                                      "200000 maximum"}}
    anthropic_server.enqueue(Reply(400, too_long), Reply(401, {"type": "error", "error": {
        "type": "authentication_error", "message": "invalid x-api-key"}}))
    async with aclosing(_model(anthropic_server)) as model:
        with pytest.raises(ContextOverflowError):
            await model.complete(HISTORY, [], SETTINGS)
        with pytest.raises(ModelAuthError, match="invalid x-api-key"):
            await model.complete(HISTORY, [], SETTINGS)
    assert len(anthropic_server.requests) == 2


def test_build_reads_key_and_base_url() -> None:
    model = build_anthropic("claude-x", {"ANTHROPIC_API_KEY": "k",
                                         "THINKLOOP_MODEL_MAX_ATTEMPTS": "7"})
    assert (model.name, model.api_key, model.base_url) == ("anthropic:claude-x", "k", None)
    assert model.retry.max_attempts == 7
