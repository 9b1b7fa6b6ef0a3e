"""A small model repeats its last call instead of answering: recognised, and asked once more
with tools withheld (models.local's ``complete`` and ``stream``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from thinkloop.core.types import Message, ModelResponse, ToolSpec
from thinkloop.models.narrow import step_pending


def repeats_last_call(messages: Sequence[Message], reply: Message) -> bool:
    """Whether ``reply`` repeats, exactly, the last call the model made, which already
    succeeded. A small model does this instead of answering; it is then asked once more
    with tools withheld (one extra generation instead of a wasted step)."""
    if len(reply.tool_calls) != 1:
        return False
    call = reply.tool_calls[0]
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role == "assistant" and m.tool_calls:
            prev = m.tool_calls[-1]
            result = next((r for r in messages[i + 1:] if r.tool_call_id == prev.id), None)
            ok = result is not None and not result.content.startswith("Error")
            return ok and (prev.name, prev.arguments) == (call.name, call.arguments)
    return False


def asked_again(first: ModelResponse, again: ModelResponse) -> ModelResponse:
    """The reply asked for again after ``first`` repeated a call: both calls' usage, and the
    larger cut to fit the window."""
    return replace(again, usage=first.usage + again.usage,
                   cut_chars=max(first.cut_chars, again.cut_chars),
                   window=first.window or again.window)


def after_repeat(messages: Sequence[Message], tools: Sequence[ToolSpec],
                  response: ModelResponse) -> list[ToolSpec]:
    """The tools to ask again with after a repeated call: none (answer now), or, while the
    task names a step not taken yet, the others (measured: after "Read price.txt, then use
    the calculator..." SmolLM2 repeated the read, then answered with the price)."""
    if not step_pending(messages):
        return []
    repeated = response.message.tool_calls[0].name
    return [t for t in tools if t.name != repeated]
