"""OpenTelemetry traces of runs, named by the GenAI semantic conventions.

Each run is a root span ``invoke_agent {agent}``; each model call a ``chat {model}`` span
(provider, model, step, input/output tokens, cost, finish reasons; its duration is the span's);
each tool call an ``execute_tool {tool}`` span (name, error flag, arguments and result cut to
500 characters). Model calls a run makes outside its steps (plans, classifiers, summaries)
are ``chat`` spans of their own, marked ``thinkloop.side_call``. A sub-agent started by a tool
inherits the tracing of its parent and its run is a child span of that tool's span.

The spans are built from what a run already publishes: its events (root and tool spans, the
step of a model call), a wrapper around its model (the model-call spans, so side calls are
caught too) and a ``pre_tool``/``post_tool`` hook pair that makes a tool's span current while
the tool runs (so whatever the tool starts nests under it). Nothing is added to an agent that
does not trace.

Where spans go: the :class:`SpanStore` processor keeps the spans of runs recorded in a store,
which writes them as the run's stored trace (``thinkloop trace RUN_ID``); with
``OTEL_EXPORTER_OTLP_ENDPOINT`` set they are also exported over OTLP/HTTP; a
:class:`~opentelemetry.sdk.trace.TracerProvider` passed in (``Tracing(provider)``) gets them
through its own processors (tests use the in-memory exporter). ``THINKLOOP_TRACE_VERBOSE=1``
adds each model call's full input (``gen_ai.input.messages``), cut at 50,000 characters.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Sequence
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.trace import Span, SpanContext, Status, StatusCode

from thinkloop.core.events import (
    Event,
    LlmRequest,
    LlmResponse,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStarted,
    ToolCalled,
    ToolReturned,
)
from thinkloop.core.model import Model, ModelSettings
from thinkloop.core.settings import Settings, load_settings
from thinkloop.core.types import Message, ModelResponse, TextDelta, ToolSpec, Usage
from thinkloop.directspans import ChatRow, DirectTracer, SpanStore
from thinkloop.hooks import Hook, RunConfig, RunState, ToolHookContext
from thinkloop.models.catalog import ModelFacts, facts_of
from thinkloop.store.serialize import SpanRow, message_to_dict, to_json

PREVIEW_CHARS = 500
VERBOSE_CHARS = 50_000
# The trace of the run whose task this is: model calls read their step from it, and an agent
# started inside one of its tools (a sub-agent) inherits its tracing.
_CURRENT: ContextVar[RunTrace | None] = ContextVar("thinkloop_run_trace", default=None)


def cut(text: str, limit: int = PREVIEW_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more]"


class Tracing:
    """Where an agent's spans go. One per process is plenty: agents share it."""

    def __init__(self, provider: TracerProvider | None = None, *, verbose: bool = False,
                 direct: bool = False) -> None:
        """``direct``: no provider of the caller's and no exporter, so the spans only go to
        the store; they are then written to it directly (:mod:`thinkloop.directspans`)."""
        self.provider = provider or TracerProvider(
            resource=Resource.create({"service.name": "thinkloop"}))
        self.store = SpanStore()
        self.provider.add_span_processor(self.store)
        self.direct = (DirectTracer(None, self.store.add_row, self.store.add_span)
                       if direct and provider is None else None)
        self.tracer: trace.Tracer = self.direct or self.provider.get_tracer("thinkloop")
        self.verbose = verbose
        self.runs: dict[str, RunTrace] = {}

    def hooks(self) -> list[Hook]:
        return [Hook("pre_tool", self._enter_tool, name="tracing.tool"),
                Hook("post_tool", self._leave_tool, name="tracing.tool")]

    def wrap(self, model: Model) -> Model:
        return model if isinstance(model, TracedModel) else TracedModel(model, self)

    def follow(self, cfg: RunConfig, state: RunState, agent: str, stored: bool) -> RunTrace:
        return RunTrace(self, cfg, state, agent, stored)

    def _enter_tool(self, ctx: ToolHookContext) -> None:
        run = self.runs.get(ctx.run_id)
        span = run.tools.get(ctx.call.id) if run is not None and ctx.call else None
        if run is not None and span is not None and ctx.call is not None:
            run.tokens[ctx.call.id] = otel_context.attach(trace.set_span_in_context(span))

    def _leave_tool(self, ctx: ToolHookContext) -> None:
        run = self.runs.get(ctx.run_id)
        token = run.tokens.pop(ctx.call.id, None) if run is not None and ctx.call else None
        if token is not None:
            otel_context.detach(token)


