"""The OpenAI-compatible endpoint driven by the official ``openai`` client."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest
from tests.server.conftest import Stack
from tests.server.test_runs import calling

from thinkloop.memory.tools import NO_OWNER
from thinkloop.store.sqlite import SQLiteStore
from thinkloop.testing.openai_server import Reply, completion


def client(stack: Stack, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.url + "/v1", api_key=key, max_retries=0, timeout=30)


def test_an_agent_answers_as_a_model(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(calling("c1", "calculator", {"expression": "12*7"}),
                        Reply(body=completion("12*7 = 84")))
    oai = client(stack, stack.gateway.key("ana"))
    assert [m.id for m in oai.models.list()] == ["asker", "bench", "helper", "keeper", "worker"]
    reply = oai.chat.completions.create(
        model="helper", messages=[{"role": "user", "content": "What is 12*7?"}])
    assert reply.choices[0].message.content == "12*7 = 84"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.prompt_tokens == 20
    # The agent used its tool on the way.
    tool_msgs = [m for m in stack.model.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == ["84"]


def test_earlier_turns_become_the_runs_history(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(Reply(body=completion("Your name is Ana.")))
    oai = client(stack, stack.gateway.key("ana"))
    reply = oai.chat.completions.create(model="helper", messages=[
        {"role": "system", "content": "ignored: the agent has its own instructions"},
        {"role": "user", "content": "My name is Ana."},
        {"role": "assistant", "content": "Nice to meet you, Ana."},
        {"role": "user", "content": "What is my name?"},
    ])
    assert reply.choices[0].message.content == "Your name is Ana."
    sent = [(m["role"], m["content"]) for m in stack.model.requests[0]["messages"][1:]]
    assert sent[:3] == [("user", "My name is Ana."), ("assistant", "Nice to meet you, Ana."),
                        ("user", "What is my name?")]
    assert "ignored" not in str(stack.model.requests[0])


def test_streaming(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(
        Reply(body=completion("Let me check.",
                              tool_calls=[("calculator", {"expression": "2**8"})])),
        # Paced as a real model's tokens are: a burst is read, and streamed on, as one delta.
        Reply(body=completion("2**8 is 256, a byte's worth of values."), pace_s=0.02),
    )
    oai = client(stack, stack.gateway.key("ana"))
    stream = oai.chat.completions.create(
        model="helper", stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "2**8?"}])
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Let me check.\n\n2**8 is 256, a byte's worth of values."
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 3
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 30


def test_errors_reach_the_openai_client(stack: Stack) -> None:
    oai = client(stack, stack.gateway.key("ana"))
    with pytest.raises(openai.NotFoundError, match="no agent named 'gpt-4o'"):
        oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.AuthenticationError, match="invalid API key"):
        client(stack, "tlk_bad_key").chat.completions.create(
            model="helper", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError, match="last message must be a user message"):
        oai.chat.completions.create(model="helper",
                                    messages=[{"role": "assistant", "content": "hi"}])
    stack.model.clear()
    stack.model.enqueue(*[Reply(status=500, body={"error": "down"})] * 5)
    with pytest.raises(openai.APIStatusError, match="HTTP 500") as info:
        oai.chat.completions.create(model="helper", messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 502


def _memory_keys(stack: Stack, owner: str, *, drop: bool = False) -> list[str]:
    """The owner's memory keys, read through a store of its own (deleted when ``drop``)."""
    async def read() -> list[str]:
        store = SQLiteStore(stack.gateway.store_path)
        try:
            keys = [m.key for m in await store.memories(owner)]
            for key in keys if drop else []:
                await store.delete_memory(owner, key)
            return keys
        finally:
            await store.aclose()
    return asyncio.run(read())


def _remembering(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(calling("r1", "remember", {"key": "capital", "content": "Paris"}),
                        Reply(body=completion("Paris")))


def test_a_request_without_a_session_is_stateless(stack: Stack) -> None:
    """No session named: no memory is written (or read), whatever the agent's tools do."""
    oai = client(stack, stack.gateway.key("ana"))
    _remembering(stack)
    reply = oai.chat.completions.create(
        model="keeper", messages=[{"role": "user", "content": "Capital of France?"}])
    assert reply.choices[0].message.content == "Paris"
    tool = [m for m in stack.model.requests[1]["messages"] if m["role"] == "tool"]
    assert tool[0]["content"] == NO_OWNER
    assert _memory_keys(stack, "user:ana") == []


@pytest.mark.parametrize("named", [{"user": "ana@example.com"},
                                   {"extra_headers": {"X-Thinkloop-Session": "trip"}}])
def test_a_request_that_names_a_session_keeps_memory(stack: Stack, named: dict[str, object],
                                                      ) -> None:
    oai = client(stack, stack.gateway.key("bo"))
    _remembering(stack)
    reply = oai.chat.completions.create(
        model="keeper", messages=[{"role": "user", "content": "Capital of France?"}],
        **named)  # type: ignore[call-overload]
    assert reply.choices[0].message.content == "Paris"
    assert "capital" in _memory_keys(stack, "user:bo", drop=True)


def test_a_question_or_an_approval_on_this_api_is_answered_at_once(stack: Stack) -> None:
    from thinkloop.server.inputs import NO_ONE_ASKS

    stack.model.clear()
    stack.model.enqueue(calling("q1", "ask_human", {"question": "Which colour?"}),
                        Reply(body=completion("Blue, then.")))
    oai = client(stack, stack.gateway.key("ana"))
    reply = oai.chat.completions.create(  # its client cannot answer: no wait for a person
        model="asker", messages=[{"role": "user", "content": "Paint the fence."}])
    assert reply.choices[0].message.content == "Blue, then."
    # This run's requests only: the model server is shared with other tests' late calls.
    ours = [r for r in stack.model.requests if "Paint the fence." in json.dumps(r)]
    (told,) = [m["content"] for m in ours[1]["messages"] if m["role"] == "tool"]
    assert NO_ONE_ASKS in told
    hub = stack.gateway.server.config.app.state.gateway.hub
    assert hub.unattended == set()  # forgotten when the request ends


async def test_an_unattended_run_is_refused_approval_without_waiting() -> None:
    from thinkloop.guard.approval import ApprovalRequest
    from thinkloop.server.inputs import NO_ONE_APPROVES, InputHub

    hub = InputHub(lambda _run, _event: True)
    hub.unattended.add("r1")
    decision = await asyncio.wait_for(hub.approve(ApprovalRequest(
        "r1", None, "ana", "write_file", {"path": "x"}, "c1", "writes a file")), 1.0)
    assert (decision.approved, decision.reason) == (False, NO_ONE_APPROVES)
    assert hub.pending("r1") == []
