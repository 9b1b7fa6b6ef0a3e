"""The Chat Completions wire format, spoken directly on the hot path.

Each message is encoded once and memoised in ``Message.cache``; a request body is the
concatenation of those bytes, so a step costs the new messages only. Responses are decoded
with orjson and only the fields the loop needs are read.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from thinkloop.core.errors import ModelResponseError
from thinkloop.core.model import ModelSettings, ReplyConstraint
from thinkloop.core.types import Message, ModelResponse, ToolCall, ToolSpec, Usage
from thinkloop.models.sanitize import merge_consecutive, repair_tool_pairs

WIRE = "openai"


@dataclass(frozen=True, slots=True)
class WireQuirks:
    """Per-provider differences in the shape of messages, as data.

    ``tool_call_content`` is what an assistant message with tool calls and no text sends as
    ``content``: Gemini rejects ``""`` (omit it), llama.cpp's server rejects both a missing
    field and ``null`` (send ``""``), OpenAI itself sends ``null``.
    """

    tool_call_content: Literal["omit", "null", "empty"] = "null"
    merge_consecutive_roles: bool = False
    send_stream_usage: bool = True
    images: bool = True
    # The server takes llama.cpp's GBNF ``grammar`` field (llama.cpp's own server does).
    grammar: bool = False
    # The server takes ``reasoning_effort`` (OpenAI reasoning models; most compatible servers
    # ignore unknown fields).
    reasoning_effort: bool = True


def _content(m: Message, quirks: WireQuirks) -> Any:
    if not m.parts:
        return m.content
    blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
    for p in m.parts:
        if p.kind == "image" and quirks.images:
            url = p.url or f"data:{p.media_type};base64,{base64.b64encode(p.data).decode()}"
            blocks.append({"type": "image_url", "image_url": {"url": url}})
        elif p.kind == "text" or p.text:
            blocks.append({"type": "text", "text": p.text})
    return blocks


def message_dict(m: Message, quirks: WireQuirks) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        d: dict[str, Any] = {"role": "assistant"}
        if m.content:
            d["content"] = m.content
        elif quirks.tool_call_content != "omit":
            d["content"] = "" if quirks.tool_call_content == "empty" else None
        d["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": orjson.dumps(c.arguments).decode()},
            }
            for c in m.tool_calls
        ]
        return d
    return {"role": m.role, "content": _content(m, quirks)}


@functools.lru_cache(maxsize=64)
def _cache_key(quirks: WireQuirks) -> str:
    # Message.cache is keyed by str; the same message may be sent with different quirks.
    return f"{WIRE}:{quirks!r}"


def encode_messages(messages: Sequence[Message], quirks: WireQuirks) -> bytes:
    """Sanitize for this provider, then join each message's memoised encoding."""
    messages = repair_tool_pairs(messages)
    if quirks.merge_consecutive_roles:
        messages = merge_consecutive(messages)
    key = _cache_key(quirks)
    parts = []
    for m in messages:
        enc = m.cache.get(key)
        if enc is None:
            # Kept as long as the message: copied to its size (orjson's bytes hold its whole
            # working buffer, 4 KB for a 200-byte message).
            enc = m.cache[key] = bytes(memoryview(orjson.dumps(message_dict(m, quirks))))
        parts.append(enc)
    return b"[" + b",".join(parts) + b"]"


@dataclass
class ToolsEncoder:
    """Caches the encoded tool list: agents send the same tools every step."""

    _last: tuple[tuple[ToolSpec, ...], bytes] | None = field(default=None)

    def encode(self, tools: Sequence[ToolSpec]) -> bytes:
        key = tuple(tools)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        data = orjson.dumps(
            [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in tools
            ]
        )
        self._last = (key, data)
        return data


