"""Reading a reply while it streams: prose as soon as it is certain, each call once complete.

:class:`StreamParser` runs the same scanner as :func:`parse_tool_calls` over the text that is
not settled yet. The scanner raises ``Unsettled`` wherever more text could change a reading
(a closing tag not seen yet, a bracket still open, a marker cut off by the end), so the parser
hands out only what the whole text would read the same way, and the final result equals
``parse_tool_calls`` on the whole text. The one exception is a reply that closes a thinking
block it never opened (``...</think>``, the chat template opened it): prose streamed before
that closer stays prose.

:class:`ChunkFilter` applies it to a model's streamed ``TextDelta``s for the loop, so under
text protocols only clean prose goes out as ``text`` and calls go out as ``tool_call``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from thinkloop.core.errors import InternalError
from thinkloop.core.types import TextDelta, ToolCall, ToolSpec
from thinkloop.protocols import formats as fmt
from thinkloop.protocols.coerce import tool_specs
from thinkloop.protocols.jsonfix import BracketMatcher
from thinkloop.protocols.parse import Parsed, Scan, default_ids, format_key, tidy
from thinkloop.protocols.scanbase import OPEN_ATTEMPTS, SENTENCE_WINDOW, Unsettled

# Unsettled text up to this size is re-read on every chunk; beyond it, only after it grew by
# a quarter, so a long unsettled region costs linear time in total.
_EAGER = 4096


@dataclass(frozen=True, slots=True)
class Prose:
    text: str


@dataclass(frozen=True, slots=True)
class Thought:
    text: str


@dataclass(frozen=True, slots=True)
class CallReady:
    call: ToolCall


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    """The answer of a decision object (``{"completed": true, "answer": ...}``)."""

    text: str


StreamEvent = Prose | Thought | CallReady | FinalAnswer


class StreamParser:
    """Feed a reply chunk by chunk; get prose, thoughts and complete calls as they settle."""

    def __init__(self, *, tools: Sequence[ToolSpec | Mapping[str, Any]] | None = None,
                 tool_names: Collection[str] | None = None, ids: Iterator[str] | None = None,
                 formats: Collection[str] | None = None,
                 specs: Mapping[str, ToolSpec] | None = None) -> None:
        """``tools``/``tool_names``/``ids``/``formats`` as for ``parse_tool_calls``;
        ``specs``: the tools as a name -> ToolSpec mapping, used as given (not copied)."""
        self._specs = tool_specs(tools) if tools is not None else specs
        self._names = self._specs.keys() if self._specs is not None else tool_names
        self._formats = format_key(formats)
        self._ids = ids  # default_ids() made with the first call: most replies have none
        self._buf = ""  # the text from the first unsettled character on
        self._pending: list[str] = []  # chunks fed since the last read
        self._size = 0  # len(_buf) plus the pending chunks
        self._offset = 0  # where _buf starts in the whole text
        self._brackets = BracketMatcher()
        self._attempts = OPEN_ATTEMPTS
        self._line_blank = True
        self._line_tail = ""  # the end of the settled prose on the current line
        self._tried_at = -1  # len(_buf) at the last read that settled nothing
        self._closed = False
        self._in_fence = False
        self._prose: list[str] = []
        self._calls: list[ToolCall] = []
        self._thoughts: list[str] = []
        self._problems: list[str] = []
        self._answer: str | None = None
        self._completed: bool | None = None

    def feed(self, chunk: str) -> list[StreamEvent]:
        """Events the text so far settles (prose, thoughts, complete calls), in text order."""
        if self._closed:
            raise ValueError("the stream is closed")
        if not chunk:
            return []
        self._pending.append(chunk)
        self._size += len(chunk)
        self._brackets.feed(chunk)
        size = self._size
        if size > _EAGER and self._tried_at >= 0 and size - self._tried_at < size // 4:
            return []  # chunks are joined only when read, so a long wait stays linear
        return self._read(final=False)

    def close(self) -> list[StreamEvent]:
        """The end of the reply: everything left is read as the whole text would be."""
        if self._closed:
            return []
        events = self._read(final=True)
        self._closed = True
        return events

    def result(self) -> Parsed:
        """What the reply said so far (after ``close``: the same as ``parse_tool_calls``)."""
        return Parsed(list(self._calls), tidy("".join(self._prose)), list(self._thoughts),
                      self._answer, self._completed, list(self._problems))

    def _read(self, *, final: bool) -> list[StreamEvent]:
        if self._pending:
            self._buf += "".join(self._pending)
            self._pending.clear()
        scan = Scan(self._buf, self._names, 0, formats=self._formats, final=final,
                    pairs=self._brackets.pairs, offset=self._offset,
                    line_blank=self._line_blank, line_tail=self._line_tail,
                    attempts=self._attempts,
                    thoughts_seen=bool(self._thoughts), specs=self._specs,
                    in_fence=self._in_fence)
        try:
            scan.run()
            stop = scan.n
        except Unsettled:
            stop = scan.stop
        if not final:  # prose up to the first unsettled character is settled
            scan.emit(self._buf[scan.emitted:stop])
        events = self._events(scan)
        self._attempts = scan.open_attempts
        self._in_fence = scan.in_fence
        self._problems.extend(scan.problems)
        self._advance(scan, stop)
        self._tried_at = -1 if events or stop else len(self._buf)
        self._size = len(self._buf)
        return events

    def _events(self, scan: Scan) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for item in scan.log:
            if isinstance(item, str):
                self._prose.append(item)
                events.append(Prose(item))
            else:
                events.extend(self._found(item))
        return events

    def _found(self, found: fmt.Found) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for thought in found.thoughts:
            self._thoughts.append(thought)
            events.append(Thought(thought))
        for name, args, err in found.calls:
            if self._ids is None:
                self._ids = default_ids()
            call = ToolCall(next(self._ids), name, args, err)
            self._calls.append(call)
            events.append(CallReady(call))
        if found.completed is not None:
            self._completed = found.completed
        if found.answer is not None:
            self._answer = found.answer
            events.append(FinalAnswer(found.answer))
        return events

    def _advance(self, scan: Scan, stop: int) -> None:
        """Drop the settled text, keeping what the next read needs to know about it."""
        # Prose since the last consumed region (or newline) decides if JSON stands alone.
        tail = self._buf[scan.emitted:stop]
        if "\n" in tail:
            line = tail.rsplit("\n", 1)[1]
            self._line_tail = line[-SENTENCE_WINDOW:]
            self._line_blank = not line.strip()
        else:
            before = "" if scan.emitted > 0 else self._line_tail
            self._line_tail = (before + tail)[-SENTENCE_WINDOW:]
            self._line_blank = not tail.strip() and (scan.emitted > 0 or self._line_blank)
        self._buf = self._buf[stop:]
        self._offset += stop


class ChunkFilter:
    """A model's streamed deltas with call markup taken out of the text.

    ``text`` deltas go through a :class:`StreamParser`: settled prose (and a decision
    object's answer) comes out as ``text``, thinking blocks as ``thought``, and each call,
    once complete, as one ``tool_call`` delta holding ``{"name", "arguments"}`` as JSON.
    Other deltas pass through unchanged.
    """

    def __init__(self, parser: StreamParser | None,
                 fit: Callable[[ToolCall], ToolCall] | None = None) -> None:
        self.parser = parser  # None: deltas pass through (native function calling)
        self.fit = fit  # fits a call to its tool, as the protocol's reading does

    def feed(self, delta: TextDelta) -> list[TextDelta]:
        if delta.kind != "text" or self.parser is None:
            return [delta]
        return [self._delta(e) for e in self.parser.feed(delta.text)]

    def close(self) -> list[TextDelta]:
        return [] if self.parser is None else [self._delta(e) for e in self.parser.close()]

    def _delta(self, event: StreamEvent) -> TextDelta:
        match event:
            case Prose(text) | FinalAnswer(text):
                return TextDelta(text, "text")
            case Thought(text):
                return TextDelta(text, "thought")
            case CallReady(call):
                call = self.fit(call) if self.fit is not None else call
                payload = {"name": call.name, "arguments": call.arguments}
                return TextDelta(json.dumps(payload, ensure_ascii=False), "tool_call")
        raise InternalError(f"unknown stream event {event!r}")


def chunk_filter(protocol: object) -> ChunkFilter:
    """The filter for one streamed reply under ``protocol``: text protocols (and ``auto``)
    read their text with a :class:`StreamParser`, others pass deltas through."""
    make = getattr(protocol, "stream_parser", None)
    if not callable(make):
        return ChunkFilter(None)
    return ChunkFilter(make(), getattr(protocol, "fit_call", None))
