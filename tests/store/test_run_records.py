"""The run-record contract (runs, audit log, trace, checkpoints, abort requests) on every
store: the in-process one, SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace

from thinkloop.events import Event, RunCompleted, RunStarted, ToolCalled
from thinkloop.store import PostgresStore, SQLiteStore
from thinkloop.store.base import (
    AbortRequests,
    AuditLog,
    CheckpointStore,
    RunRecord,
    RunRecords,
    SpanRecord,
    StepRecords,
    TraceStore,
)
from thinkloop.store.serialize import LoggedEvents, events_rows, span_from_row, span_row
from thinkloop.types import Message

Backend = SQLiteStore | PostgresStore


class AnyRunStore(RunRecords, AuditLog, TraceStore, CheckpointStore, AbortRequests):
    """What every store that keeps runs provides (the ``run_store`` fixture in conftest)."""


def _record(run_id: str, **kw: object) -> RunRecord:
    base = RunRecord(run_id, "helper", "openai:gpt-x", "openai", "running", 1000.0,
                     session_id="s1", user_id="ada", task="add things")
    return replace(base, **kw)  # type: ignore[arg-type]


async def test_a_run_row_is_written_then_replaced_and_listed(run_store: AnyRunStore) -> None:
    assert await run_store.get_run("r1") is None
    await run_store.save_run(_record("r1"))
    await run_store.save_run(_record("r2", session_id="s2", started_at=1001.0))
    await run_store.save_run(_record("r3", session_id=None, started_at=1002.0, status="failed",
                                 error="ModelError: down", ended_at=1003.0))
    done = _record("r1", status="completed", steps=3, input_tokens=30, output_tokens=12,
                   cost_usd=0.25, ended_at=1010.5)
    await run_store.save_run(done)
    assert await run_store.get_run("r1") == done
    assert [r.id for r in await run_store.list_runs()] == ["r3", "r2", "r1"]  # newest first
    assert [r.id for r in await run_store.list_runs(session="s1")] == ["r1"]
    assert [r.id for r in await run_store.list_runs(status="failed")] == ["r3"]
    assert [r.id for r in await run_store.list_runs(limit=1)] == ["r3"]
    assert await run_store.list_runs(session="s2", status="failed") == []


async def test_events_are_kept_in_order_with_their_types_and_payloads(
    run_store: AnyRunStore,
) -> None:
    first: list[Event] = [
        RunStarted("r1", 0, "t", "m", ts=1.5),
        ToolCalled("r1", 0, "c1", "add", {"a": 2, "b": [1, "x"]}, ts=1.6)]
    await run_store.add_events("r1", first)
    await run_store.add_events("r2", [RunStarted("r2", 0, "other", "m", ts=9.0)])
    later: list[Event] = [
        RunCompleted("r1", 1, "completed", "3", None, False, {"requests": 1}, ts=2.0)]
    await run_store.add_events("r1", later)
    await run_store.add_events("r1", [])
    assert await run_store.run_events("r1") == [*first, *later]
    assert await run_store.run_events("nothing") == []


async def test_spans_and_checkpoints_round_trip(run_store: AnyRunStore) -> None:
    root = SpanRecord("a1", None, "t1", "invoke_agent helper", 10.0, 12.5, "OK",
                      {"gen_ai.operation.name": "invoke_agent", "thinkloop.steps": 2})
    child = SpanRecord("b2", "a1", "t1", "chat gpt-x", 10.1, 11.0, "ERROR",
                       {"gen_ai.usage.input_tokens": 30, "error.type": "ModelError"})
    await run_store.add_spans("r1", [child, root])
    assert await run_store.spans("r1") == [root, child]
    assert await run_store.spans("r2") == []
    await run_store.add_checkpoint("r1", "step", b'{"step": 1}')
    await run_store.add_checkpoint("r1", "result", b"\x00\xff")
    assert await run_store.checkpoints("r1") == [("step", b'{"step": 1}'), ("result", b"\x00\xff")]
    assert await run_store.checkpoints("r2") == []


async def test_a_steps_records_go_in_one_write_after_the_ones_before(
    run_store: AnyRunStore,
) -> None:
    """A step's checkpoint, events and spans written together land after what each log held
    already, in order; a write without a checkpoint adds none, and an empty one adds nothing."""
    if not isinstance(run_store, StepRecords):
        assert not isinstance(run_store, SQLiteStore | PostgresStore)
        return
    await run_store.add_checkpoint("r1", "calls", b"{}")
    await run_store.add_events("r1", [RunStarted("r1", 0, "t", "m", ts=1.0)])
    span = SpanRecord("a1", None, "t1", "chat gpt-x", 10.0, 11.0, "OK", {"k": 1})
    called = ToolCalled("r1", 1, "c1", "add", {"a": 2}, ts=1.5)
    await run_store.add_step_records("r1", ("step", b'{"step": 1}'), [called], [span])
    done = replace(span, end=12.0)
    await run_store.add_step_records("r1", None, [], [done])
    await run_store.add_step_records("r1", None, [], [])
    assert await run_store.checkpoints("r1") == [("calls", b"{}"), ("step", b'{"step": 1}')]
    assert await run_store.run_events("r1") == [RunStarted("r1", 0, "t", "m", ts=1.0), called]
    assert await run_store.spans("r1") == [done]
    assert await run_store.checkpoints("r2") == []


async def test_a_span_stored_again_replaces_the_one_before(run_store: AnyRunStore) -> None:
    first = SpanRecord("a1", None, "t1", "invoke_agent helper", 10.0, 11.0, "UNSET", {})
    again = replace(first, end=12.5, status="OK", attributes={"thinkloop.steps": 2})
    await run_store.add_spans("r1", [first])
    await run_store.add_spans("r1", [again])
    assert await run_store.spans("r1") == [again]


async def test_abort_requests_reach_only_runs_in_progress(run_store: AnyRunStore) -> None:
    await run_store.save_run(_record("live"))
    await run_store.save_run(_record("done", status="completed", ended_at=1001.0))
    assert await run_store.abort_requests(["live", "done"]) == []
    assert await run_store.request_abort("live") is True
    assert await run_store.request_abort("done") is False
    assert await run_store.request_abort("unknown") is False
    assert await run_store.abort_requests(["live", "done", "unknown"]) == ["live"]
    assert await run_store.abort_requests([]) == []


async def test_sessions_keep_their_model_and_token_totals(store: Backend) -> None:
    # SQLite and PostgreSQL (the conftest fixture): the in-process store keeps no metadata.
    await store.append("s1", [Message.user("hi")])
    await store.save_run(_record("r1"))
    await store.save_run(_record("r1", status="completed", input_tokens=10, output_tokens=4,
                                 cost_usd=0.5, ended_at=1001.0))
    await store.save_run(_record("r2", model="anthropic:claude", provider="anthropic",
                                 status="paused", input_tokens=7, output_tokens=3,
                                 ended_at=1002.0))
    # A paused run that goes on adds only what it used since.
    await store.save_run(_record("r2", model="anthropic:claude", provider="anthropic",
                                 status="completed", input_tokens=9, output_tokens=5,
                                 ended_at=1003.0))
    info = await store.session_info("s1")
    assert info is not None
    assert (info.model, info.input_tokens, info.output_tokens, info.cost_usd) == (
        "anthropic:claude", 19, 9, 0.5)


async def test_the_events_of_one_write_are_one_row_and_read_back_in_order(
    store: Backend,
) -> None:
    """A write of several events is one audit-log row (a row per event was half of what a
    model call's records cost, issue 38); rows of one event, as older logs hold, read alike."""
    old = RunStarted("r1", 0, "t", "m", ts=1.0)
    await store._write("INSERT INTO run_events (run_id, seq, type, step, ts, payload) "
                       "VALUES ({0}, 1, {1}, {2}, {3}, {4})",
                       [("r1", old.type, 0, 1.0, '{"task": "t", "model": "m"}')])
    step: list[Event] = [ToolCalled("r1", 1, "c1", "add", {"a": 2}, ts=1.5),
                         ToolCalled("r1", 1, "c2", "add", {"b": "\ud800"}, ts=1.6)]
    end: list[Event] = [
        RunCompleted("r1", 2, "completed", "3", None, False, {"requests": 1}, ts=2.0)]
    await store.add_events("r1", step)
    await store.add_step_records("r1", None, [*step, *end], [])
    rows = await store._fetch("SELECT COUNT(*) FROM run_events WHERE run_id = {0}", "r1")
    assert rows[0][0] == 3
    fixed = ToolCalled("r1", 1, "c2", "add", {"b": "\ufffd"}, ts=1.6)  # repaired text
    assert await store.run_events("r1") == [old, step[0], fixed, step[0], fixed, *end]


def _logged(events: list[Event]) -> LoggedEvents:
    logged = LoggedEvents()
    for e in events:
        logged.add(e)
    return logged


async def test_events_serialised_as_they_arrive_are_the_same_rows(store: Backend) -> None:
    """A recorded run's events are serialised as they arrive (held as objects until their
    step's commit, they were much of the collector's work, issue 38): the rows they make are
    byte for byte those of the same events written as objects, one event or several, with
    text to repair and values JSON cannot hold."""
    events: list[Event] = [
        RunStarted("r", 0, "t\ud800", "m", ts=1.25),
        ToolCalled("r", 1, "c1", "add", {"a": 2, "when": replace, 3: [1.5, None]}, ts=1.5),
        RunCompleted("r", 2, "completed", "3", None, False, {"requests": 1}, ts=2.0)]
    for some in (events[:1], events, []):
        assert _logged(some).rows() == events_rows(some)
        assert len(_logged(some)) == len(some)
    await store.add_events("a", events)
    await store.add_step_records("b", None, _logged(events), [])
    await store.add_events("b", _logged(events[:1]))
    sql = "SELECT type, step, ts, payload FROM run_events WHERE run_id = {0} ORDER BY seq"
    a, b = await store._fetch(sql, "a"), await store._fetch(sql, "b")
    assert [tuple(r) for r in b] == [tuple(r) for r in a] + [tuple(events_rows(events[:1])[0])]


async def test_a_recorded_run_logs_each_event_as_it_was_when_emitted(store: Backend) -> None:
    """The durable audit log holds an event as it was emitted: a payload changed by its owner
    after the event went out (before the step's records were written) is not what was
    logged (the events are serialised as they arrive)."""
    from thinkloop.runlog import RunRecorder

    recorder = RunRecorder(store, _record("r1"))
    arguments: dict[str, object] = {"path": "a.txt"}
    recorder.on_event(ToolCalled("r1", 1, "c1", "read", arguments, ts=1.5))
    arguments["path"] = "b.txt"  # the caller's dict, reused after the event was emitted
    await recorder.flush(last=True)
    (logged,) = await store.run_events("r1")
    assert isinstance(logged, ToolCalled) and logged.arguments == {"path": "a.txt"}


def test_a_finished_span_is_kept_as_its_stored_row() -> None:
    """The trace keeps a span as its row from its end to its step's write: the same row a
    record of it makes, and the same record back."""
    from thinkloop.directspans import ChatRow
    from thinkloop.tracing import SpanStore

    spans = SpanStore()
    assert spans.open(0xAB)
    attrs = {"tags": ("a", "b"), "n": 3, "text": "x\ud800"}
    record = SpanRecord(f"{0x12:016x}", None, f"{0xAB:032x}", "chat m", 1.0, 2.5, "OK", attrs)
    chat = ChatRow("chat m", 0xAB, 0x12, None, dict(attrs), spans.add_row)
    chat.start, chat.end_ns, chat.status = 1_000_000_000, 2_500_000_000, "OK"
    spans.add_row(chat)
    (row,) = spans.take(0xAB, close=True)
    assert row == span_row(record) and isinstance(row, tuple)
    assert row[-1] == '{"tags":["a","b"],"n":3,"text":"x\ufffd"}'
    assert span_from_row(row) == replace(record, attributes={"tags": ["a", "b"], "n": 3,
                                                             "text": "x\ufffd"})
