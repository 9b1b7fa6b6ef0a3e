"""Step compaction within one run (OrcBot's "Step History Compaction").

Once a run passes ``compact_steps_after`` steps, the middle steps' messages are replaced by a
tally of what their tools did, so a long run's prompt stops growing while its first steps (the
plan) and most recent steps (the current work) stay whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from thinkloop.types import OBSERVATION, Message

if TYPE_CHECKING:
    from thinkloop.context.pipeline import ContextSettings

TALLY_HEAD = "--- [{n} middle steps compacted] ---"
TALLY_TAIL = "--- [recent steps below] ---"
_FAILED_PREFIXES = ("Error:", "[no result")
# One result in a text protocol's observation message (protocols/text.py format_observations).
_OBSERVED = re.compile(r"^\[Tool ([^\]\n]+)\]( ERROR)?:", re.MULTILINE)


def is_tally(m: Message) -> bool:
    return m.role == "user" and m.content.startswith("--- [") and TALLY_TAIL in m.content


def is_task(m: Message) -> bool:
    """A user message in the user's own words (not tool results, a notice or a tally)."""
    return m.role == "user" and not m.from_loop and not is_tally(m)


def run_steps(messages: Sequence[Message]) -> tuple[int, list[tuple[int, int]]]:
    """Where the current run's task is, and the ``[start, end)`` span of each of its steps.

    The run starts at the last user message in the user's words (:func:`is_task`); each
    assistant message starts a step that owns the tool results right after it (tool messages,
    or the observation message of a text protocol). Notices belong to the step before them.
    """
    task = next((i for i in range(len(messages) - 1, -1, -1) if is_task(messages[i])), -1)
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
        elif m.role == "user" and m.name == OBSERVATION:
            for name, error in _OBSERVED.findall(m.content):
                counts.setdefault(name, [0, 0])[1 if error else 0] += 1
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
