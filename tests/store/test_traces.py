"""Traces of runs, span by span: the OTel in-memory exporter, the stored trace (SQLite and
PostgreSQL), verbose inputs, and OTLP/HTTP export to a real HTTP endpoint."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from thinkloop import Agent, ScriptedModel, tool
from thinkloop.agent import AgentOptions
from thinkloop.guard import GuardSettings
from thinkloop.guard.plan import PlanSettings
from thinkloop.models.scripted import call, reply
from thinkloop.settings import load_settings
from thinkloop.store import PostgresStore, SQLiteStore
from thinkloop.store.base import SpanRecord
from thinkloop.tools.subagents import AgentSpec, SubAgents
from thinkloop.tracing import Tracing, default_tracing
from thinkloop.types import Message, ModelResponse, ToolSpec, Usage

Backend = SQLiteStore | PostgresStore


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def parent_script() -> list[Any]:
    return [
        reply("1. add  2. delegate", usage=Usage(1, 50, 5, 0.001)),  # the plan (a side call)
        reply("", call("add", a=2, b=3), usage=Usage(1, 100, 10, 0.01)),
        reply("", call("add", a="two", b=3), usage=Usage(1, 110, 11, 0.01)),  # malformed
        reply("", call("spawn_agent", tasks=["say hi"]), usage=Usage(1, 120, 12, 0.01)),
        reply("5, and the worker said hi", usage=Usage(1, 130, 13, 0.02)),
    ]


def make_agent(store: Any = None, tracing: Any = None) -> Agent:
    # The worker inherits its parent's guards (plan mode too): a plan, then its answer.
    worker = ScriptedModel([reply("1. say hi", usage=Usage(1, 5, 3, 0.0)),
                            reply("hi", usage=Usage(1, 7, 2, 0.0))], name="openai:small")
    subs = SubAgents([AgentSpec("worker", model=worker, max_steps=2)])
    guard = GuardSettings.off()
    guard = GuardSettings(input=guard.input, loops=guard.loops, steps=guard.steps,
                          review=guard.review, nudges=guard.nudges, drift=guard.drift,
                          plan=PlanSettings(enabled=True))
    return Agent(ScriptedModel(parent_script(), name="openai:gpt-x"), name="calc",
                 tools=[add, subs.tool()], store=store, guard=guard, max_steps=6,
                 options=AgentOptions(tracing=tracing))


def by_name(spans: Sequence[ReadableSpan]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for s in spans:
        out.setdefault(s.name, []).append(s)
    return out


async def test_every_run_model_call_tool_call_and_sub_agent_is_a_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = make_agent(tracing=Tracing(provider))
    result = await agent.run("add 2 and 3, then ask a worker to say hi", session="s1",
                             user_id="ada")
    assert result.status == "completed", result.error
    spans = exporter.get_finished_spans()
    named = by_name(spans)
    assert {s.context.trace_id for s in spans} == {spans[0].context.trace_id}  # one trace

    (root,) = named["invoke_agent calc"]
    assert root.parent is None
    a = root.attributes or {}
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["gen_ai.agent.name"] == "calc"
    assert a["gen_ai.conversation.id"] == "s1" and a["thinkloop.user.id"] == "ada"
    assert (a["gen_ai.request.model"], a["gen_ai.provider.name"]) == ("openai:gpt-x", "openai")
    assert a["thinkloop.run.id"] == result.run_id and a["thinkloop.run.status"] == "completed"
    assert (a["thinkloop.steps"], a["gen_ai.usage.input_tokens"],
            a["gen_ai.usage.output_tokens"]) == (4, 522, 56)  # the worker's usage counts
    assert abs(float(a["thinkloop.cost_usd"]) - 0.051) < 1e-9  # type: ignore[arg-type]

    chats = named["chat openai:gpt-x"]
    assert all(c.parent is not None and c.parent.span_id == root.context.span_id for c in chats)
    side = [c for c in chats if (c.attributes or {}).get("thinkloop.side_call")]
    steps = [c for c in chats if "thinkloop.step" in (c.attributes or {})]
    assert len(side) == 1 and (side[0].attributes or {})["gen_ai.usage.input_tokens"] == 50
    assert [(c.attributes or {})["thinkloop.step"] for c in steps] == [1, 2, 3, 4]
    first = steps[0].attributes or {}
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"],
            first["gen_ai.response.finish_reasons"], first["gen_ai.response.model"]) == (
        100, 10, ("tool_calls",), "scripted")
    assert first["thinkloop.cost_usd"] == 0.01
    for s in spans:
        assert s.end_time is not None and s.start_time is not None
        assert s.end_time >= s.start_time

    adds = named["execute_tool add"]
    ok, bad = adds
    assert (ok.attributes or {})["gen_ai.tool.call.arguments"] == '{"a":2,"b":3}'
    assert (ok.attributes or {})["gen_ai.tool.call.result"] == "5"
    assert (ok.attributes or {})["thinkloop.tool.error"] is False
    assert (bad.attributes or {})["thinkloop.tool.error"] is True
    assert bad.status.status_code.name == "ERROR"
    assert [(s.attributes or {})["thinkloop.step"] for s in adds] == [1, 2]

    (spawn,) = named["execute_tool spawn_agent"]
    (child,) = named["invoke_agent worker"]
    # The sub-agent's run is a child span of the tool span that started it.
    assert child.parent is not None and child.parent.span_id == spawn.context.span_id
    child_plan, child_chat = named["chat openai:small"]
    assert (child_plan.attributes or {}).get("thinkloop.side_call") is True
    assert (child_chat.attributes or {}).get("thinkloop.step") == 1
    for c in (child_plan, child_chat):
        assert c.parent is not None and c.parent.span_id == child.context.span_id


async def test_the_trace_is_stored_with_the_run(store: Backend) -> None:
    agent = make_agent(store=store)  # tracing by default: the store keeps runs
    assert agent.tracing is not None
    result = await agent.run("add 2 and 3, then ask a worker to say hi", session="s")
    spans = await store.spans(result.run_id)
    names = [s.name for s in spans]
    assert names[0] == "invoke_agent calc"  # by start time: the root first
    assert names.count("chat openai:gpt-x") == 5 and names.count("execute_tool add") == 2
    assert "invoke_agent worker" in names and "chat openai:small" in names
    ids = {s.span_id: s for s in spans}
    root = spans[0]
    assert root.parent_id is None and {s.trace_id for s in spans} == {root.trace_id}
    for s in spans[1:]:
        assert s.parent_id in ids  # every span hangs in the one tree
    child = next(s for s in spans if s.name == "invoke_agent worker")
    assert child.parent_id is not None and ids[child.parent_id].name == "execute_tool spawn_agent"
    assert root.attributes["gen_ai.usage.input_tokens"] == 522
    assert root.status == "OK" and root.end >= root.start
    bad = [s for s in spans if s.name == "execute_tool add"][1]
    assert bad.status == "ERROR" and bad.attributes["thinkloop.tool.error"] is True


async def test_no_tracing_with_store_memory_and_no_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    model = ScriptedModel(["hi"])
    agent = Agent(model, store="memory", guard=False)
    assert agent.tracing is None and agent.hooks.by_stage["pre_tool"] == []
    handle = agent.start("x", events=False)
    assert handle.cfg.model is model  # no wrapper on the hot path
    await handle


def _long_task(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
    return reply("done")


async def test_verbose_mode_keeps_full_inputs_cut_at_50000_chars(store: Backend) -> None:
    verbose = load_settings(env={"THINKLOOP_TRACE_VERBOSE": "1"})
    tracing = default_tracing(stored=True, settings=verbose)
    assert tracing is not None and tracing.verbose
    agent = Agent(ScriptedModel([_long_task]), store=store, guard=False,
                  options=AgentOptions(tracing=tracing))
    short = await agent.run("what is 2+2?")
    long = await agent.run("x" * 60_000)
    (chat,) = [s for s in await store.spans(short.run_id) if s.name.startswith("chat")]
    inputs = chat.attributes["gen_ai.input.messages"]
    assert '"role":"user","content":"what is 2+2?"' in inputs
    (chat,) = [s for s in await store.spans(long.run_id) if s.name.startswith("chat")]
    inputs = chat.attributes["gen_ai.input.messages"]
    assert inputs.startswith('[{"role":"system"') and len(inputs) < 50_100
    assert inputs[:50_000] in inputs and "more]" in inputs[-30:]
    # Not verbose: no inputs at all, previews only.
    quiet = Agent(ScriptedModel(["ok"]), store=store, guard=False)
    r = await quiet.run("hello")
    (chat,) = [s for s in await store.spans(r.run_id) if s.name.startswith("chat")]
    assert "gen_ai.input.messages" not in chat.attributes


async def test_spans_are_exported_over_otlp_http_when_the_endpoint_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    received: list[ExportTraceServiceRequest] = []

    async def collect(request: web.Request) -> web.Response:
        msg = ExportTraceServiceRequest()
        msg.ParseFromString(await request.read())
        received.append(msg)
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", collect)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        endpoint = f"http://127.0.0.1:{port}"
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        agent = Agent(ScriptedModel([reply("", call("add", a=1, b=2)), "3"]), tools=[add],
                      guard=False)  # no store: the endpoint alone turns tracing on
        assert agent.tracing is not None
        result = await agent.run("add 1 and 2")
        assert result.status == "completed"
        await asyncio.to_thread(agent.tracing.provider.force_flush)
        spans = [s for req in received for rs in req.resource_spans
                 for ss in rs.scope_spans for s in ss.spans]
        names = sorted(s.name for s in spans)
        assert names == ["chat scripted", "chat scripted", "execute_tool add",
                         "invoke_agent thinkloop"]
        root = next(s for s in spans if s.name == "invoke_agent thinkloop")
        attrs = {kv.key: kv.value for kv in root.attributes}
        assert attrs["thinkloop.run.id"].string_value == result.run_id
    finally:
        await runner.cleanup()


def _shape(spans: Sequence[SpanRecord]) -> list[tuple[Any, ...]]:
    """The stored trace with its ids and times taken out (those of spans, runs and calls
    differ from run to run): each span's name, its parent's name, status, and attributes
    (as the store reads them back)."""
    by_id = {s.span_id: s for s in spans}
    out = []
    for s in spans:
        parent = by_id[s.parent_id].name if s.parent_id else None
        assert len(s.span_id) == 16 and len(s.trace_id) == 32 and s.end >= s.start
        attrs = {k: v for k, v in s.attributes.items()
                 if k not in ("thinkloop.run.id", "gen_ai.tool.call.id")}
        out.append((s.name, parent, s.status, sorted(attrs.items())))
    return sorted(out, key=repr)


async def test_spans_written_directly_are_stored_as_the_sdks_are(store: Backend) -> None:
    """With nothing to export to, spans skip the OpenTelemetry SDK (issue 38): the stored
    trace rows are the same as the SDK's but for ids and times."""
    stored = {}
    for direct in (False, True):
        tracing = Tracing(direct=direct)
        assert (type(tracing.tracer).__name__ == "DirectTracer") is direct
        agent = make_agent(store=store, tracing=tracing)
        result = await agent.run("add 2 and 3, then ask a worker to say hi", session="s",
                                 user_id="ada")
        assert result.status == "completed", result.error
        stored[direct] = await store.spans(result.run_id)
    sdk, direct_ = _shape(stored[False]), _shape(stored[True])
    assert len(sdk) == 12 and direct_ == sdk
    assert any(s.status == "ERROR" for s in stored[True])
    assert isinstance(
        next(s for s in stored[True] if s.name == "chat openai:gpt-x")
        .attributes["gen_ai.response.finish_reasons"], list)


