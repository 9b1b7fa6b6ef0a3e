"""Step compaction within one run (OrcBot's "Step History Compaction").

Once a run passes ``compact_steps_after`` steps, the middle steps' messages are replaced by a
tally of what their tools did, so a long run's prompt stops growing while its first steps (the
plan) and most recent steps (the current work) stay whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from thinkloop.types import Message

if TYPE_CHECKING:
    from thinkloop.context.pipeline import ContextSettings

TALLY_HEAD = "--- [{n} middle steps compacted] ---"
TALLY_TAIL = "--- [recent steps below] ---"
_FAILED_PREFIXES = ("Error:", "[no result")


def is_tally(m: Message) -> bool:
    return m.role == "user" and m.content.startswith("--- [") and TALLY_TAIL in m.content


def run_steps(messages: Sequence[Message]) -> tuple[int, list[tuple[int, int]]]:
    """Where the current run's task is, and the ``[start, end)`` span of each of its steps.

    The run starts at the last user message that is not a tally; each assistant message starts
    a step that owns the tool results right after it. Other user messages (a retry notice)
    belong to the step before them.
    """
    task = next(
        (i for i in range(len(messages) - 1, -1, -1)
         if messages[i].role == "user" and not is_tally(messages[i])),
        -1,
    )
    starts = [i for i in range(task + 1, len(messages)) if messages[i].role == "assistant"]
    ends = [*starts[1:], len(messages)] if starts else []
    return task, list(zip(starts, ends, strict=True))


def tally(messages: Sequence[Message]) -> str:
    """``... name xN (ok ok, err err)`` per tool, in order of first use."""
    counts: dict[str, list[int]] = {}
    for m in messages:
        if m.role == "tool":
            ok_err = counts.setdefault(m.name or "?", [0, 0])
            ok_err[1 if m.content.startswith(_FAILED_PREFIXES) else 0] += 1
    return "\n".join(f"... {n} x{ok + err} ({ok} ok, {err} err)" for n, (ok, err) in counts.items())


def compact_steps(messages: list[Message], settings: ContextSettings) -> list[Message]:
    # Every step starts with an assistant message: too few of those means nothing to compact.
    if sum(m.role == "assistant" for m in messages) <= settings.compact_steps_after:
        return messages
    _, steps = run_steps(messages)
    if len(steps) <= settings.compact_steps_after:
        return messages
    first, recent = settings.keep_first_steps, settings.keep_recent_steps
    middle = steps[first : len(steps) - recent]
    if not middle:
        return messages
    start, end = middle[0][0], middle[-1][1]
    lines = [TALLY_HEAD.format(n=len(middle))]
    if body := tally(messages[start:end]):
        lines.append(body)
    lines.append(TALLY_TAIL)
    return [*messages[:start], Message.user("\n".join(lines)), *messages[end:]]
