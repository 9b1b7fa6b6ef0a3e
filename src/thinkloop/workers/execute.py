"""A worker's side: execute a queued run, stream its events, keep its lease, obey aborts.

One :class:`Executor` per worker process. For each arq job (a run id) it takes the run
(``queued`` or, after a dead worker, ``running``), builds its agent through the gateway's one
recipe, starts it — or resumes it from its last checkpoint when another worker began it, so a
tool call with a recorded result never runs again — and writes its numbered events to the
run's Redis stream. The arq job's in-progress key is the run's lease: renewed while the run
goes on, it expires ``lease_s`` after its worker dies, and arq hands the job to another one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

from thinkloop.api import (
    AbortRequests,
    Agent,
    ApprovalRequest,
    Decision,
    RunHandle,
    RunResult,
    is_silent,
    wire_json,
)
from thinkloop.channels import Outgoing
from thinkloop.core.errors import ChannelError
from thinkloop.core.events import Event, InputRequested
from thinkloop.server.inputs import InputHub
from thinkloop.workers.bus import Bus
from thinkloop.workers.retry import RetryPolicy
from thinkloop.workers.rows import End, RunRow, Taken
from thinkloop.workers.together import Together

log = logging.getLogger("thinkloop.workers")
# The waits between tries of a failed outbox write (it gives up by time: Outbox.give_up_s).
WRITE_RETRY = RetryPolicy(base_s=0.1, max_s=2.0)


class Outbox:
    """Every run's new events on one worker, written to their streams in one pipeline (one
    round trip for all the runs that had events, not one each). A write waits ``gap_s``
    after the first event, so that the events of the runs that step meanwhile go with it:
    one write per turn of the loop was a round trip per event or two at 200 runs. A run's
    end goes in the write after its last events (:meth:`end`), not in a round trip of its
    own.

    A write that fails (Redis away for a moment, a connection cut) is tried again, its
    events ahead of those added meanwhile, after 0.1 s, then twice as long each time up to
    2 s, for ``give_up_s``: a lost write left a gap in its runs' streams and, with an end in
    it, a run that never ended for its followers. Trying again is safe: Redis refuses an
    event number a stream holds already, and a run's end is written once. The worker gives
    up after half a lease, before its runs' leases can expire and another worker number
    their events on."""

    def __init__(self, bus: Bus, gap_s: float = 0.005, give_up_s: float = 5.0) -> None:
        self.bus, self.gap_s, self.give_up_s = bus, gap_s, give_up_s
        self._pending: dict[str, tuple[int, list[bytes]]] = {}  # run -> first seq, events
        self._ends: list[tuple[End, asyncio.Future[None]]] = []  # in the next write
        self._wake = asyncio.Event()
        self._next: asyncio.Future[None] | None = None  # the write that takes _pending
        self._inflight: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    def add(self, run_id: str, seq: int, data: bytes) -> None:
        _, items = self._pending.setdefault(run_id, (seq, []))
        items.append(data)
        self._woken()

    async def end(self, row: RunRow, status: str, view: Mapping[str, Any],
                  ran: tuple[str, str] | None = None) -> None:
        """Write the run's end (:meth:`Bus.finish`) after the events added so far, in the
        next write; its error, if it fails. One whose caller has gone (cancelled) before
        that write is left out of it."""
        done = asyncio.get_running_loop().create_future()
        self._ends.append((End(row, status, view, ran), done))
        self._woken()
        await done

    def _woken(self) -> None:
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._write())

    def _upcoming(self) -> asyncio.Future[None]:
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        return self._next

    async def flush(self) -> None:
        """Wait until every event (and end) added so far is written."""
        if self._pending or self._ends:
            await asyncio.shield(self._upcoming())
        elif self._inflight is not None:
            await asyncio.shield(self._inflight)

    async def _write(self) -> None:
        failing_since, tries = 0.0, 0
        while self._pending or self._ends:
            await self._wake.wait()
            if self.gap_s > 0:
                await asyncio.sleep(self.gap_s)
            self._wake.clear()
            batch, self._pending = self._pending, {}
            ends = [(e, f) for e, f in self._ends if not f.done()]
            self._ends = []
            done, self._next = self._upcoming(), None
            self._inflight = done
            pause = 0.0
            try:
                if ends:
                    await self.bus.write(batch, [e for e, _ in ends])
                elif batch:
                    await self.bus.append_batches(batch)
            except Exception as exc:
                tries += 1
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since < self.give_up_s:
                    pause = self._again(batch, ends, done, tries)
                    log.warning("events of %d runs could not be written (%r); trying again "
                                "in %.1fs", len(batch), exc, pause)
                else:
                    if batch:
                        log.exception("events of %d runs could not be written", len(batch))
                    for _, f in ends:
                        if not f.done():
                            f.set_exception(exc)
            else:
                failing_since, tries = 0.0, 0
                for _, f in ends:
                    if not f.done():
                        f.set_result(None)
            finally:
                if not pause:  # answered now (a write tried again answers it later)
                    self._inflight = None
                    done.set_result(None)
            if pause:
                await asyncio.sleep(pause)

    def _again(self, batch: dict[str, tuple[int, list[bytes]]],
               ends: list[tuple[End, asyncio.Future[None]]], done: asyncio.Future[None],
               tries: int) -> float:
        """Put a failed write back, ahead of what was added meanwhile (a run's events stay
        in order, its end after them), for the next write, which also answers those that
        waited for this one (``done``); how long to wait before it."""
        for run_id, (first, items) in batch.items():
            newer = self._pending.get(run_id)
            self._pending[run_id] = (first, items + newer[1]) if newer else (first, items)
        self._ends[:0] = ends

        def answer(_: asyncio.Future[None]) -> None:
            if not done.done():
                done.set_result(None)

        self._upcoming().add_done_callback(answer)
        self._inflight = None
        self._wake.set()
        return WRITE_RETRY.delay(tries)

    async def aclose(self) -> None:
        await self.flush()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def aborts_asked(store: AbortRequests) -> Together[str, bool]:
    """Whether the store holds an abort request (``thinkloop runs abort``) for a run about
    to start, asked for all the runs starting meanwhile in one query: a burst of 200 starts
    was 200 queries, each a round trip."""

    async def ask(run_ids: list[str]) -> list[bool]:
        asked = set(await store.abort_requests(run_ids))
        return [run_id in asked for run_id in run_ids]

    return Together(ask)


class Takes:
    """The runs a worker takes (:meth:`Bus.take`), taken together when they start together
    (:class:`~thinkloop.workers.together.Together`): one script call for the jobs of one
    take, where each was a round trip of its own (a worker's own per-run CPU, issue 31's
    profile). Each take still waits for its run's abort answer first
    (:func:`aborts_asked`), so a run the store aborts never moves to running."""

    def __init__(self, bus: Bus, max_deaths: int, lease_ms: int, worker: str) -> None:
        self.bus, self.max_deaths, self.lease_ms, self.worker = bus, max_deaths, lease_ms, worker
        self._together: Together[tuple[str, str, int, bool], Taken] = Together(self._take)

    async def take(self, run_id: str, job_key: str, job_try: int, abort_asked: bool) -> Taken:
        return await self._together((run_id, job_key, job_try, abort_asked))

    async def _take(self, runs: list[tuple[str, str, int, bool]]) -> list[Taken]:
        return await self.bus.take(runs, self.max_deaths, self.lease_ms, self.worker)


class Pump:
    """One run's events, numbered on from what its stream holds, written by the outbox."""

    def __init__(self, outbox: Outbox, run_id: str, seq: int) -> None:
        self.outbox, self.run_id = outbox, run_id
        self.seq = seq
        self.handle: RunHandle | None = None
        self.agent: Agent | None = None
        self.dropping = False  # handed back: its cancellation is not the run's end

    def drop(self) -> None:
        """The run is handed back: its events from here (its stop) are not the run's."""
        self.dropping = True

    def publish(self, event: Event) -> None:
        if self.dropping:
            return
        self.seq += 1
        self.outbox.add(self.run_id, self.seq, wire_json(self.seq, event))

    async def close(self) -> None:
        await self.outbox.flush()