def test_the_default_tracing_writes_directly_unless_it_exports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    local = default_tracing(stored=True, settings=load_settings())
    assert local is not None and type(local.tracer).__name__ == "DirectTracer"
    given = Tracing(TracerProvider(), direct=True)  # a provider of the caller's: its spans
    assert type(given.tracer).__name__ != "DirectTracer"


def test_a_direct_tracers_current_span_blocks_nest_end_and_record_an_error() -> None:
    """``with tracer.start_as_current_span(...)`` (what a plugin or a tool with a tracer of
    its own writes) works on the direct tracer as on the SDK's: it was a NotImplementedError."""
    from opentelemetry import trace

    from thinkloop.directspans import DirectTracer

    records: list[SpanRecord] = []
    tracer = DirectTracer(records.append)
    with tracer.start_as_current_span("outer", attributes={"tags": ["a", "b"]}) as outer:
        with tracer.start_as_current_span("inner") as inner:
            assert trace.get_current_span() is inner
        assert trace.get_current_span() is outer
        with pytest.raises(ValueError), tracer.start_as_current_span("failing"):
            raise ValueError("no")
    assert trace.get_current_span() is not outer
    inner_r, failing, outer_r = records  # in the order they ended
    assert [r.name for r in records] == ["inner", "failing", "outer"]
    assert inner_r.parent_id == failing.parent_id == outer_r.span_id
    assert outer_r.parent_id is None and inner_r.trace_id == outer_r.trace_id
    assert (failing.status, inner_r.status) == ("ERROR", "UNSET")
    assert outer_r.attributes == {"tags": ("a", "b")}