def request_body(
    model_id: str,
    messages_json: bytes,
    tools_json: bytes | None,
    settings: ModelSettings,
    *,
    stream: bool,
    quirks: WireQuirks,
) -> bytes:
    head: dict[str, Any] = {"model": model_id}
    if settings.temperature is not None:
        head["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        head["max_tokens"] = settings.max_tokens
    if tools_json is not None and settings.tool_choice:
        head["tool_choice"] = settings.tool_choice
    if stream:
        head["stream"] = True
        if quirks.send_stream_usage:
            head["stream_options"] = {"include_usage": True}
    if settings.constraint is not None:
        _constrain(head, settings.constraint, quirks)
    if settings.reasoning_effort is not None and quirks.reasoning_effort:
        head["reasoning_effort"] = settings.reasoning_effort
    head.update(settings.extra)
    body = orjson.dumps(head)[:-1] + b',"messages":' + messages_json
    if tools_json is not None:
        body += b',"tools":' + tools_json
    return body + b"}"


def _constrain(head: dict[str, Any], constraint: ReplyConstraint, quirks: WireQuirks) -> None:
    """A reply shape as structured output: a JSON schema as ``response_format`` (OpenAI and
    llama.cpp's server take it), a grammar only where the server is known to take one."""
    if constraint.kind == "json_schema":
        schema = orjson.Fragment(constraint.text.encode())
        head["response_format"] = {
            "type": "json_schema", "json_schema": {"name": constraint.name, "schema": schema}}
    elif quirks.grammar:
        head["grammar"] = constraint.text


def decode_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments arrive as a JSON string; return (arguments, parse_error)."""
    if isinstance(raw, dict):
        return raw, None
    if not raw:
        return {}, None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc}): {str(raw)[:200]}"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def _usage(data: dict[str, Any] | None) -> Usage:
    if not data:
        return Usage(1)
    return Usage(1, int(data.get("prompt_tokens") or 0), int(data.get("completion_tokens") or 0))


def _thought(msg: dict[str, Any]) -> str | None:
    return msg.get("reasoning_content") or msg.get("reasoning") or None


def decode_response(raw: bytes) -> ModelResponse:
    try:
        data = orjson.loads(raw)
        choice = data["choices"][0]
        msg = choice["message"]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
        raise ModelResponseError(f"not a chat completion: {raw[:300]!r}") from exc
    calls = []
    for i, tc in enumerate(msg.get("tool_calls") or ()):
        fn = tc.get("function") or {}
        args, err = decode_arguments(fn.get("arguments"))
        calls.append(ToolCall(tc.get("id") or f"call_{i}", fn.get("name") or "", args, err))
    message = Message.assistant(msg.get("content") or "", tuple(calls), _thought(msg))
    return ModelResponse(message, _usage(data.get("usage")), choice.get("finish_reason"),
                         data.get("model", ""))


@dataclass
class StreamAccumulator:
    """Folds ``chat.completion.chunk`` events into one response."""

    text: list[str] = field(default_factory=list)
    thought: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    usage: Usage = field(default_factory=lambda: Usage(1))
    finish_reason: str | None = None
    model: str = ""

    def feed(self, raw: str) -> tuple[str, str]:
        """Take one chunk; return the (text, kind) delta it carried, possibly empty."""
        data = orjson.loads(raw)
        self.model = data.get("model") or self.model
        if data.get("usage"):
            self.usage = _usage(data["usage"])
        choices = data.get("choices") or ()
        if not choices:
            return "", "text"
        choice = choices[0]
        self.finish_reason = choice.get("finish_reason") or self.finish_reason
        delta = choice.get("delta") or {}
        for tc in delta.get("tool_calls") or ():
            slot = self.calls.setdefault(tc.get("index", 0), {"id": "", "name": "", "args": ""})
            fn = tc.get("function") or {}
            slot["id"] = tc.get("id") or slot["id"]
            name = fn.get("name") or ""
            # OpenAI names a call once; llama.cpp's server repeats the full name in every chunk.
            if name and name != slot["name"]:
                slot["name"] += name
            slot["args"] += fn.get("arguments") or ""
            if fn.get("arguments"):
                return fn["arguments"], "tool_call"
        reasoning = _thought(delta)
        if reasoning:
            self.thought.append(reasoning)
            return reasoning, "thought"
        content = delta.get("content") or ""
        if content:
            self.text.append(content)
        return content, "text"

    def response(self) -> ModelResponse:
        calls = []
        for i in sorted(self.calls):
            slot = self.calls[i]
            args, err = decode_arguments(slot["args"])
            calls.append(ToolCall(slot["id"] or f"call_{i}", slot["name"], args, err))
        message = Message.assistant(
            "".join(self.text), tuple(calls), "".join(self.thought) or None
        )
        return ModelResponse(message, self.usage, self.finish_reason, self.model)
