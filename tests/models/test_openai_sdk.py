"""An injected official openai client behaves like the lean provider, errors included."""

from contextlib import aclosing

import openai
import pytest

from thinkloop.errors import ContextOverflowError, ModelAuthError, ModelRateLimitError
from thinkloop.models.base import ModelSettings
from thinkloop.models.openai_sdk import OpenAISDKModel
from thinkloop.models.registry import resolve_model
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion
from thinkloop.types import Message, ModelResponse, TextDelta, ToolCall, ToolSpec, Usage

SETTINGS = ModelSettings(timeout_s=5, max_tokens=20)
ECHO = ToolSpec("echo", "Echo.", {"type": "object", "properties": {"text": {"type": "string"}}})
TASK = [Message.system("sys"), Message.user("task")]


def _model(srv: OpenAIServer, max_retries: int = 0) -> OpenAISDKModel:
    client = openai.AsyncOpenAI(api_key="k", base_url=srv.base_url, max_retries=max_retries)
    return OpenAISDKModel(client, "gpt-4o-mini")


async def test_completion_tool_calls_reasoning_and_cost(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply(body=completion(None, [("echo", {"text": "hi"})],
                                                reasoning="why not", model="gpt-4o-mini",
                                                prompt_tokens=100, completion_tokens=10)))
    async with aclosing(_model(openai_server)) as model:
        response = await model.complete(TASK, [ECHO], SETTINGS)
    assert response.message.tool_calls == (ToolCall("call_0", "echo", {"text": "hi"}),)
    assert response.message.thought == "why not"
    assert response.usage == Usage(1, 100, 10, (100 * 0.15 + 10 * 0.60) / 1e6)
    sent = openai_server.requests[0]
    assert sent["messages"] == [{"role": "system", "content": "sys"},
                                {"role": "user", "content": "task"}]
    assert sent["tools"][0]["function"]["name"] == "echo"
    assert sent["max_tokens"] == 20


async def test_streaming(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply(body=completion("hello there")))
    async with aclosing(_model(openai_server)) as model:
        items = [i async for i in model.stream(TASK, [], SETTINGS)]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert "".join(i.text for i in items if isinstance(i, TextDelta)) == "hello there"
    assert final.usage == Usage(1, 10, 5, unpriced=1)  # "fake" has no known price


async def test_sdk_errors_map_to_the_thinkloop_tree(openai_server: OpenAIServer) -> None:
    overflow = {"error": {"message": "maximum context length is 8192 tokens",
                          "code": "context_length_exceeded"}}
    openai_server.enqueue(Reply(401, {"error": {"message": "bad key"}}),
                          Reply(429, {"error": {"message": "slow"}}, {"retry-after": "7"}),
                          Reply(400, overflow))
    async with aclosing(_model(openai_server)) as model:
        with pytest.raises(ModelAuthError):
            await model.complete(TASK, [], SETTINGS)
        with pytest.raises(ModelRateLimitError) as info:
            await model.complete(TASK, [], SETTINGS)
        assert info.value.retry_after == 7.0
        with pytest.raises(ContextOverflowError):
            await model.complete(TASK, [], SETTINGS)


async def test_the_sdk_does_its_own_retries(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply(503, {"error": "busy"}, {"retry-after": "0"}),
                          Reply(body=completion("ok")))
    async with aclosing(_model(openai_server, max_retries=2)) as model:
        response = await model.complete(TASK, [], SETTINGS)
    assert response.message.content == "ok"
    assert len(openai_server.requests) == 2


async def test_an_injected_model_passes_through_resolution(openai_server: OpenAIServer) -> None:
    model = _model(openai_server)
    assert resolve_model(model) is model
    await model.aclose()
