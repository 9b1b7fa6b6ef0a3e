"""Step compaction within one run (OrcBot's "Step History Compaction").

Once a run passes ``compact_steps_after`` steps, the middle steps' messages are replaced by a
tally of what their tools did, so a long run's prompt stops growing while its first steps (the
plan) and most recent steps (the current work) stay whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from thinkloop.core.types import OBSERVATION, Message

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


def run_steps(
    messages: Sequence[Message], roles: Sequence[str] | None = None
) -> tuple[int, list[tuple[int, int]]]:
    """Where the current run's task is, and the ``[start, end)`` span of each of its steps.

    The run starts at the last user message in the user's words (:func:`is_task`); each
    assistant message starts a step that owns the tool results right after it (tool messages,
    or the observation message of a text protocol). Notices belong to the step before them.
    ``roles``: each message's role, when the caller has them already.
    """
    # Runs before every model call over the whole history: plain role strings, compared in
    # list comprehensions, keep a long run's step cheap.
    roles = [m.role for m in messages] if roles is None else roles
    task = -1
    for i in range(len(roles) - 1, -1, -1):
        if roles[i] == "user" and is_task(messages[i]):
            task = i
            break
    starts = [i for i in range(task + 1, len(roles)) if roles[i] == "assistant"]
    ends = [*starts[1:], len(roles)] if starts else []
    return task, list(zip(starts, ends, strict=True))


def tally(messages: Sequence[Message]) -> str:
    """``... name xN (ok ok, err err)`` per tool, in order of first use."""
    counts: dict[str, list[int]] = {}
    for m in messages:
        if m.role == "tool":
            ok_err = counts.setdefault(m.name or "?", [0, 0])
            ok_err[1 if m.content.startswith(_FAILED_PREFIXES) else 0] += 1
        elif m.role == "user" and m.name == OBSERVATION:
            for name, failed in _observed(m):
                counts.setdefault(name, [0, 0])[failed] += 1
    return "\n".join(f"... {n} x{ok + err} ({ok} ok, {err} err)" for n, (ok, err) in counts.items())


def _observed(m: Message) -> tuple[tuple[str, int], ...]:
    """The (tool, 1 if it failed) of each result in a text protocol's observation message,
    read once per message: a long run tallies the same middle steps before every call."""
    found = m.cache.get("tally")
    if found is None:
        found = m.cache["tally"] = tuple((name, 1 if error else 0)
                                         for name, error in _OBSERVED.findall(m.content))
    return found


def compact_steps(messages: list[Message], settings: ContextSettings) -> list[Message]:
    # Every step starts with an assistant message: too few of those means nothing to compact.
    roles = [m.role for m in messages]
    if roles.count("assistant") <= settings.compact_steps_after:
        return messages
    _, steps = run_steps(messages, roles)
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
