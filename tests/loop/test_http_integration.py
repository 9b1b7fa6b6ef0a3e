"""The loop end to end over real HTTP, against the deterministic loopback server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from thinkloop import Agent, tool
from thinkloop.guard import GuardSettings
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.testing.openai_server import OpenAIServer


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@pytest.mark.parametrize("stream", [False, True])
async def test_three_tool_steps_over_http(server: OpenAIServer, stream: bool) -> None:
    server.clear()
    model = OpenAICompatModel("steps-3", base_url=server.base_url, api_key="sk-test")
    agent = Agent(model, tools=[echo], guard=GuardSettings.off())
    try:
        handle = agent.start("go", stream_model=stream)
        events = [e async for e in handle]
        result = await handle.result()
    finally:
        await model.aclose()
    assert result.status == "completed"
    assert result.output == "done after 3 steps"
    assert [r.content for s in result.steps for r in s.results] == [
        "echo: step 1", "echo: step 2", "echo: step 3"]
    assert result.usage.requests == 4
    assert result.usage.input_tokens == 40 and result.usage.output_tokens == 20
    assert len(server.requests) == 4
    last = server.requests[-1]
    assert last["model"] == "steps-3"
    assert [m["role"] for m in last["messages"]] == [
        "system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool"]
    assistant = dict(last["messages"][2])
    assert assistant.pop("content", None) is None  # empty content is dropped or null
    assert assistant == {
        "role": "assistant",
        "tool_calls": [{"id": "call_0", "type": "function",
                        "function": {"name": "echo", "arguments": '{"text":"step 1"}'}}],
    }
    assert last["messages"][3] == {"role": "tool", "tool_call_id": "call_0",
                                   "content": "echo: step 1"}
    assert last["tools"][0]["function"]["name"] == "echo"
    assert server.headers[0]["authorization"] == "Bearer sk-test"
    assert bool(last.get("stream")) is stream
    if stream:
        text = "".join(e.payload["content"] for e in events
                       if e.type == "chunk" and e.payload["kind"] == "text")
        assert text == "done after 3 steps"


async def test_unreachable_endpoint_fails_with_one_clear_error() -> None:
    model = OpenAICompatModel("x", base_url="http://127.0.0.1:9/v1")
    model.retry = type(model.retry)(max_attempts=1)
    try:
        result = await Agent(model).run("hi")
    finally:
        await model.aclose()
    assert result.status == "failed"
    assert result.error is not None
    assert "cannot reach http://127.0.0.1:9/v1/chat/completions" in result.error