class FleetHub(InputHub):
    """The gateway's approvals and questions, answered from any gateway: what a run waits on
    is written to Redis, answers arrive on the control channel."""

    def __init__(self, bus: Bus, pumps: dict[str, Pump]) -> None:
        super().__init__(self._publish)
        self.bus, self.pumps = bus, pumps
        # Scheduled runs' delivery targets (``platform:chat``): the only places they message.
        self.targets: dict[str, tuple[str, ...]] = {}

    async def send(self, message: Outgoing) -> None:
        """``send_message``: a scheduled run's message goes to a person only where its
        schedule says (through a gateway serving that channel); any other run's stays in
        its events, as on the gateway."""
        targets = self.targets.get(message.run_id or "")
        if targets and message.run_id is not None:
            to = delivery_target(message.recipient, targets)
            await super().send(message)
            await self.bus.deliver(message.run_id, to, message.text)
            return
        await super().send(message)

    def forward(self, event: Event) -> None:
        """Every event of the worker's agents (their subscriber): a run's, to its pump."""
        pump = self.pumps.get(event.run_id)
        if pump is not None:
            pump.publish(event)

    def _publish(self, run_id: str, event: Event) -> bool:
        pump = self.pumps.get(run_id)
        if pump is None:
            return False
        step = pump.handle.state.step if pump.handle is not None else 0
        pump.publish(dataclasses.replace(event, step=step))
        return True

    async def approve(self, request: ApprovalRequest) -> Decision:
        future = self._register(request.run_id, request.call_id, "approval")
        await self.bus.waiting(request.run_id, request.call_id, "approval")
        try:
            answer = await self._wait(request.run_id, request.call_id, future)
        finally:
            await asyncio.shield(self.bus.waiting(request.run_id, request.call_id, None))
        return Decision(bool(answer.approved), answer.reason or "answered through the gateway")

    async def ask(self, question: Outgoing) -> str:
        run_id = question.run_id
        if run_id is None or run_id not in self.pumps:
            raise ChannelError("a question outside a run cannot be answered")
        qid = uuid.uuid4().hex[:12]
        future = self._register(run_id, qid, "question")  # before anyone sees it
        await self.bus.waiting(run_id, qid, "question")
        self._publish(run_id, InputRequested(run_id, 0, qid, "question", question.text))
        agent = self.pumps[run_id].agent
        try:
            with agent.waiting_for_person(run_id) if agent else contextlib.nullcontext():
                answer = await self._wait(run_id, qid, future)
        finally:
            await asyncio.shield(self.bus.waiting(run_id, qid, None))
        return answer.text or ""


def delivery_target(recipient: str | None, targets: tuple[str, ...]) -> str:
    """Where a scheduled run's message goes: ``recipient`` (``platform:chat``, or a chat on
    the first target's platform) if its schedule names it, else a ChannelError; none: the
    first target."""
    if not recipient:
        return targets[0]
    to = recipient if ":" in recipient else f"{targets[0].split(':', 1)[0]}:{recipient}"
    if to not in targets:
        raise ChannelError("send refused: a scheduled run delivers only where its schedule "
                           f"says ({', '.join(targets)})")
    return to


def answer_text(result: RunResult) -> str | None:
    """What a scheduled run delivers when it ends (None: it chose to say nothing)."""
    text = result.text.strip()
    if result.silent or is_silent(text) or text in ("NO_REPLY", "NO_SEND"):
        return None
    if not result.ok:
        return f"(The run ended {result.status}: {result.error or 'no answer'}.)"
    return text


def result_view(result: RunResult, session: str | None) -> dict[str, Any]:
    """What ``GET /v1/runs/{id}`` shows of a finished run (as the gateway's ``run_view``)."""
    data = result.to_dict()
    data["session_id"] = session
    return {k: data[k] for k in ("output", "text", "error", "usage", "steps", "pending",
                                 "silent")}
