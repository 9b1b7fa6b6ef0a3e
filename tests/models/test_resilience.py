"""Retries, Retry-After, typed give-up, overflow recovery and fallback over real HTTP."""

import asyncio
import email.utils
import socket
import time
from contextlib import aclosing
from pathlib import Path

import pytest

from thinkloop.agent import Agent
from thinkloop.errors import (
    ContextOverflowError,
    ModelAuthError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
)
from thinkloop.models.base import ModelSettings
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.retry import RetriesExhaustedError, RetryPolicy
from thinkloop.models.transport import retry_after_s
from thinkloop.models.wrappers import FallbackModel, OverflowRecovery
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion
from thinkloop.types import Message, ModelResponse, TextDelta, ToolCall

FAST = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.01)
SETTINGS = ModelSettings(timeout_s=5)
TASK = [Message.system("sys"), Message.user("task")]
OVERFLOW = {"error": {"message": "This model's maximum context length is 8192 tokens. "
                                 "However, your messages resulted in 9000 tokens.",
                      "code": "context_length_exceeded"}}


def _model(srv: OpenAIServer, name: str = "m", retry: RetryPolicy = FAST) -> OpenAICompatModel:
    return OpenAICompatModel(name, base_url=srv.base_url, retry=retry)


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


async def test_429_is_retried_and_then_answers(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply(429, {"error": "slow down"}, {"retry-after": "0"}),
                          Reply(body=completion("hello")))
    async with aclosing(_model(openai_server)) as model:
        response = await model.complete(TASK, [], SETTINGS)
    assert response.message.content == "hello"
    assert len(openai_server.requests) == 2


async def test_retry_after_is_honoured(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply(503, {"error": "busy"}, {"retry-after": "0.3"}),
                          Reply(body=completion("ok")))
    policy = RetryPolicy(max_attempts=2, base_delay_s=0.0, max_delay_s=5)
    async with aclosing(_model(openai_server, retry=policy)) as model:
        started = time.monotonic()
        await model.complete(TASK, [], SETTINGS)
    assert time.monotonic() - started >= 0.3


async def test_giving_up_raises_a_typed_error_after_the_attempt_limit(
    openai_server: OpenAIServer,
) -> None:
    openai_server.enqueue(*[Reply(500, {"error": "boom"}) for _ in range(4)])
    policy = RetryPolicy(max_attempts=4, base_delay_s=0.001)
    async with aclosing(_model(openai_server, retry=policy)) as model:
        with pytest.raises(RetriesExhaustedError) as info:
            await model.complete(TASK, [], SETTINGS)
    assert len(openai_server.requests) == 4
    assert info.value.attempts == 4
    assert isinstance(info.value.last_error, ModelHTTPError)
    assert info.value.last_error.status == 500
    assert str(info.value) == ('gave up after 4 attempts: model endpoint answered HTTP 500: '
                               '{"error":"boom"}')


async def test_auth_errors_are_not_retried(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply(401, {"error": "bad key"}))
    async with aclosing(_model(openai_server)) as model:
        with pytest.raises(ModelAuthError):
            await model.complete(TASK, [], SETTINGS)
    assert len(openai_server.requests) == 1


async def test_unreachable_endpoint_gives_up_with_connection_error() -> None:
    async with aclosing(OpenAICompatModel("m", base_url=_dead_url(), retry=FAST)) as model:
        with pytest.raises(RetriesExhaustedError) as info:
            await model.complete(TASK, [], SETTINGS)
    assert isinstance(info.value.last_error, ModelConnectionError)


async def test_timeouts_are_retried(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply(body=completion("late"), delay_s=0.3),
                          Reply(body=completion("on time")))
    async with aclosing(_model(openai_server)) as model:
        response = await model.complete(TASK, [], ModelSettings(timeout_s=0.1))
    assert response.message.content == "on time"
    openai_server.enqueue(Reply(body=completion("late"), delay_s=0.3))
    async with aclosing(_model(openai_server, retry=RetryPolicy(max_attempts=1))) as model:
        with pytest.raises(ModelTimeoutError):
            await model.complete(TASK, [], ModelSettings(timeout_s=0.1))
    # Let the server finish its late replies so its connections close before it stops.
    await asyncio.sleep(0.4)


def _long_history() -> list[Message]:
    history = list(TASK)
    for i in range(8):
        call = ToolCall(f"c{i}", "echo", {"i": i})
        history += [Message.assistant("", (call,)), Message.tool(f"c{i}", "echo", f"r{i}")]
    return history


