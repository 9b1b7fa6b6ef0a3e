"""Spans written straight to a run's stored trace, when nothing else would see them.

The OpenTelemetry SDK builds each span through its provider: a sampler, a span limits
check, attributes bounded and copied, a lock per span, every processor called at its end.
When the only processor is the store's (no OTLP endpoint, no provider passed in), all of
that ends in one :class:`~thinkloop.store.base.SpanRecord` per span, and it was about a
third of what a recorded run's own code cost (issue 38's profile). A :class:`DirectTracer`
makes the same records with none of it: the same names, ids (random, 64 and 128 bits),
parents, times, status and attributes (sequences kept as tuples, as the SDK keeps them).

Its spans are OpenTelemetry ``Span`` objects, so they are set in the OpenTelemetry context
as the SDK's are: a sub-agent's run, or a span that a tool starts with a tracer of its own,
nests under them the same way. A model call's ``chat`` span is never made current (nothing
nests under it), so it is not a span at all: a :class:`ChatRow` that ends as its stored row.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import (
    INVALID_SPAN_ID,
    INVALID_TRACE_ID,
    Link,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)
from opentelemetry.util.types import Attributes, AttributeValue

from thinkloop.core.types import ModelResponse
from thinkloop.store.base import SpanRecord
from thinkloop.store.serialize import SpanRow, new_span_row

Sink = Callable[[SpanRecord], None]
RowSink = Callable[["ChatRow"], None]
# Where a direct span goes as it ends (the span, its end in ns): the store takes its row from
# it, with no record made and read back (issue 38); a ``Sink`` of records gets its record.
SpanSink = Callable[["DirectSpan", int], None]
_RESPONSE_MODEL = "gen_ai.response.model"
_INPUT_TOKENS = "gen_ai.usage.input_tokens"
_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
_FINISH_REASONS = "gen_ai.response.finish_reasons"
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)  # one for all spans (an object each, kept by each)


def _keep(attrs: dict[str, Any], given: Mapping[str, Any]) -> None:
    """``given`` into ``attrs`` as the SDK keeps them: None left out, a list as a tuple (it
    stores a copy). One loop, no call per attribute: a model call sets about 20 (issue 38)."""
    for key, value in given.items():
        if value is not None:
            attrs[key] = tuple(value) if isinstance(value, list) else value


class DirectSpan(trace.Span):
    """A recording span that becomes one :class:`SpanRecord` when it ends."""

    def __init__(self, name: str, trace_id: int, span_id: int, parent: SpanContext | None,
                 attributes: Attributes, sink: SpanSink, start_time: int | None = None,
                 *, owned: dict[str, Any] | None = None) -> None:
        """``owned``: attributes made for this span, kept as they are (no None, no list),
        where ``attributes`` are copied as the SDK copies them."""
        self._name = name
        self._trace_id = trace_id
        self._span_id = span_id
        # Made when asked for (a span made current, a child started under it): a model
        # call's span never is, and a SpanContext is an object more that each stored span
        # held until its step was written (issue 38).
        self._context: SpanContext | None = None
        self._parent = parent
        if owned is not None:
            self._attrs = owned
        else:
            self._attrs = {}
            if attributes:
                _keep(self._attrs, attributes)
        self._status = StatusCode.UNSET
        self._start = start_time or time.time_ns()
        self._sink: SpanSink | None = sink

    def get_span_context(self) -> SpanContext:
        if self._context is None:
            self._context = SpanContext(self._trace_id, self._span_id, is_remote=False,
                                        trace_flags=_SAMPLED)
        return self._context

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        if self._sink is not None:
            _keep(self._attrs, attributes)

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        if self._sink is not None and value is not None:
            self._attrs[key] = tuple(value) if isinstance(value, list) else value

    def add_event(self, name: str, attributes: Attributes = None,
                  timestamp: int | None = None) -> None:
        """Events are not stored with a run's trace."""

    def add_link(self, context: SpanContext, attributes: Attributes = None) -> None:
        """Links are not stored with a run's trace."""

    def update_name(self, name: str) -> None:
        if self._sink is not None:
            self._name = name

    def is_recording(self) -> bool:
        return self._sink is not None

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        code = status.status_code if isinstance(status, Status) else status
        # As the SDK: an OK status is final, and UNSET changes nothing.
        if self._sink is None or self._status is StatusCode.OK or code is StatusCode.UNSET:
            return
        self._status = code

    def record_exception(self, exception: BaseException, attributes: Attributes = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        """An exception event: not stored with a run's trace (its status says it)."""

    def end(self, end_time: int | None = None) -> None:
        sink, self._sink = self._sink, None
        if sink is not None:  # else ended already
            sink(self, end_time or time.time_ns())

    @property
    def trace_id(self) -> int:
        return self._trace_id

    def record(self, end_ns: int) -> SpanRecord:
        """The ended span's record."""
        parent = self._parent
        return SpanRecord(
            f"{self._span_id:016x}", f"{parent.span_id:016x}" if parent else None,
            f"{self._trace_id:032x}", self._name, self._start / 1e9, end_ns / 1e9,
            self._status.name, self._attrs)

    def row(self, end_ns: int) -> SpanRow:
        """The ended span's stored row (the row of :meth:`record`)."""
        parent = self._parent
        return new_span_row(self._span_id, parent.span_id if parent else None,
                            self._trace_id, self._name, self._start / 1e9, end_ns / 1e9,
                            self._status.name, self._attrs)


class ChatRow:
    """A model call's span, kept as what its stored row needs, with the same attributes
    (in the same order), parent, times and status as a :class:`DirectSpan`'s. It was a span,
    its attributes given and copied, a dict per ``set_attributes`` and a record, per call
    (issue 38); the calls it takes are those :class:`~thinkloop.tracing.TracedModel` makes."""

    __slots__ = ("_sink", "attrs", "end_ns", "name", "parent_id", "span_id", "start", "status",
                 "trace_id")

    def __init__(self, name: str, trace_id: int, span_id: int, parent_id: int | None,
                 attrs: dict[str, Any], sink: RowSink) -> None:
        self.name = name
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id
        self.attrs = attrs  # the caller's, made for this call: kept, not copied
        self.start = time.time_ns()
        self.end_ns = 0
        self.status = "UNSET"
        self._sink: RowSink | None = sink

    def finish(self, response: ModelResponse) -> None:
        """The attributes a response sets (TracedModel._finish's, without its dicts)."""
        attrs, u = self.attrs, response.usage
        if response.model is not None:
            attrs[_RESPONSE_MODEL] = response.model
        attrs[_INPUT_TOKENS] = u.input_tokens
        attrs[_OUTPUT_TOKENS] = u.output_tokens
        attrs[_FINISH_REASONS] = [response.finish_reason or ""]
        attrs["thinkloop.cost_usd"] = u.cost_usd
        if not u.cost_known:
            attrs["thinkloop.cost"] = "unknown"

    def failed(self, exc: BaseException) -> None:
        """A failed call: its error type and an ERROR status (the exception event, as a
        direct span's, is not stored)."""
        self.attrs["error.type"] = type(exc).__name__
        self.status = "ERROR"

    def end(self) -> None:
        sink, self._sink = self._sink, None
        if sink is not None:
            self.end_ns = time.time_ns()
            sink(self)


class DirectTracer(trace.Tracer):
    """Starts :class:`DirectSpan` s that end in ``sink``, and :class:`ChatRow` s that end in
    ``rows``."""

    def __init__(self, sink: Sink | None, rows: RowSink | None = None,
                 spans: SpanSink | None = None) -> None:
        """Spans end in ``spans`` if given, else as records in ``sink``."""
        if spans is None:
            assert sink is not None
            spans = _to_records(sink)
        self.spans = spans
        self.rows = rows
        self._rand = random.Random()

    def start_child(self, name: str, parent: SpanContext, attrs: dict[str, Any]) -> DirectSpan:
        """A span under ``parent``, its attributes ``attrs`` kept as given (made for it,
        with no None and no list): what :meth:`start_span` makes, with no context to read
        its parent from and no copy of its attributes (a tool call's span, issue 38)."""
        return DirectSpan(name, parent.trace_id, self._id(64, INVALID_SPAN_ID), parent, None,
                          self.spans, owned=attrs)

    def start_row(self, name: str, attributes: dict[str, Any],
                  parent: SpanContext | None = None) -> ChatRow:
        """A span that nothing will nest under, as a :class:`ChatRow` (parent: ``parent``
        when the caller knows it is the current span's, else the current span, as
        :meth:`start_span` takes it)."""
        current = parent or trace.get_current_span().get_span_context()
        if current.is_valid:
            trace_id, parent_id = current.trace_id, current.span_id
        else:
            trace_id, parent_id = self._id(128, INVALID_TRACE_ID), None
        assert self.rows is not None
        return ChatRow(name, trace_id, self._id(64, INVALID_SPAN_ID), parent_id, attributes,
                       self.rows)

    def start_span(self, name: str, context: Context | None = None,
                   kind: SpanKind = SpanKind.INTERNAL, attributes: Attributes = None,
                   links: Sequence[Link] | None = None, start_time: int | None = None,
                   record_exception: bool = True, set_status_on_exception: bool = True
                   ) -> trace.Span:
        current = trace.get_current_span(context).get_span_context()
        parent = current if current.is_valid else None
        trace_id = parent.trace_id if parent is not None else self._id(128, INVALID_TRACE_ID)
        return DirectSpan(name, trace_id, self._id(64, INVALID_SPAN_ID), parent, attributes,
                          self.spans, start_time)

    @contextlib.contextmanager
    def start_as_current_span(  # type: ignore[override]  # the API types it by a private class
            self, name: str, context: Context | None = None,
            kind: SpanKind = SpanKind.INTERNAL, attributes: Attributes = None,
            links: Sequence[Link] | None = None, start_time: int | None = None,
            record_exception: bool = True, set_status_on_exception: bool = True,
            end_on_exit: bool = True) -> Iterator[trace.Span]:
        """:meth:`start_span`, made the current span for the block (as the SDK's tracer and
        the API's no-op one do it): a plugin's or a tool's ``with tracer.start_as_current_span``
        nests and is stored like thinkloop's own spans."""
        span = self.start_span(name, context, kind, attributes, links, start_time,
                               record_exception, set_status_on_exception)
        with trace.use_span(span, end_on_exit=end_on_exit, record_exception=record_exception,
                            set_status_on_exception=set_status_on_exception) as current:
            yield current

    def _id(self, bits: int, invalid: int) -> int:
        while True:
            value = self._rand.getrandbits(bits)
            if value != invalid:
                return value


def _to_records(sink: Sink) -> SpanSink:
    def to_record(span: DirectSpan, end_ns: int) -> None:
        sink(span.record(end_ns))

    return to_record


class SpanStore(SpanProcessor):
    """Collects the finished spans of the traces that a store records, until they are taken.

    Each is kept as its stored row (:data:`~thinkloop.store.serialize.SpanRow`) from the
    moment it ends: a record and its attributes' dict, held until the step's commit, were
    objects the collector kept walking at 200 runs in flight (issue 38)."""

    def __init__(self) -> None:
        self._by_trace: dict[int, list[SpanRow]] = {}

    def open(self, trace_id: int) -> bool:
        if trace_id in self._by_trace:
            return False  # a sub-agent's run: its spans go with its parent's
        self._by_trace[trace_id] = []
        return True

    def take(self, trace_id: int, *, close: bool = False) -> list[SpanRow]:
        spans = self._by_trace.pop(trace_id, []) if close else self._by_trace.get(trace_id, [])
        if not close and spans:
            self._by_trace[trace_id] = []
        return spans

    def add_span(self, span: DirectSpan, end_ns: int) -> None:
        """A direct span that ended, kept as its row (no record made and parsed back)."""
        spans = self._by_trace.get(span.trace_id)
        if spans is not None:
            spans.append(span.row(end_ns))

    def add_row(self, row: ChatRow) -> None:
        """A model call's span, ended as its row (:class:`~thinkloop.directspans.ChatRow`)."""
        spans = self._by_trace.get(row.trace_id)
        if spans is not None:
            spans.append(new_span_row(row.span_id, row.parent_id, row.trace_id, row.name,
                                      row.start / 1e9, row.end_ns / 1e9, row.status, row.attrs))

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.context
        spans = self._by_trace.get(ctx.trace_id) if ctx is not None else None
        if spans is None or ctx is None:
            return
        parent = span.parent
        spans.append(new_span_row(
            ctx.span_id, parent.span_id if parent else None, ctx.trace_id, span.name,
            (span.start_time or 0) / 1e9, (span.end_time or 0) / 1e9,
            span.status.status_code.name, dict(span.attributes or {})))