async def test_a_stored_model_call_is_its_row_with_no_span_object(
    store: Backend, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the direct path a model call's ``chat`` span is never a parent, so it is built as
    its stored row (issue 38): no span object (nor its attributes' copies and record) per
    call; the stored rows, their parents and a failed call's status are as before."""
    from thinkloop.directspans import DirectTracer

    started: list[str] = []
    start_span = DirectTracer.start_span

    def counting(self: DirectTracer, name: str, *args: Any, **kwargs: Any) -> Any:
        started.append(name)
        return start_span(self, name, *args, **kwargs)

    monkeypatch.setattr(DirectTracer, "start_span", counting)
    agent = make_agent(store=store, tracing=Tracing(direct=True))
    result = await agent.run("add 2 and 3, then ask a worker to say hi", session="s")
    assert result.status == "completed", result.error
    assert not [n for n in started if n.startswith("chat ")]
    spans = await store.spans(result.run_id)
    ids = {s.span_id: s for s in spans}
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 7
    for s in chats:
        assert ids[s.parent_id or ""].name.startswith("invoke_agent ")
        assert s.status == "UNSET" and s.end >= s.start and s.trace_id == spans[0].trace_id


async def test_spans_started_inside_a_tool_nest_under_its_span_on_the_direct_path(
    store: Backend,
) -> None:
    """The direct path makes a tool call's span under the run's root and a step's model
    call under the root without reading the OTel context (issue 38): a model call made
    inside a tool, and a span a tool starts itself, still nest under the tool's span."""
    from opentelemetry import trace

    from thinkloop.core.model import ModelSettings
    from thinkloop.tracing import current_tracing

    @tool
    async def ask(question: str) -> str:
        """Ask a model inside the tool."""
        tracing = current_tracing()
        assert tracing is not None
        with tracing.tracer.start_as_current_span("own work"):
            assert trace.get_current_span().is_recording()
        inner = tracing.wrap(ScriptedModel([reply("42")], name="openai:inner"))
        answer = await inner.complete([Message.user(question)], [], ModelSettings())
        return str(answer.message.content)

    model = ScriptedModel([reply("", call("ask", question="why")), reply("done")],
                          name="openai:gpt-x")
    agent = Agent(model, name="asker", tools=[ask], store=store, guard=False, max_steps=3,
                  options=AgentOptions(tracing=Tracing(direct=True)))
    result = await agent.run("ask")
    assert result.status == "completed", result.error
    spans = await store.spans(result.run_id)
    names = {s.span_id: s.name for s in spans}
    parent_of = {s.name: names.get(s.parent_id or "") for s in spans}
    assert parent_of["execute_tool ask"] == "invoke_agent asker"
    assert parent_of["chat openai:gpt-x"] == "invoke_agent asker"
    assert parent_of["chat openai:inner"] == "execute_tool ask"
    assert parent_of["own work"] == "execute_tool ask"
    (tool_span,) = [s for s in spans if s.name == "execute_tool ask"]
    assert tool_span.attributes["gen_ai.tool.call.result"] == "42"
    assert list(tool_span.attributes)[:5] == [
        "gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.id",
        "gen_ai.tool.call.arguments", "thinkloop.step"]


def test_a_direct_span_ends_as_the_row_of_its_record() -> None:
    """A direct span ends straight into its stored row (issue 38): the same row as its
    record's, byte for byte."""
    from thinkloop.directspans import DirectTracer
    from thinkloop.store.serialize import span_row

    records: list[SpanRecord] = []
    tracer = DirectTracer(records.append)
    root = tracer.start_span("root", attributes={"a": [1, 2], "b": None, "c": "x"})
    child = tracer.start_child("child", root.get_span_context(), {"k": "v", "n": 3})
    child.set_attribute("r", "ok")
    for span in (child, root):
        span.end(end_time=1_700_000_000_123_456_789)
    for span, record in zip((child, root), records, strict=True):
        assert span.row(1_700_000_000_123_456_789) == span_row(record)  # type: ignore[attr-defined]
    assert records[0].parent_id == records[1].span_id
    assert span_row(records[0])[7] == '{"k":"v","n":3,"r":"ok"}'
