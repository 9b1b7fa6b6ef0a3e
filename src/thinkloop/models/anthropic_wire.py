"""Messages API shapes: thinkloop messages to Anthropic blocks and back.

Anthropic differs from Chat Completions in ways that matter to a loop: the system prompt is a
separate field, tool results are ``tool_result`` blocks inside a *user* turn, turns must
alternate user/assistant, text blocks must not be empty, and thinking blocks must be sent
back with their signature when tools are in play (they are kept in ``Message.cache``).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from thinkloop.core.types import ContentPart, Message, ModelResponse, ToolCall, ToolSpec, Usage
from thinkloop.models.sanitize import repair_tool_pairs

# Where an assistant message keeps the thinking blocks it arrived with, for replay.
BLOCKS_KEY = "anthropic.thinking"

STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
                "max_tokens": "length"}


def _part(p: ContentPart) -> dict[str, Any] | None:
    if p.kind == "text":
        return {"type": "text", "text": p.text} if p.text else None
    kind = "image" if p.kind == "image" else "document"
    if p.url:
        return {"type": kind, "source": {"type": "url", "url": p.url}}
    data = base64.b64encode(p.data).decode()
    return {"type": kind, "source": {"type": "base64", "media_type": p.media_type, "data": data}}


def _blocks(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        return [{"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}]
    blocks: list[dict[str, Any]] = []
    if m.role == "assistant":
        blocks.extend(m.cache.get(BLOCKS_KEY, ()))
    if m.content.strip():
        blocks.append({"type": "text", "text": m.content})
    for p in m.parts:
        block = _part(p)
        if block is not None:
            blocks.append(block)
    for c in m.tool_calls:
        blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments})
    return blocks


def encode(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """Return (system, messages): leading system turns become the system prompt, tool results
    join the user turn, and same-role neighbours merge so roles alternate."""
    messages = repair_tool_pairs(messages)
    head = 0
    while head < len(messages) and messages[head].role == "system":
        head += 1
    system = "\n\n".join(m.content for m in messages[:head] if m.content) or None
    turns: list[dict[str, Any]] = []
    for m in messages[head:]:
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _blocks(m)
        if m.role == "system" and blocks:
            blocks = [{"type": "text", "text": f"[system] {m.content}"}]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            prev = turns[-1]["content"]
            # tool_result blocks must open a user turn, ahead of any text.
            results = [b for b in blocks if b["type"] == "tool_result"]
            others = [b for b in blocks if b["type"] != "tool_result"]
            lead = [b for b in prev if b["type"] == "tool_result"]
            turns[-1]["content"] = [*lead, *results, *(b for b in prev if b not in lead), *others]
        else:
            turns.append({"role": role, "content": blocks})
    if turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": "(continue)"}]})
    return system, turns


def encode_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools]


def tool_choice(choice: str | None) -> dict[str, Any] | None:
    return {"auto": {"type": "auto"}, "required": {"type": "any"},
            "none": {"type": "none"}}.get(choice or "")


def usage_of(u: Any) -> tuple[int, int]:
    """Input counts cache reads and writes too: all are billed input tokens."""
    if u is None:
        return 0, 0
    inp = (getattr(u, "input_tokens", 0) or 0) + (getattr(u, "cache_read_input_tokens", 0) or 0)
    inp += getattr(u, "cache_creation_input_tokens", 0) or 0
    return int(inp), int(getattr(u, "output_tokens", 0) or 0)


def assistant_message(blocks: Sequence[dict[str, Any]]) -> Message:
    """Build the assistant message from response blocks (as plain dicts)."""
    text: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    replay: list[dict[str, Any]] = []
    for b in blocks:
        kind = b.get("type")
        if kind == "text":
            text.append(b.get("text") or "")
        elif kind == "tool_use":
            args = b.get("input")
            if isinstance(args, dict):
                calls.append(ToolCall(b["id"], b["name"], args))
            else:
                calls.append(ToolCall(b["id"], b["name"], {}, "tool input is not a JSON object"))
        elif kind == "thinking":
            thoughts.append(b.get("thinking") or "")
            replay.append({"type": "thinking", "thinking": b.get("thinking") or "",
                           "signature": b.get("signature") or ""})
        elif kind == "redacted_thinking":
            replay.append({"type": "redacted_thinking", "data": b.get("data") or ""})
    message = Message.assistant("".join(text), tuple(calls), "\n\n".join(thoughts) or None)
    if replay:
        message.cache[BLOCKS_KEY] = replay
    return message


def decode(data: Any) -> ModelResponse:
    """A ``Message`` object from the SDK to a ModelResponse."""
    blocks = [b.model_dump() for b in data.content]
    inp, out = usage_of(data.usage)
    return ModelResponse(assistant_message(blocks), Usage(1, inp, out),
                         STOP_REASONS.get(data.stop_reason or "", data.stop_reason), data.model)
