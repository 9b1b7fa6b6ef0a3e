"""The library in this process as a :class:`~thinkloop.tui.backend.Backend`.

Runs are ``Agent.start`` handles on the durable store ``thinkloop run`` uses, registered in one
:class:`~thinkloop.runs.RunRegistry`; their events are numbered as the gateway numbers them
(:class:`~thinkloop.server.live.LiveRun`), and approvals and ``ask_human`` questions wait in an
:class:`~thinkloop.server.inputs.InputHub` until the UI answers. Runs of other processes are
read from the store (their audit log) and aborted through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import orjson

from thinkloop.api import (
    Agent,
    PostgresStore,
    RunRecord,
    RunRegistry,
    SQLiteStore,
    message_to_dict,
    owner_of,
    run_memories,
)
from thinkloop.build import AgentSpec
from thinkloop.core.tool import READ_MORE
from thinkloop.errors import NotFoundError, ThinkloopError
from thinkloop.events import Event, from_dict
from thinkloop.server.agents import DEFAULT_AGENT, load_agents_file
from thinkloop.server.inputs import Answer, InputHub
from thinkloop.server.live import LiveRun
from thinkloop.settings import Settings
from thinkloop.tui.backend import (
    AgentInfo,
    MemoryRow,
    MessageRow,
    RunRow,
    SessionRow,
    SpanRow,
    verdict,
)
from thinkloop.tui.recipe import build

POLL_S = 0.3  # how often a run of another process is read again from the store
KEEP_FINISHED = 200  # finished runs of this process kept with their numbered events


class LocalBackend:
    def __init__(self, settings: Settings, store: SQLiteStore | PostgresStore, *,
                 agents_file: Path | None = None, user: str | None = None) -> None:
        self.settings = settings
        self.store = store
        self.agents_file = agents_file
        self.user = user
        self.registry = RunRegistry()
        self.live: dict[str, LiveRun] = {}  # the runs started here, by id
        self.hub = InputHub(self._publish)
        self._agents: dict[tuple[str, str | None], Agent] = {}
        self._pumps: set[asyncio.Task[None]] = set()

    @property
    def label(self) -> str:
        return f"in process · {self.settings.store_location}"

    @property
    def online(self) -> bool:
        return True

    async def check(self) -> bool:
        return True

    # --- agents ----------------------------------------------------------------------------

    async def _specs(self) -> dict[str, AgentSpec]:
        found = (await asyncio.to_thread(load_agents_file, self.agents_file)
                 if self.agents_file else {})
        return found or {DEFAULT_AGENT: AgentSpec()}

    async def agents(self) -> list[str]:
        return sorted(await self._specs())

    async def _agent(self, name: str, model: str | None) -> Agent:
        hit = self._agents.get((name, model))
        if hit is not None:
            return hit
        spec = (await self._specs()).get(name)
        if spec is None:
            raise NotFoundError(f"no agent named {name!r}")
        if model is not None:
            spec = spec.model_copy(update={"model": model})
        agent = build(name, spec, self.settings, self.store, approver=self.hub.approver,
                      channel=self.hub.channel(), registry=self.registry)
        self._agents[(name, model)] = agent
        return agent

    async def agent(self, name: str, model: str | None = None) -> AgentInfo:
        agent = await self._agent(name, model)
        return AgentInfo(name, agent.model.name, tuple(n for n in agent.tools if n != READ_MORE))

    # --- runs ------------------------------------------------------------------------------

    async def start(self, agent: str, task: str, session: str | None,
                    model: str | None = None) -> str:
        built = await self._agent(agent, model)
        handle = built.start(task, session=session, user_id=self.user, stream_model=True)
        run = LiveRun(handle.run_id, self.user or "", agent, session, handle)
        self.live[run.id] = run
        finished = [r for r in self.live.values() if r.done]
        for r in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            del self.live[r.id]  # the store keeps them; only their live numbers go
        pump = asyncio.get_running_loop().create_task(self._pump(run))
        self._pumps.add(pump)
        pump.add_done_callback(self._pumps.discard)
        return run.id

    async def _pump(self, run: LiveRun) -> None:
        error: str | None = None
        result = None
        try:
            async for event in run.handle:
                run.publish(event)
            result = await run.handle.result()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the UI is closing
            error = "aborted before it started"  # waiting for its session, nothing ran
        except Exception as exc:  # the run never started (its store failed, ...)
            error = f"{type(exc).__name__}: {exc}"
        finally:
            run.finish(result, error, "cancelled" if error else "failed")

    def _publish(self, run_id: str, event: Event) -> bool:
        """Questions and messages made outside the loop join the run's numbered events."""
        run = self.live.get(run_id)
        if run is None or run.done:
            return False
        run.publish(dataclasses.replace(event, step=run.handle.state.step))
        return True

    async def follow(self, run_id: str, after: int = 0) -> AsyncIterator[tuple[int, Event]]:
        run = self.live.get(run_id)
        if run is not None:
            async for seq, data in run.follow(after):
                yield seq, from_dict(orjson.loads(data))
            return
        async for item in self._follow_stored(run_id, after):
            yield item

    async def _follow_stored(self, run_id: str, after: int) -> AsyncIterator[tuple[int, Event]]:
        """A run of another process: its audit log, read again until the run has ended."""
        seq = after
        while True:
            rec = await self.store.get_run(run_id)
            if rec is None:
                raise NotFoundError(f"no run {run_id}")
            events = await self.store.run_events(run_id)
            for event in events[seq:]:
                seq += 1
                yield seq, event
            if rec.ended_at is not None:
                return
            await asyncio.sleep(POLL_S)

    async def answer(self, run_id: str, input_id: str, *, approved: bool | None = None,
                     text: str | None = None) -> None:
        kind = self.hub.answer(run_id, input_id,
                               Answer(approved, text, verdict(approved)))
        if kind is None:
            raise ThinkloopError(f"run {run_id} is not waiting for {input_id!r}")

    async def abort(self, run_id: str) -> None:
        if not self.registry.abort(run_id) and not await self.store.request_abort(run_id):
            raise ThinkloopError(f"run {run_id} is not running")

    async def runs(self) -> list[RunRow]:
        rows = {r.id: _row(r) for r in await self.store.list_runs(None, None, 50)}
        for run in self.live.values():  # a run of this process: its numbers as they go
            rows[run.id] = self._live_row(run, rows.get(run.id))
        return sorted(rows.values(), key=lambda r: r.started_at, reverse=True)

    def _live_row(self, run: LiveRun, stored: RunRow | None) -> RunRow:
        state = run.handle.state
        u = state.usage
        status = run.status if run.done else (stored.status if stored else "running")
        return RunRow(run.id, run.agent, status, run.session, self.user, state.task,
                      len(state.steps), u.input_tokens, u.output_tokens, u.cost_usd,
                      stored.started_at if stored else run.created_at, run.finished_at,
                      len(self.hub.pending(run.id)))

    # --- sessions, memory, traces ----------------------------------------------------------

    async def sessions(self) -> list[SessionRow]:
        return [SessionRow(i.id, i.messages, i.updated_at)
                for i in await self.store.list_sessions(100)]

    async def messages(self, session: str) -> list[MessageRow]:
        return [_message(message_to_dict(m)) for m in await self.store.load(session)]

    async def memory(self, run_id: str | None = None, only_run: bool = False
                     ) -> list[MemoryRow]:
        rec = await self.store.get_run(run_id) if run_id else None
        if run_id and rec is None:
            raise NotFoundError(f"no run {run_id}")
        owner = owner_of(rec.user_id, rec.session_id) if rec else owner_of(self.user, None)
        if owner is None:
            return []
        records = await self.store.memories(owner)
        if rec is not None and only_run:
            later = [r for r in await self.store.list_runs(None, None, 200)
                     if owner_of(r.user_id, r.session_id) == owner]
            records = run_memories(records, rec, later)
        return [MemoryRow(r.id, r.owner, r.kind, r.key, r.content, r.created_at)
                for r in records]

    async def trace(self, run_id: str) -> list[SpanRow]:
        return [SpanRow(s.span_id, s.parent_id, s.name, s.start, s.end, s.status, s.attributes)
                for s in await self.store.spans(run_id)]

    async def aclose(self) -> None:
        """Stop the runs still going (they end cancelled, sessions intact), then close."""
        self.registry.abort_all()
        if self._pumps:
            await asyncio.wait(list(self._pumps), timeout=10)
        for agent in self._agents.values():
            with contextlib.suppress(Exception):
                await agent.aclose()
        self._agents.clear()
        await self.store.aclose()


def _row(r: RunRecord) -> RunRow:
    return RunRow(r.id, r.agent, r.status, r.session_id, r.user_id, r.task, r.steps,
                  r.input_tokens, r.output_tokens, r.cost_usd, r.started_at, r.ended_at)


def _message(d: dict[str, object]) -> MessageRow:
    calls = d.get("tool_calls") or []
    assert isinstance(calls, list)
    return MessageRow(str(d.get("role", "")), str(d.get("content", "") or ""),
                      tuple(f"{c['name']}({orjson.dumps(c['arguments']).decode()})"
                            for c in calls))