async def test_overflow_trims_and_retries_once(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply(400, OVERFLOW), Reply(body=completion("fits now")))
    history = _long_history()
    async with aclosing(OverflowRecovery(_model(openai_server))) as model:
        response = await model.complete(history, [], SETTINGS)
    assert response.message.content == "fits now"
    first, second = openai_server.requests
    assert len(first["messages"]) == 18
    # system, first user turn, then the last 10 with the leading orphan result dropped:
    # calls c3..c7 each with their result.
    assert [m.get("content") for m in second["messages"][:2]] == ["sys", "task"]
    rest = second["messages"][2:]
    assert [(m["role"], m.get("tool_call_id")) for m in rest] == [
        x for i in range(3, 8) for x in (("assistant", None), ("tool", f"c{i}"))
    ]
    assert [m["tool_calls"][0]["id"] for m in rest if m["role"] == "assistant"] == [
        f"c{i}" for i in range(3, 8)
    ]


async def test_overflow_twice_propagates(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply(400, OVERFLOW), Reply(400, OVERFLOW))
    async with aclosing(OverflowRecovery(_model(openai_server))) as model:
        with pytest.raises(ContextOverflowError):
            await model.complete(_long_history(), [], SETTINGS)
    assert len(openai_server.requests) == 2


async def test_overflow_with_nothing_to_trim_is_not_retried(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply(400, OVERFLOW))
    async with aclosing(OverflowRecovery(_model(openai_server))) as model:
        with pytest.raises(ContextOverflowError):
            await model.complete(TASK, [], SETTINGS)
    assert len(openai_server.requests) == 1


async def test_streaming_overflow_recovers_too(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply(400, OVERFLOW), Reply(body=completion("streamed")))
    async with aclosing(OverflowRecovery(_model(openai_server))) as model:
        items = [i async for i in model.stream(_long_history(), [], SETTINGS)]
    assert "".join(i.text for i in items if isinstance(i, TextDelta)) == "streamed"
    assert isinstance(items[-1], ModelResponse)
    assert len(openai_server.requests[1]["messages"]) == 12


async def test_fallback_answers_from_the_next_model_and_says_which(
    openai_server: OpenAIServer,
) -> None:
    dead = OpenAICompatModel("a", base_url=_dead_url(), retry=FAST, name="openai:a")
    alive = OpenAICompatModel("b", base_url=openai_server.base_url, retry=FAST, name="compat:b")
    openai_server.enqueue(Reply(body=completion("from b")), Reply(body=completion("again b")))
    async with aclosing(FallbackModel([dead, alive])) as model:
        response = await model.complete(TASK, [], SETTINGS)
        assert (response.message.content, response.model) == ("from b", "compat:b")
        items = [i async for i in model.stream(TASK, [], SETTINGS)]
    assert isinstance(items[-1], ModelResponse)
    assert (items[-1].message.content, items[-1].model) == ("again b", "compat:b")
    assert [r["model"] for r in openai_server.requests] == ["b", "b"]


async def test_fallback_reports_every_failure_when_all_fail(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply(401, {"error": "bad key"}))
    dead = OpenAICompatModel("a", base_url=_dead_url(), retry=FAST, name="openai:a")
    async with aclosing(FallbackModel([dead, _model(openai_server, "b")])) as model:
        with pytest.raises(ModelError, match=r"^all 2 models failed: openai:a: gave up after 3 "
                                             r"attempts: cannot reach .*; openai:b: model "
                                             r"endpoint answered HTTP 401"):
            await model.complete(TASK, [], SETTINGS)


async def test_agent_accepts_a_fallback_list(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply(500, {"error": "down"}), Reply(body=completion("42")))
    first = _model(openai_server, "a", RetryPolicy(max_attempts=1))
    second = _model(openai_server, "b")
    agent = Agent(model=[first, second], tools=[])
    events = [e async for e in agent.stream("question")]
    responses = [e.payload for e in events if e.type == "llm.response"]
    assert [(p["text"], p["model"]) for p in responses] == [("42", "openai:b")]
    assert [r["model"] for r in openai_server.requests] == ["a", "b"]
    await first.aclose()
    await second.aclose()


def test_retry_after_forms() -> None:
    assert retry_after_s({"retry-after": "2"}) == 2.0
    assert retry_after_s({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= (retry_after_s({"retry-after": later}) or 0) <= 30
    assert retry_after_s({"retry-after": "soon"}) is None
    assert retry_after_s({}) is None


def test_fallback_reads_only_the_content_kinds_every_member_reads(tmp_path: Path) -> None:
    from thinkloop.models.anthropic import AnthropicModel
    from thinkloop.models.local import LocalModel

    srv_free = OpenAICompatModel("m", base_url="http://127.0.0.1:9/v1")
    claude = OverflowRecovery(AnthropicModel("c", api_key="k"))
    assert FallbackModel([claude, srv_free]).input_kinds == {"image"}
    assert FallbackModel([claude, claude]).input_kinds == {"image", "document"}
    assert FallbackModel([claude, LocalModel(tmp_path / "m.gguf")]).input_kinds == set()
