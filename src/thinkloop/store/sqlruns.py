"""Runs as records, their audit log, trace and checkpoints, and abort requests (migration 4)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from thinkloop.core.events import Event
from thinkloop.store.base import RunRecord, SpanRecord
from thinkloop.store.serialize import (
    RUN_COLS,
    SPAN_COLS,
    LoggedEvents,
    SpanRow,
    events_from_row,
    logged_rows,
    run_from_row,
    run_row,
    span_from_row,
    span_row,
)
from thinkloop.store.sql import SQLBase, upsert

SAVE_RUN = upsert("runs", RUN_COLS, "id")
SAVE_SPAN = upsert("spans", f"run_id, {SPAN_COLS}", "run_id, span_id")
OLD_USAGE = "SELECT input_tokens, output_tokens, cost_usd FROM runs WHERE id = {0}"
SESSION_USAGE = ("UPDATE sessions SET model = {0}, input_tokens = input_tokens + {1}, "
                  "output_tokens = output_tokens + {2}, cost_usd = cost_usd + {3} WHERE id = {4}")
ADD_EVENT = ("INSERT INTO run_events (run_id, seq, type, step, ts, payload) SELECT {0}, "
              "COALESCE(MAX(seq), 0) + 1, {1}, {2}, {3}, {4} FROM run_events "
              "WHERE run_id = {0}")
# The same rows numbered by the writer (see SQLiteStore.count_rows): no MAX(seq) per row.
ADD_EVENT_AT = ("INSERT INTO run_events (run_id, seq, type, step, ts, payload) "
                "VALUES ({0}, {1}, {2}, {3}, {4}, {5})")
ADD_CHECKPOINT_AT = ("INSERT INTO checkpoints (run_id, seq, kind, data, created_at) "
                     "VALUES ({0}, {1}, {2}, {3}, {4})")
LAST_SEQ = ("SELECT (SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE run_id = {0}), "
            "(SELECT COALESCE(MAX(seq), 0) FROM checkpoints WHERE run_id = {0})")
ADD_CHECKPOINT = ("INSERT INTO checkpoints (run_id, seq, kind, data, created_at) SELECT {0}, "
                   "COALESCE(MAX(seq), 0) + 1, {1}, {2}, {3} FROM checkpoints "
                   "WHERE run_id = {0}")


def step_statements(run_id: str, checkpoint: tuple[str, bytes] | None,
                    events: Sequence[Event] | LoggedEvents,
                    spans: Sequence[SpanRecord | SpanRow]
                    ) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """The statements and rows of a step's records (see ``add_step_records``), as tuples:
    they wait for their group's commit, and tuples of plain values leave the collector's
    sight at its first pass (lists never do)."""
    ckpt = ((run_id, checkpoint[0], checkpoint[1], time.time()),) if checkpoint else ()
    return ((ADD_CHECKPOINT, ckpt),
            (ADD_EVENT, tuple([(run_id, *r) for r in logged_rows(events)])),
            (SAVE_SPAN, tuple([(run_id, *span_row(s)) for s in spans])))


def session_usage(run: RunRecord, old: Sequence[Any]) -> tuple[Any, ...]:
    """The session's row update for ``run`` saved over its stored row ``old`` (if any): the
    usage the run added since."""
    before = tuple(old[0]) if old else (0, 0, 0.0)
    return (run.model, run.input_tokens - before[0], run.output_tokens - before[1],
            run.cost_usd - before[2], run.session_id)


class RunTables(SQLBase):
    async def save_run(self, run: RunRecord) -> None:
        if run.session_id is None:  # no session's usage to carry: one statement, atomic
            await self._write(SAVE_RUN, [run_row(run)])
            return
        async with self._tx() as tx:
            old = await tx.fetch(OLD_USAGE + self.dialect.for_update, run.id)
            await tx.execute(SAVE_RUN, *run_row(run))
            await tx.execute(SESSION_USAGE, *session_usage(run, old))

    async def save_runs(self, runs: Sequence[RunRecord]) -> None:
        """Several runs' rows, as :meth:`save_run` saves each; those without a session in
        one statement (a gateway's ``queued`` records of the runs queued together)."""
        lone = [run_row(r) for r in runs if r.session_id is None]
        if lone:
            await self._write(SAVE_RUN, lone)
        for run in runs:
            if run.session_id is not None:
                await self.save_run(run)

    async def get_run(self, run_id: str) -> RunRecord | None:
        rows = await self._fetch(f"SELECT {RUN_COLS} FROM runs WHERE id = {{0}}", run_id)
        return run_from_row(tuple(rows[0])) if rows else None

    async def list_runs(
        self, session: str | None = None, status: str | None = None, limit: int = 100,
        parent: str | None = None,
    ) -> list[RunRecord]:
        rows = await self._fetch(
            f"SELECT {RUN_COLS} FROM runs "
            "WHERE (CAST({0} AS TEXT) IS NULL OR session_id = {0}) "
            "AND (CAST({1} AS TEXT) IS NULL OR status = {1}) "
            "AND (CAST({3} AS TEXT) IS NULL OR parent_id = {3}) "
            f"ORDER BY {self.dialect.run_order} LIMIT {{2}}", session, status, limit, parent)
        return [run_from_row(tuple(r)) for r in rows]

    # The run book hands this store its runs' events serialised as they arrive (LoggedEvents)
    # and their spans as rows (SpanRow), not as objects held until written (issue 38).
    takes_rows = True

    async def add_events(self, run_id: str, events: Sequence[Event] | LoggedEvents) -> None:
        if events:
            await self._write(ADD_EVENT, [(run_id, *r) for r in logged_rows(events)])

    async def run_events(self, run_id: str) -> list[Event]:
        rows = await self._fetch(
            "SELECT type, step, ts, payload FROM run_events WHERE run_id = {0} ORDER BY seq",
            run_id)
        return [e for r in rows for e in events_from_row(run_id, tuple(r))]

    async def add_spans(self, run_id: str, spans: Sequence[SpanRecord | SpanRow]) -> None:
        """A span stored again (the same ``span_id``) replaces the one stored before."""
        if not spans:
            return
        await self._write_all(SAVE_SPAN, [(run_id, *span_row(s)) for s in spans])

    async def spans(self, run_id: str) -> list[SpanRecord]:
        rows = await self._fetch(
            f"SELECT {SPAN_COLS} FROM spans WHERE run_id = {{0}} ORDER BY start_ts, span_id",
            run_id)
        return [span_from_row(tuple(r)) for r in rows]

    async def add_checkpoint(self, run_id: str, kind: str, data: bytes) -> None:
        # One statement, one round trip: this is on the run's path. A run has one writer.
        await self._write(ADD_CHECKPOINT, [(run_id, kind, data, time.time())])

    async def add_step_records(self, run_id: str, checkpoint: tuple[str, bytes] | None,
                               events: Sequence[Event] | LoggedEvents,
                               spans: Sequence[SpanRecord | SpanRow]) -> None:
        """A step's records in one transaction (one trip where the backend allows): its
        checkpoint, then the events and finished spans logged since the last step."""
        await self._write_many(step_statements(run_id, checkpoint, events, spans))

    async def checkpoints(self, run_id: str) -> list[tuple[str, bytes]]:
        rows = await self._fetch(
            "SELECT kind, data FROM checkpoints WHERE run_id = {0} ORDER BY seq", run_id)
        return [(str(r[0]), bytes(r[1])) for r in rows]

    async def prune_checkpoints(self, session_id: str, keep: int) -> None:
        # A run still going (or whose process died) keeps its log: it may be recovered.
        await self._write(
            "DELETE FROM checkpoints WHERE run_id IN (SELECT id FROM runs WHERE session_id = {0} "
            "AND ended_at IS NOT NULL AND id NOT IN (SELECT id FROM runs WHERE session_id = {0} "
            "ORDER BY started_at DESC LIMIT {1}))", [(session_id, keep)])

    async def request_abort(self, run_id: str) -> bool:
        asked = await self._fetch(
            "UPDATE runs SET abort_requested = {0} WHERE id = {1} AND ended_at IS NULL "
            "RETURNING id", time.time(), run_id)
        return bool(asked)

    async def abort_requests(self, run_ids: Sequence[str]) -> list[str]:
        if not run_ids:
            return []
        rows = await self._fetch(
            "SELECT id FROM runs WHERE abort_requested IS NOT NULL AND id "
            + self.dialect.in_texts.format("{0}"), self.dialect.texts(run_ids))
        return [str(r[0]) for r in rows]
