"""History clean-up before a provider sees it: plain functions ``messages -> messages``.

Providers reject histories that the loop can legitimately hold after trimming or a crash: a tool
result whose call was cut away, a call whose result never arrived, two user turns in a row
(GoClaw ``sanitizeHistory``, Stingyclaw's Gemini table). Each provider runs the functions its
quirks need; a function returns its input unchanged when there is nothing to fix, so the
per-message wire encodings memoised in ``Message.cache`` stay valid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from thinkloop.core.types import Message, ToolCall

Sanitizer = Callable[[Sequence[Message]], Sequence[Message]]

MISSING_RESULT = "[tool result missing: the history was trimmed]"


def repair_tool_pairs(messages: Sequence[Message]) -> Sequence[Message]:
    """Drop tool results with no matching call; add a placeholder for calls with no result."""
    if _pairs_ok(messages):
        # The common case before every model call: nothing to repair, nothing to allocate.
        return messages
    out: list[Message] = []
    expected: dict[str, ToolCall] = {}
    changed = False
    for m in messages:
        if m.role == "tool":
            if m.tool_call_id in expected:
                del expected[m.tool_call_id]
                out.append(m)
            else:
                changed = True
            continue
        if expected:
            out.extend(_placeholders(expected))
            changed = True
        expected = {c.id: c for c in m.tool_calls} if m.role == "assistant" else {}
        out.append(m)
    if expected:
        out.extend(_placeholders(expected))
        changed = True
    return out if changed else messages


def _pairs_ok(messages: Sequence[Message]) -> bool:
    """True when every call is answered exactly once right after it and no result is orphan."""
    # Runs over the whole history before every model call: no list per step, no pop(0).
    calls: tuple[ToolCall, ...] = ()
    answered = 0  # how many of ``calls`` the tool messages since them answered, in order
    for m in messages:
        if m.role == "tool":
            if answered >= len(calls) or m.tool_call_id != calls[answered].id:
                return False
            answered += 1
        elif answered < len(calls):
            return False
        elif m.role == "assistant":
            calls, answered = m.tool_calls, 0
    return answered >= len(calls)


def _placeholders(expected: dict[str, ToolCall]) -> list[Message]:
    calls = list(expected.values())
    expected.clear()
    return [Message.tool(c.id, c.name, MISSING_RESULT) for c in calls]


def merge_consecutive(messages: Sequence[Message]) -> Sequence[Message]:
    """Fold runs of same-role turns into one, for providers that demand strict alternation.

    Text-only user and system turns are joined; an assistant text turn followed by another
    assistant turn is folded into the second, which keeps its tool calls.
    """
    out: list[Message] = []
    changed = False
    for m in messages:
        prev = out[-1] if out else None
        if prev is None or prev.role != m.role or m.role == "tool" or prev.parts or m.parts:
            out.append(m)
            continue
        if m.role == "assistant" and prev.tool_calls:
            out.append(m)
            continue
        changed = True
        text = "\n\n".join(t for t in (prev.content, m.content) if t)
        if m.role == "assistant":
            thought = "\n\n".join(t for t in (prev.thought, m.thought) if t) or None
            out[-1] = Message.assistant(text, m.tool_calls, thought)
        else:
            out[-1] = Message(m.role, text)
    return out if changed else messages


def trim_history(messages: Sequence[Message], keep_last: int = 10) -> list[Message] | None:
    """The context-overflow fallback (Stingyclaw): system prompt, first user turn, last N.

    Returns ``None`` when there is nothing left to cut, so a caller knows a retry is pointless.
    """
    head = 0
    while head < len(messages) and messages[head].role == "system":
        head += 1
    first_user = next((i for i in range(head, len(messages)) if messages[i].role == "user"), None)
    start = max(len(messages) - keep_last, head)
    kept = list(messages[:head])
    if first_user is not None and first_user < start:
        kept.append(messages[first_user])
        start = max(start, first_user + 1)
    if len(kept) + len(messages) - start >= len(messages):
        return None
    return list(repair_tool_pairs([*kept, *messages[start:]]))
