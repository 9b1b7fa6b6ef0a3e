"""The one serializer for stored messages: orjson of the frozen dataclasses.

Defaults are left out so a plain text message stays small; ``Message.cache`` (a provider's
memo) is never stored. Bytes in content parts are base64 so the row stays valid JSON.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import orjson

from thinkloop.core.events import Event, from_dict, payload_json, to_dict
from thinkloop.core.types import ContentPart, Message, PendingApproval, ToolCall
from thinkloop.store.base import RunRecord, SpanRecord, StoreError
from thinkloop.text import valid_text


def _given(d: dict[str, Any], **optional: Any) -> dict[str, Any]:
    """``d`` and those of ``optional`` that are not None (the caller maps a default to None)."""
    return d | {k: v for k, v in optional.items() if v is not None}


def _call(c: ToolCall) -> dict[str, Any]:
    d = {"id": c.id, "name": c.name, "arguments": c.arguments}
    if c.parse_error is not None:
        d["parse_error"] = c.parse_error
    return d


def _part(p: ContentPart) -> dict[str, Any]:
    data = base64.b64encode(p.data).decode("ascii") if p.data else None
    return _given({"kind": p.kind}, media_type=p.media_type or None, data=data,
                  text=p.text or None, url=p.url or None)


def message_to_dict(m: Message) -> dict[str, Any]:
    # Key by key rather than through _given: every checkpoint row serialises the run's new
    # messages, and the merges of _given cost more than the fields (issue 38's profile).
    d: dict[str, Any] = {"role": m.role}
    if m.content:
        d["content"] = m.content
    if m.tool_calls:
        d["tool_calls"] = [_call(c) for c in m.tool_calls]
    if m.tool_call_id is not None:
        d["tool_call_id"] = m.tool_call_id
    if m.name is not None:
        d["name"] = m.name
    if m.thought is not None:
        d["thought"] = m.thought
    if m.parts:
        d["parts"] = [_part(p) for p in m.parts]
    return d


def message_from_dict(d: dict[str, Any]) -> Message:
    calls = tuple(
        ToolCall(c["id"], c["name"], c.get("arguments", {}), c.get("parse_error"))
        for c in d.get("tool_calls", ())
    )
    parts = tuple(
        ContentPart(
            p["kind"],
            p.get("media_type", ""),
            base64.b64decode(p["data"]) if "data" in p else b"",
            p.get("text", ""),
            p.get("url", ""),
        )
        for p in d.get("parts", ())
    )
    return Message(
        d["role"],
        d.get("content", ""),
        calls,
        d.get("tool_call_id"),
        d.get("name"),
        d.get("thought"),
        parts,
    )


def _valid(value: Any) -> Any:
    """``value`` with every string made valid UTF-8 (lone surrogates become U+FFFD)."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {_valid(k): _valid(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_valid(v) for v in value]
    return value


def dumps(m: Message) -> bytes:
    data = message_to_dict(m)
    try:
        return orjson.dumps(data)
    except TypeError as exc:  # orjson.JSONEncodeError
        if "surrogates" not in str(exc):  # a tool argument JSON cannot hold
            raise StoreError(f"cannot store this {m.role} message: {exc}") from None
    # Text that is not valid UTF-8 (a file name, a model's escape) is stored repaired, never
    # lost with the whole turn.
    return orjson.dumps(_valid(data))


def loads(data: bytes | str) -> Message:
    try:
        return message_from_dict(orjson.loads(data))
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise StoreError(f"a stored message could not be read: {exc}") from exc


# Column order of ``pending_approvals`` after ``session_id, seq`` (schema migration 3).
PENDING_COLS = ("run_id, call_id, tool, arguments, reason, requested_at, task, max_steps, "
                "turn_messages")


def pending_row(p: PendingApproval) -> tuple[Any, ...]:
    try:
        args = orjson.dumps(p.arguments).decode()
    except TypeError as exc:
        raise StoreError(f"cannot store the arguments of pending call {p.call_id}: {exc}") from None
    return (p.run_id, p.call_id, p.tool, args, p.reason, p.requested_at, p.task, p.max_steps,
            p.turn_messages)


def pending_from_row(session_id: str, row: Sequence[Any]) -> PendingApproval:
    run_id, call_id, tool, args, reason, at, task, max_steps, turn = row
    return PendingApproval(run_id, session_id, call_id, tool, orjson.loads(args), reason,
                           float(at), task, int(max_steps), int(turn))


# --- runs, events, spans (schema migration 4) -----------------------------------------------

RUN_COLS = ("id, agent, model, provider, status, started_at, session_id, user_id, task, steps, "
            "input_tokens, output_tokens, cost_usd, error, parent_id, ended_at, abort_requested")


def run_row(r: RunRecord) -> tuple[Any, ...]:
    return (r.id, r.agent, r.model, r.provider, r.status, r.started_at, r.session_id,
            r.user_id, r.task, r.steps, r.input_tokens, r.output_tokens, r.cost_usd, r.error,
            r.parent_id, r.ended_at, r.abort_requested)


def run_from_row(row: Sequence[Any]) -> RunRecord:
    return RunRecord(*row)


def json_bytes(value: Any) -> bytes:
    """JSON for an event payload or span attributes; what JSON cannot hold becomes str, and
    text that is not valid UTF-8 (lone surrogates) is repaired, never an error."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)
    except TypeError as exc:  # orjson.JSONEncodeError
        if "surrogates" not in str(exc):
            raise
    return orjson.dumps(_valid(value), default=str, option=orjson.OPT_NON_STR_KEYS)


def to_json(value: Any) -> str:
    """:func:`json_bytes` as text."""
    return json_bytes(value).decode()


def event_to_dict(e: Event) -> dict[str, Any]:
    """The one JSON form of an event (audit log and wire alike), as plain JSON values."""
    return orjson.loads(to_json(to_dict(e)))  # type: ignore[no-any-return]


def event_payload(e: Event) -> bytes:
    """The event's payload as the audit log and the wire hold it, encoded once per event."""
    return payload_json(e, json_bytes)