def current_tracing() -> Tracing | None:
    """The tracing of the run this code runs in (a tool's), if it traces."""
    run = _CURRENT.get()
    return run.tracing if run is not None else None


@functools.lru_cache(maxsize=4)
def _shared(endpoint: str | None, verbose: bool) -> Tracing:
    # One provider (and so one OTLP export thread) per process and endpoint, however many
    # agents are made.
    tracing = Tracing(verbose=verbose, direct=not endpoint)
    if endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        # The exporter reads OTEL_EXPORTER_OTLP_* itself (endpoint, headers, timeout).
        tracing.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=5)))
    return tracing


def default_tracing(*, stored: bool, settings: Settings | None = None) -> Tracing | None:
    """The tracing an agent gets by default: on when its runs are stored or an OTLP endpoint
    is set, else that of the run it was started in (a sub-agent), else none."""
    settings = settings or load_settings()
    endpoint = settings.otlp_endpoint
    if stored or endpoint:
        return _shared(endpoint, settings.trace_verbose)
    return current_tracing()


class RunTrace:
    """The spans of one run, built from its events (see the module docstring)."""

    def __init__(
        self, tracing: Tracing, cfg: RunConfig, state: RunState, agent: str, stored: bool
    ) -> None:
        self.tracing = tracing
        self.cfg = cfg
        self.state = state
        self.agent = agent
        self.stored = stored
        self.root: Span | None = None
        self.in_root: Context | None = None  # a context whose current span is the root
        self.root_ctx: SpanContext | None = None  # the root's, the parent of its tool spans
        self.trace_id = 0
        self.owns_trace = False
        self.tools: dict[str, Span] = {}
        self.tokens: dict[str, Token[Context]] = {}
        self.step = 0
        self.calling = False
        self._tokens: tuple[Token[Context], Token[RunTrace | None]] | None = None

    def on_event(self, event: Event) -> None:
        # Called with every event of the run (chunks, guards, steps...): one dict lookup by
        # type finds what to do; most events need nothing (issue 38).
        read = _READERS.get(type(event))
        if read is not None:
            read(self, event)

    def _request(self, event: LlmRequest) -> None:
        if event.purpose is None:  # side calls (purpose set) are not steps
            self.step, self.calling = event.step + 1, True

    def _response(self, event: LlmResponse) -> None:
        if event.purpose is None:
            self.calling = False

    def _start(self) -> None:
        cfg, name = self.cfg, self.cfg.model.name
        attrs: dict[str, Any] = {
            gen_ai.GEN_AI_OPERATION_NAME: "invoke_agent",
            gen_ai.GEN_AI_AGENT_NAME: self.agent,
            gen_ai.GEN_AI_REQUEST_MODEL: name,
            gen_ai.GEN_AI_PROVIDER_NAME: name.partition(":")[0] if ":" in name else name,
            "thinkloop.run.id": self.state.run_id,
            "thinkloop.task": cut(self.state.task),
        }
        if cfg.session_id is not None:
            attrs[gen_ai.GEN_AI_CONVERSATION_ID] = cfg.session_id
        if cfg.user_id is not None:
            attrs["thinkloop.user.id"] = cfg.user_id
        self.root = self.tracing.tracer.start_span(f"invoke_agent {self.agent}", attributes=attrs)
        self.in_root = trace.set_span_in_context(self.root)  # made once, not once per tool call
        self.root_ctx = self.root.get_span_context()
        self.trace_id = self.root_ctx.trace_id
        if self.stored:
            self.owns_trace = self.tracing.store.open(self.trace_id)
        self.tracing.runs[self.state.run_id] = self
        # The run's task carries the root span from here on: model calls and sub-agents
        # started in it nest under it.
        self._tokens = (otel_context.attach(self.in_root), _CURRENT.set(self))

    def _tool_call(self, call: ToolCalled) -> None:
        if self.root_ctx is None or self.in_root is None:
            return
        name = f"execute_tool {call.name}"
        attrs: dict[str, Any] = {
            gen_ai.GEN_AI_OPERATION_NAME: "execute_tool",
            gen_ai.GEN_AI_TOOL_NAME: call.name,
            gen_ai.GEN_AI_TOOL_CALL_ID: call.id,
            gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS: cut(to_json(call.arguments)),
            "thinkloop.step": self.state.step + 1,
        }
        direct = self.tracing.direct
        if direct is not None:
            # Its parent is known (the root) and its attributes are made here: no context
            # read, no copy (issue 38). Still a span, made current while the tool runs.
            self.tools[call.id] = direct.start_child(name, self.root_ctx, attrs)
        else:
            self.tools[call.id] = self.tracing.tracer.start_span(
                name, context=self.in_root, attributes=attrs)

    def _tool_result(self, result: ToolReturned) -> None:
        span = self.tools.pop(result.id, None)
        if span is None:
            return
        error = result.is_error
        span.set_attribute(gen_ai.GEN_AI_TOOL_CALL_RESULT, cut(result.content))
        span.set_attribute("thinkloop.tool.error", error)
        if error:
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR, cut(result.content, 200)))
        span.end()

    def _end(self) -> None:
        root, s = self.root, self.state
        if root is None:
            return
        for span in self.tools.values():  # calls the run's end cut short
            span.set_attribute("thinkloop.tool.error", True)
            span.set_status(Status(StatusCode.ERROR, "no result: the run ended"))
            span.end()
        self.tools.clear()
        u = s.usage
        root.set_attributes({
            "thinkloop.run.status": s.status or "failed",
            "thinkloop.steps": len(s.steps),
            gen_ai.GEN_AI_USAGE_INPUT_TOKENS: u.input_tokens,
            gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: u.output_tokens,
            "thinkloop.cost_usd": u.cost_usd,
            **_unknown_cost(u),
        })
        if s.status == "failed":
            root.set_attribute("error.type", type(s.error).__name__ if s.error else "failed")
            root.set_status(Status(StatusCode.ERROR, s.error_text or "failed"))
        elif s.status in ("completed", "paused"):
            root.set_status(Status(StatusCode.OK))
        root.end()
        self.tracing.runs.pop(s.run_id, None)
        if self._tokens is not None:
            otel_token, run_token = self._tokens
            self._tokens = None
            _CURRENT.reset(run_token)
            otel_context.detach(otel_token)

    def take_spans(self, *, close: bool = False) -> list[SpanRow]:
        """The finished spans not yet stored, as rows (``close`` at the run's end)."""
        if not self.owns_trace:
            return []
        return self.tracing.store.take(self.trace_id, close=close)


