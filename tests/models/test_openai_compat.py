"""The lean OpenAI-compatible provider: wire sanitizing per preset, reasoning, usage, cost."""

from contextlib import aclosing
from typing import Any

import pytest

from thinkloop.models.base import ModelSettings
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.openai_wire import WireQuirks
from thinkloop.models.presets import COMPAT, GEMINI, OPENAI, STRICT
from thinkloop.models.pricing import price_for, with_cost
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion
from thinkloop.types import Message, ModelResponse, TextDelta, ToolCall, Usage

SETTINGS = ModelSettings(timeout_s=5)
CALL = ToolCall("c1", "echo", {"text": "hi"})
HISTORY = [
    Message.system("sys"),
    Message.tool("orphan", "echo", "stale result"),
    Message.user("task"),
    Message.user("more"),
    Message.assistant("", (CALL,)),
    Message.tool("c1", "echo", "hi"),
]
ASSISTANT_CALL = {"role": "assistant", "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": '{"text":"hi"}'}}
]}


@pytest.mark.parametrize(
    ("quirks", "content", "users"),
    [
        (OPENAI, {"content": None}, [{"role": "user", "content": "task"},
                                     {"role": "user", "content": "more"}]),
        (COMPAT, {"content": ""}, [{"role": "user", "content": "task"},
                                   {"role": "user", "content": "more"}]),
        (STRICT, {}, [{"role": "user", "content": "task"}, {"role": "user", "content": "more"}]),
        (GEMINI, {}, [{"role": "user", "content": "task\n\nmore"}]),
    ],
)
async def test_history_is_sanitized_per_provider_before_sending(
    openai_server: OpenAIServer, quirks: WireQuirks, content: dict[str, object],
    users: list[dict[str, str]],
) -> None:
    openai_server.enqueue(Reply(body=completion("ok")))
    model = OpenAICompatModel("m", base_url=openai_server.base_url, quirks=quirks)
    async with aclosing(model):
        await model.complete(HISTORY, [], SETTINGS)
    sent = openai_server.requests[0]["messages"]
    assert sent == [
        {"role": "system", "content": "sys"},
        *users,
        {**ASSISTANT_CALL, **content},
        {"role": "tool", "tool_call_id": "c1", "content": "hi"},
    ]


async def test_reasoning_is_kept_as_thought_not_answer(openai_server: OpenAIServer) -> None:
    body = completion("42", reasoning="6*7 is 42")
    openai_server.enqueue(Reply(body=body), Reply(body=body))
    model = OpenAICompatModel("m", base_url=openai_server.base_url)
    async with aclosing(model):
        response = await model.complete(HISTORY[:3], [], SETTINGS)
        items = [i async for i in model.stream(HISTORY[:3], [], SETTINGS)]
    assert (response.message.content, response.message.thought) == ("42", "6*7 is 42")
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert (final.message.content, final.message.thought) == ("42", None)
    assert [i for i in items if isinstance(i, TextDelta)] == [TextDelta("42")]


def _folded(items: list[Any]) -> list[TextDelta]:
    out: list[TextDelta] = []
    for d in items:
        if out and out[-1].kind == d.kind:
            out[-1] = TextDelta(out[-1].text + d.text, d.kind)
        else:
            out.append(d)
    return out


async def test_streamed_reasoning_becomes_thought_chunks(openai_server: OpenAIServer) -> None:
    def chunk(delta: dict[str, object]) -> dict[str, Any]:
        return {"model": "r1", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}

    events = [chunk({"reasoning_content": "hmm "}), chunk({"reasoning_content": "yes"}),
              chunk({"content": "answer"}),
              {"model": "r1", "choices": [], "usage": {"prompt_tokens": 7,
                                                        "completion_tokens": 3}}]
    openai_server.enqueue(Reply(sse=events))
    model = OpenAICompatModel("m", base_url=openai_server.base_url)
    async with aclosing(model):
        items = [i async for i in model.stream(HISTORY[:3], [], SETTINGS)]
    # Deltas of one network read are folded (one per kind), so how many there are depends on
    # how the bytes arrived; their text, kinds and order do not.
    assert _folded(items[:-1]) == [TextDelta("hmm yes", "thought"), TextDelta("answer")]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert (final.message.content, final.message.thought) == ("answer", "hmm yes")
    assert final.usage == Usage(1, 7, 3, unpriced=1)  # r1's price is unknown, not $0
    assert openai_server.requests[0]["stream_options"] == {"include_usage": True}


async def test_usage_and_cost_from_the_price_table(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(
        Reply(body=completion("hi", model="gpt-4o-mini-2024-07-18", prompt_tokens=1000,
                              completion_tokens=500)),
        Reply(body=completion("hi", model="some-local-model", prompt_tokens=3)),
    )
    model = OpenAICompatModel("gpt-4o-mini", base_url=openai_server.base_url)
    async with aclosing(model):
        priced = await model.complete(HISTORY[:3], [], SETTINGS)
        unpriced = await model.complete(HISTORY[:3], [], SETTINGS)
    assert priced.usage == Usage(1, 1000, 500, (1000 * 0.15 + 500 * 0.60) / 1e6)
    assert unpriced.usage == Usage(1, 3, 5, 0.0, unpriced=1)


def test_price_lookup_prefers_the_longest_prefix_and_strips_routing() -> None:
    assert price_for("gpt-4.1-mini-2025-04-14") == (0.40, 1.60)
    assert price_for("openai/gpt-4o") == (2.50, 10.00)
    assert price_for("llama3.2") is None
    assert with_cost(Usage(1, 10, 10), "llama3.2") == Usage(1, 10, 10, unpriced=1)
    assert with_cost(Usage(1, 10, 10), "ollama:llama3.2") == Usage(1, 10, 10)  # runs here


def test_a_cached_message_encoding_holds_its_own_size_not_the_encoders_buffer() -> None:
    """A run keeps every message's wire encoding for as long as the message: 200 runs of a long
    session held 7 MB of orjson's 4 KB working buffers before the copy."""
    import tracemalloc

    from thinkloop.models.openai_wire import encode_messages

    messages = [Message.user(f"message {i}: " + "x" * 150) for i in range(200)]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        body = encode_messages(messages, WireQuirks())
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    held = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert held < 3 * len(body)  # the 200 cached encodings and the body; 4 KB each was 800 KB


def test_a_changed_copy_of_an_encoded_message_is_encoded_anew() -> None:
    """``dataclasses.replace`` copies every init field: a memo of the old wire encoding must
    not come along, or the copy is sent with the original's text (a recap, a thought)."""
    from dataclasses import replace

    from thinkloop.models.openai_wire import encode_messages

    asked = Message.user("What is my name?")
    encode_messages([asked], OPENAI)
    recapped = replace(asked, content="Earlier the user said: Ada.\n\nWhat is my name?")
    assert b"Ada" in encode_messages([recapped], OPENAI)
    assert b"Ada" not in encode_messages([asked], OPENAI)