def wire_json(seq: int, e: Event) -> bytes:
    """The one wire form of an event, numbered ``seq`` (SSE data, WebSocket frames, a
    worker's Redis stream): ``{"id", **to_dict(e)}`` as orjson writes it, its payload the
    bytes of its audit-log row (not encoded a second time). Built to its own size: a run
    keeps every event it sent."""
    head = orjson.dumps({"id": seq, "type": e.type, "run_id": e.run_id, "step": e.step,
                         "ts": e.ts}, default=str)
    return b"".join((head[:-1], b',"payload":', event_payload(e), b"}"))


def event_row(e: Event) -> tuple[str, int, float, str]:
    return (e.type, e.step, e.ts, event_payload(e).decode())


def event_from_row(run_id: str, row: Sequence[Any]) -> Event:
    """An audit-log row of one event back as its typed event."""
    type_, step, ts, payload = row
    return from_dict({"type": type_, "run_id": run_id, "step": step, "ts": ts,
                      "payload": orjson.loads(payload)})


# The ``type`` of an audit-log row that holds several events (no event type is spelled so):
# the events one write logged, as the JSON list of their ``[type, step, ts, payload]``. A
# row per event was half the rows a model call wrote, each built, bound and indexed on its
# own (issue 38's profile); rows of one event (older logs, a write of one) read as before.
EVENTS_ROW = "*"


def events_rows(events: Sequence[Event]) -> list[tuple[str, int, float, str]]:
    """The audit-log rows of ``events`` logged together: one row, however many they are."""
    if len(events) == 1:
        return [event_row(events[0])]
    if not events:
        return []
    first = events[0]
    return [(EVENTS_ROW, first.step, first.ts,
             (b"[%b]" % b",".join(_logged(e) for e in events)).decode())]


def _logged(e: Event) -> bytes:
    """``[type, step, ts, payload]`` as orjson writes the list (no spaces): the same bytes."""
    return orjson.dumps([e.type, e.step, e.ts])[:-1] + b"," + event_payload(e) + b"]"


class LoggedEvents:
    """A run's events not yet written, serialised as they arrive: the audit-log rows that
    :func:`events_rows` makes of the same events, byte for byte.

    Held as objects until their step's commit, a run's events (and their payloads' lists
    and dicts) were a good part of what the collector walked at 200 runs in flight, and of
    why it ran as often as it did (issue 38's profile); bytes are not tracked by it."""

    __slots__ = ("_count", "_data", "_first")

    def __init__(self) -> None:
        self._count = 0
        self._data = bytearray()  # ``[[type, step, ts, payload],[...]`` (the "*" row's JSON)
        self._first: tuple[str, int, float, str] | None = None  # the row of one event

    def add(self, e: Event) -> None:
        if self._count == 0:
            self._first = (e.type, e.step, e.ts, event_payload(e).decode())
            self._data += b"["
        else:
            self._data += b","
        self._data += _logged(e)
        self._count += 1

    def __len__(self) -> int:
        return self._count

    def rows(self) -> list[tuple[str, int, float, str]]:
        """The audit-log rows: one, however many events (see :func:`events_rows`)."""
        first = self._first
        if first is None:
            return []
        if self._count == 1:
            return [first]
        return [(EVENTS_ROW, first[1], first[2], (self._data + b"]").decode())]


def logged_rows(events: Sequence[Event] | LoggedEvents) -> list[tuple[str, int, float, str]]:
    """The audit-log rows of events logged together, objects or serialised as they came."""
    return events.rows() if isinstance(events, LoggedEvents) else events_rows(events)


def events_from_row(run_id: str, row: Sequence[Any]) -> list[Event]:
    """The events of one audit-log row (see :data:`EVENTS_ROW`), in order."""
    if row[0] != EVENTS_ROW:
        return [event_from_row(run_id, row)]
    return [from_dict({"type": t, "run_id": run_id, "step": s, "ts": ts, "payload": p})
            for t, s, ts, p in orjson.loads(row[3])]


SPAN_COLS = "span_id, parent_id, trace_id, name, start_ts, end_ts, status, attributes"
# A finished span as the ``spans`` table holds it (SPAN_COLS; attributes as JSON text).
SpanRow = tuple[str, str | None, str, str, float, float, str, str]


def span_row(s: SpanRecord | SpanRow) -> SpanRow:
    """A span's row; a span kept as its row since it ended (see :func:`new_span_row`) is it."""
    if isinstance(s, tuple):
        return s
    return (s.span_id, s.parent_id, s.trace_id, s.name, s.start, s.end, s.status,
            to_json(s.attributes))


def new_span_row(span_id: int, parent_id: int | None, trace_id: int, name: str, start: float,
                 end: float, status: str, attributes: dict[str, Any]) -> SpanRow:
    """A span that just ended, as its row: a tuple of text and numbers, which the collector
    stops tracking at its first look, where a SpanRecord and its attributes' dict stayed
    tracked until the step's commit (issue 38)."""
    return (f"{span_id:016x}", f"{parent_id:016x}" if parent_id is not None else None,
            f"{trace_id:032x}", name, start, end, status, to_json(attributes))


def span_from_row(row: Sequence[Any]) -> SpanRecord:
    """A stored span (or a :data:`SpanRow` not yet written) as its record."""
    span_id, parent, trace, name, start, end, status, attrs = row
    return SpanRecord(span_id, parent, trace, name, float(start), float(end), status,
                      orjson.loads(attrs))