# What a run's trace reads, by the event's exact type (events are final classes, none is
# subclassed): see RunTrace.on_event. A dict's get per event, where a cached function
# looked the type up (issue 38).
_READERS: dict[type, Callable[[RunTrace, Any], None]] = {
    RunStarted: lambda run, e: run._start(),
    LlmRequest: RunTrace._request,
    LlmResponse: RunTrace._response,
    ToolCalled: RunTrace._tool_call,
    ToolReturned: RunTrace._tool_result,
    RunCompleted: lambda run, e: run._end(),
    RunFailed: lambda run, e: run._end(),
    RunCancelled: lambda run, e: run._end(),
}


class TracedModel:
    """A model whose every call is a ``chat`` span (steps and side calls alike)."""

    def __init__(self, inner: Model, tracing: Tracing) -> None:
        self.inner = inner
        self.name = inner.name
        self.tracing = tracing

    @property
    def facts(self) -> ModelFacts:
        """The traced model's (its window, its price)."""
        return facts_of(self.inner)

    def _start(self, messages: Sequence[Message], settings: ModelSettings,
               stream: bool) -> Span | ChatRow:
        name = self.name
        run = _CURRENT.get()
        step = run.step if run is not None and run.calling else None
        attrs: dict[str, Any] = {
            gen_ai.GEN_AI_OPERATION_NAME: "chat",
            gen_ai.GEN_AI_REQUEST_MODEL: name,
            gen_ai.GEN_AI_PROVIDER_NAME: name.partition(":")[0] if ":" in name else name,
            gen_ai.GEN_AI_REQUEST_STREAM: stream,
        }
        if step is not None:
            attrs["thinkloop.step"] = step
        else:
            attrs["thinkloop.side_call"] = True
        if settings.max_tokens is not None:
            attrs[gen_ai.GEN_AI_REQUEST_MAX_TOKENS] = settings.max_tokens
        if settings.temperature is not None:
            attrs[gen_ai.GEN_AI_REQUEST_TEMPERATURE] = settings.temperature
        if self.tracing.verbose:
            attrs[gen_ai.GEN_AI_INPUT_MESSAGES] = cut(
                to_json([message_to_dict(m) for m in messages]), VERBOSE_CHARS)
        direct = self.tracing.direct
        if direct is not None:  # nothing nests under a model call: its row, not a span
            # In the run's own context (not in a tool's span, nor in a span of the caller's)
            # its parent is the root, known: the context compared, not read for its span.
            under = (run.root_ctx if run is not None and run.in_root is not None
                     and otel_context.get_current() is run.in_root else None)
            return direct.start_row(f"chat {name}", attrs, under)
        return self.tracing.tracer.start_span(f"chat {name}", attributes=attrs)

    @staticmethod
    def _finish(span: Span | ChatRow, response: ModelResponse) -> None:
        if isinstance(span, ChatRow):
            span.finish(response)
            return
        u = response.usage
        span.set_attributes({
            gen_ai.GEN_AI_RESPONSE_MODEL: response.model,
            gen_ai.GEN_AI_USAGE_INPUT_TOKENS: u.input_tokens,
            gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: u.output_tokens,
            gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: [response.finish_reason or ""],
            "thinkloop.cost_usd": u.cost_usd,
            **_unknown_cost(u),
        })

    @staticmethod
    def _failed(span: Span | ChatRow, exc: BaseException) -> None:
        if isinstance(span, ChatRow):
            span.failed(exc)
            return
        span.set_attribute("error.type", type(exc).__name__)
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> ModelResponse:
        span = self._start(messages, settings, stream=False)
        try:
            response = await self.inner.complete(messages, tools, settings)
            self._finish(span, response)
            return response
        except BaseException as exc:
            self._failed(span, exc)
            raise
        finally:
            span.end()

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        span = self._start(messages, settings, stream=True)
        try:
            async for item in self.inner.stream(messages, tools, settings):
                if isinstance(item, ModelResponse):
                    self._finish(span, item)
                yield item
        except GeneratorExit:  # the caller stopped reading: not a failure of the call
            raise
        except BaseException as exc:
            self._failed(span, exc)
            raise
        finally:
            span.end()

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


def _unknown_cost(u: Usage) -> dict[str, str]:
    """A model with no known price: the span says the cost is unknown (cost_usd is then
    only what the priced calls cost), never a silent $0."""
    return {} if u.cost_known else {"thinkloop.cost": "unknown"}
