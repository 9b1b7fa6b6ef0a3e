"""The history pipeline run before every model call (GoClaw sections 5-6).

Each transform is a plain function ``(messages, settings) -> messages``; none mutates its input
and none touches the store, so what the model sees is bounded while the session keeps every
message. Transforms, in order: reasoning blocks out of earlier replies, limit to the last N user
turns, compact a long run's middle steps, two-pass pruning of old tool results, and repair of
tool-call/tool-result pairing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from thinkloop.context.run_compaction import compact_steps, is_task, run_steps
from thinkloop.context.tokens import (
    DEFAULT_WINDOW,
    TokenCounter,
    context_window,
    estimate_tokens,
    heuristic_count,
    message_tokens,
    model_window,
)
from thinkloop.core.types import OBSERVATION, Message
from thinkloop.models.sanitize import repair_tool_pairs
from thinkloop.protocols.sanitize import strip_thinking_tags

CLEARED_RESULT = "[Old tool result content cleared]"


@dataclass(frozen=True)
class ContextSettings:
    """Pipeline knobs; the defaults are GoClaw's."""

    context_window: int = DEFAULT_WINDOW
    history_turns: int | None = None  # keep the last N user turns (None: all)
    # Keep only the last N messages from before the current run (UrchinLoop keeps 30).
    recent_messages: int | None = None
    keep_last_assistants: int = 3
    soft_trim_ratio: float = 0.3
    hard_clear_ratio: float = 0.5
    soft_trim_max_chars: int = 4000
    soft_trim_head: int = 1500
    soft_trim_tail: int = 1500
    # Hard clearing starts only once the prunable tool results add up to this much.
    min_prunable_tool_chars: int = 50_000
    compact_steps_after: int = 10
    keep_first_steps: int = 2
    keep_recent_steps: int = 2
    counter: TokenCounter = heuristic_count


Transform = Callable[[list[Message], ContextSettings], list[Message]]


def settings_for(model: Any, **overrides: object) -> ContextSettings:
    """Settings with the model's context window (a model object's own, through any wrapper;
    a name's from the catalog), any field overridable."""
    window = context_window(model) if isinstance(model, str) else model_window(model)
    if not overrides:
        return _window_settings(window)
    fields: dict[str, object] = {"context_window": window}
    fields.update(overrides)
    return ContextSettings(**fields)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=256)
def _window_settings(window: int) -> ContextSettings:
    # Asked for before every model call; the settings are frozen, so one per window serves.
    return ContextSettings(window)


def _with_content(m: Message, content: str) -> Message:
    # A fresh cache: the old one memoises the wire encoding of the old content.
    return replace(m, content=content)


def _system_head(messages: Sequence[Message]) -> int:
    """How many system messages lead the list."""
    head = 0
    while head < len(messages) and messages[head].role == "system":
        head += 1
    return head


def strip_reasoning(messages: list[Message], settings: ContextSettings) -> list[Message]:
    """``<think>``, ``<<THINK>>`` and the other reasoning blocks out of the model's earlier
    replies (UrchinLoop strips THINK from the history it sends back): the model's private
    notes cost tokens on every later call and the person never saw them."""
    out: list[Message] | None = None
    for i, m in enumerate(messages):
        if m.role != "assistant" or "<" not in m.content:
            continue
        cleaned = strip_thinking_tags(m.content)
        if cleaned != m.content:
            out = out if out is not None else list(messages)
            out[i] = _with_content(m, cleaned.strip())
    return messages if out is None else out


def limit_turns(messages: list[Message], settings: ContextSettings) -> list[Message]:
    """Keep leading system messages and the last N user turns with their replies."""
    n = settings.history_turns
    if n is None:
        return messages
    head = _system_head(messages)
    users = [i for i in range(head, len(messages)) if is_task(messages[i])]
    if len(users) <= n:
        return messages
    return messages[:head] + messages[users[-n] if n > 0 else len(messages) :]


def keep_recent(messages: list[Message], settings: ContextSettings) -> list[Message]:
    """Leading system messages, the last N earlier messages, and the current run whole."""
    n = settings.recent_messages
    if n is None:
        return messages
    head = _system_head(messages)
    task, _ = run_steps(messages)
    if task - head <= n:
        return messages
    return [*messages[:head], *messages[task - n : task], *messages[task:]]


def _prunable(messages: Sequence[Message], keep_last_assistants: int) -> list[int]:
    """Indexes of tool results outside the protected zone."""
    assistants = [i for i, m in enumerate(messages) if m.role == "assistant"]
    if len(assistants) < keep_last_assistants or keep_last_assistants < 0:
        return []
    cutoff = assistants[-keep_last_assistants] if keep_last_assistants else len(messages)
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), len(messages))
    return [i for i in range(first_user + 1, cutoff)
            if messages[i].role == "tool" or messages[i].name == OBSERVATION]


def prune_context(messages: list[Message], settings: ContextSettings) -> list[Message]:
    """Soft-trim big old tool results past 30% of the window; hard-clear them past 50%."""
    window = max(settings.context_window, 1)
    total = estimate_tokens(messages, settings.counter)
    if total / window < settings.soft_trim_ratio:
        return messages
    candidates = _prunable(messages, settings.keep_last_assistants)
    out = list(messages)
    head, tail = settings.soft_trim_head, settings.soft_trim_tail
    for i in candidates:
        text = out[i].content
        if len(text) > settings.soft_trim_max_chars:
            note = f"\n...\n[Tool result trimmed: kept the first {head} and last {tail} of "
            trimmed = text[:head] + note + f"{len(text)} chars]\n...\n" + text[-tail:]
            total += _delta(out, i, trimmed, settings.counter)
    if total / window < settings.hard_clear_ratio:
        return out
    if sum(len(out[i].content) for i in candidates) < settings.min_prunable_tool_chars:
        return out
    for i in candidates:  # oldest first, until back under the threshold
        if total / window < settings.hard_clear_ratio:
            break
        if out[i].content != CLEARED_RESULT:
            total += _delta(out, i, CLEARED_RESULT, settings.counter)
    return out


def _delta(out: list[Message], i: int, content: str, counter: TokenCounter) -> int:
    before = message_tokens(out[i], counter)
    out[i] = _with_content(out[i], content)
    return message_tokens(out[i], counter) - before


def sanitize_tool_pairs(messages: list[Message], settings: ContextSettings) -> list[Message]:
    """Every tool call answered exactly once, right after it; orphan results dropped (the one
    repair, :func:`thinkloop.models.sanitize.repair_tool_pairs`, as a pipeline stage)."""
    repaired = repair_tool_pairs(messages)
    return messages if repaired is messages else list(repaired)


DEFAULT_TRANSFORMS: tuple[Transform, ...] = (
    strip_reasoning,
    limit_turns,
    keep_recent,
    compact_steps,
    prune_context,
    sanitize_tool_pairs,
)


def run_pipeline(
    messages: Sequence[Message],
    settings: ContextSettings,
    transforms: Sequence[Transform] = DEFAULT_TRANSFORMS,
) -> list[Message]:
    out = list(messages)
    for transform in transforms:
        out = transform(out, settings)
    return out

