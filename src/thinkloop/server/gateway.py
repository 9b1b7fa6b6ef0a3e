"""The gateway's core, shared by REST, SSE, WebSocket and the OpenAI-compatible endpoint.

It holds no run logic of its own: runs are ``Agent.start`` handles; this module starts them
for a user (within the limits), numbers their events, and stops or answers them on request.
Sessions are the store's, under a key namespaced per user, so one user's session id can
never name another user's history.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from thinkloop.api import (
    Agent,
    GatewayStore,
    RunHandle,
    RunRegistry,
    RunResult,
    SessionAdmin,
    Store,
    UserFiles,
)
from thinkloop.build import AgentSpec
from thinkloop.core.errors import ConfigError, ConflictError, NotFoundError, UnknownAgentError
from thinkloop.core.events import Event
from thinkloop.core.settings import Settings, load_settings
from thinkloop.core.tool import Tool
from thinkloop.server.agents import AgentRouter, Definitions, Wiring, build_agent
from thinkloop.server.auth import Principal
from thinkloop.server.config import GatewayConfig
from thinkloop.server.fleet import Fleet, Followed
from thinkloop.server.inputs import Answer, InputHub
from thinkloop.server.live import LiveRun, LiveRuns
from thinkloop.server.metrics import Metrics
from thinkloop.server.sse import Streams

log = logging.getLogger("thinkloop.server")
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class Backend(Store, SessionAdmin, GatewayStore, UserFiles, Protocol):
    """What the gateway needs of its store (the SQLite and PostgreSQL stores have it all)."""


def session_key(user: str, session: str) -> str:
    return f"{user}:{session}"


# Makes the fleet a gateway hands its runs to (``thinkloop.workers.fleet``), from its store,
# settings and config; None: runs execute in the gateway's own process.
FleetFactory = Callable[[Backend, Settings, GatewayConfig], Fleet]


class Gateway:
    def __init__(self, config: GatewayConfig, store: Backend, settings: Settings | None = None,
                 tools: Sequence[Tool] = (), fleet: FleetFactory | None = None) -> None:
        self.config = config
        self.store = store
        self.settings = settings or load_settings()
        # Every agent the gateway builds registers its runs here (abort by run, session, all);
        # ``live`` keeps only what the gateway adds: owners, numbered events, slot limits.
        self.runs = RunRegistry()
        self.live = LiveRuns(config.per_user_runs, config.max_runs, config.keep_finished_s,
                             config.keep_runs)
        self.hub = InputHub(self._publish_external)
        self.metrics = Metrics(lambda: self.live.active_count)
        # ``tools``: the host application's own tools, given to every agent it serves.
        wiring = Wiring(self.settings, store, self.hub.approver, self.hub.channel(),
                        config.approval_timeout_s, tuple(tools), self.runs)
        self.router = AgentRouter(Definitions(store, config.agents_file),
                                  lambda name, spec: self._build(name, spec, wiring),
                                  config.agent_ttl_s)
        self._pumps: set[asyncio.Task[None]] = set()
        # The runs started here by id, until they end: their agents' subscriber publishes
        # their events as they are emitted (see _on_event).
        self._following: dict[str, LiveRun] = {}
        self.streams = Streams()  # the open SSE responses, ended when the server stops
        self.fleet = fleet(store, self.settings, config) if fleet is not None else None

    # --- runs ------------------------------------------------------------------------------

    async def submit(self, who: Principal, agent_name: str, task: str,
                     session: str | None = None, stream: bool = True,
                     remember: bool = True, priority: int = 0) -> Followed:
        """Start ``task`` on ``agent_name`` for ``who``, on a worker when the gateway has a
        fleet (the run waits in the queue, ``queued``, behind runs of a higher ``priority``),
        else here (at once: there is no queue to order); returns at once.
        With ``remember`` False the run has no user: it neither reads nor writes memory.
        A session handed off to another agent (the ``handoff`` tool) is answered by it."""
        if session is not None:
            _check_session(session)
            moved = await self.store.handoff(session_key(who.user, session))
            agent_name = moved.agent if moved is not None else agent_name
        if self.fleet is None:
            return await self.start_run(who, agent_name, task, session, stream, remember)
        _check_session(session)
        if not await self.router.exists(agent_name):
            raise UnknownAgentError(f"no agent named {agent_name!r}")
        return await self.fleet.submit(who.user, agent_name, task, session, stream, remember,
                                       priority)

    async def start_run(self, who: Principal, agent_name: str, task: str,
                        session: str | None = None, stream: bool = True,
                        remember: bool = True) -> LiveRun:
        """Start ``task`` on ``agent_name`` for ``who`` in this process; returns at once.
        With ``remember`` False the run has no user: it neither reads nor writes memory."""
        _check_session(session)
        agent = await self.router.get(agent_name)
        self.live.reserve(who.user)
        try:
            key = session_key(who.user, session) if session else None
            # events=False: nothing queues them for an iterator; the agent's subscriber
            # publishes them (_on_event).
            handle = agent.start(task, session=key, user_id=who.user if remember else None,
                                 stream_model=stream, events=False)
        except BaseException:
            self.live.release(who.user)
            raise
        run = LiveRun(handle.run_id, who.user, agent_name, session, handle)
        self._following[run.id] = run  # before its first event: its task has not run yet
        self.live.add(run)
        pump = asyncio.get_running_loop().create_task(self._pump(run))
        self._pumps.add(pump)
        pump.add_done_callback(self._pumps.discard)
        return run

    def adopt(self, handle: RunHandle, user: str, agent: str, session: str) -> Adopted:
        """A run a chat channel started (its agent registers in :attr:`runs`): listed with
        the live runs for admins, who may abort it. It takes no API run slot (the channel's
        people are not API users); the channel feeds its events here as it follows them."""
        run = LiveRun(handle.run_id, user, agent, session, handle, channel=True)
        self.live.add(run)
        return Adopted(run, self.metrics)

    def _build(self, name: str, spec: AgentSpec, wiring: Wiring) -> Agent:
        agent = build_agent(name, spec, wiring)
        agent.subscribe(self._on_event)
        return agent

    def _on_event(self, event: Event) -> None:
        """Every event of the gateway's agents, as it is emitted: a run started here gets it
        numbered and kept for its followers, in the emitting call (a task woken per event
        to move it from the handle's queue cost each run ~20 loop turns). What a run emits
        after its result is out (post-turn jobs) was never streamed, nor is it now."""
        run = self._following.get(event.run_id)
        if run is not None and not run.handle.done:
            run.publish(event)
            self.metrics.observe(event)

    async def _pump(self, run: LiveRun) -> None:
        """Record how the run ended (its events are published as they come: _on_event);
        free its slot."""
        result: RunResult | None = None
        error: str | None = None
        ended = "failed"
        try:
            result = await run.handle.result()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the gateway is stopping
            # Aborted before its loop began (waiting for its session): nothing ran.
            error, ended = "aborted before it started", "cancelled"
        except Exception as exc:  # the run never started (its store failed, ...)
            log.exception("run %s failed outside its loop", run.id)
            error = f"{type(exc).__name__}: {exc}"
        finally:
            self._following.pop(run.id, None)
            run.finish(result, error, ended)
            self.live.release(run.user)
            self.metrics.finished(run.status)

    def _publish_external(self, run_id: str, event: Event) -> bool:
        """Events made outside the loop (questions, messages) join the run's numbered stream."""
        for run in self.live.active():
            if run.id == run_id:
                stamped = dataclasses.replace(event, step=run.handle.state.step)
                run.publish(stamped)
                return True
        return False

    async def run(self, who: Principal, run_id: str, *, to_follow: bool = False) -> Followed:
        """``who``'s run, wherever it executes (another user's is as good as absent);
        ``to_follow``: only its events are wanted (the fleet's row may be as submitted)."""
        run: Followed | None = self.live.get(run_id, who.user, who.admin)
        if run is None and self.fleet is not None:
            run = await self.fleet.get(run_id, who.user, to_follow=to_follow)
        if run is None:
            raise NotFoundError(f"no run {run_id}")
        return run

    async def abort(self, who: Principal, run_id: str) -> Followed:
        run = await self.run(who, run_id)
        stopped = (self.runs.abort(run.id) if isinstance(run, LiveRun)
                   else self.fleet is not None and await self.fleet.abort(run.id))
        if run.done or not stopped:
            raise ConflictError(f"run {run_id} has ended ({run.status})")
        return run

    async def abort_session(self, who: Principal, session: str) -> list[str]:
        key = session_key(who.user, session)
        ids = [h.run_id for h in self.runs.active(key)]
        self.runs.abort_session(key)
        if self.fleet is not None:
            ids += await self.fleet.abort_session(who.user, session)
        return ids

    def fleet_of(self, what: str) -> Fleet:
        """The fleet, for what only a fleet has (schedules); else one clear error."""
        if self.fleet is None:
            raise ConflictError(f"{what} need workers: serve with a queue (--queue redis://...)")
        return self.fleet

    async def waiting_for(self, run: Followed) -> list[tuple[str, str]]:
        """(input id, kind) of what ``run`` waits on."""
        if isinstance(run, LiveRun) or self.fleet is None:
            return self.hub.pending(run.id)
        return await self.fleet.pending(run.id)

    async def answer(self, who: Principal, run_id: str, input_id: str, answer: Answer) -> str:
        run = await self.run(who, run_id)
        if not isinstance(run, LiveRun) and self.fleet is not None:
            kind = dict(await self.fleet.pending(run.id)).get(input_id)
        else:
            kind = self.hub.kind(run.id, input_id)
        if kind is None:
            raise ConflictError(f"run {run_id} is not waiting for input {input_id!r}")
        if (kind == "approval") != (answer.approved is not None):
            field = "approved" if kind == "approval" else "answer"
            raise ConfigError(f"input {input_id!r} is {'an' if kind == 'approval' else 'a'} "
                              f"{kind}: answer it with {field!r}")
        if isinstance(run, LiveRun) or self.fleet is None:
            self.hub.answer(run.id, input_id, answer)
        elif not await self.fleet.answer(run.id, input_id, answer):
            raise ConflictError(f"input {input_id!r} of run {run_id} was answered already")
        return kind

    async def trace(self, run: Followed) -> dict[str, Any]:
        """The run's stored spans (``tracing.py``), oldest first."""
        spans = getattr(self.store, "spans", None)
        if spans is None:
            raise NotFoundError("this store keeps no traces")
        rows = await spans(run.id)
        return {"run_id": run.id, "status": run.status,
                "spans": [dataclasses.asdict(s) for s in rows]}

    # --- sessions --------------------------------------------------------------------------

    async def session(self, who: Principal, session: str) -> dict[str, Any]:
        if not SESSION_ID.fullmatch(session):
            raise NotFoundError(f"no session {session}")
        key = session_key(who.user, session)
        info = await self.store.session_info(key)
        runs: list[Followed] = list(self.live.of_session(who.user, session))
        if self.fleet is not None:
            runs += await self.fleet.session_runs(who.user, session)
        if info is None and not runs:
            raise NotFoundError(f"no session {session}")
        messages = await self.store.load(key)
        return {
            "id": session,
            "created_at": info.created_at if info else None,
            "updated_at": info.updated_at if info else None,
            # What its runs used (their records keep each run's own).
            "model": info.model if info else "",
            "input_tokens": info.input_tokens if info else 0,
            "output_tokens": info.output_tokens if info else 0,
            "cost_usd": info.cost_usd if info else 0.0,
            "messages": [{"role": m.role, "content": m.content,
                          "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                         for c in m.tool_calls]} for m in messages],
            "runs": [{"id": r.id, "status": r.status, "agent": r.agent} for r in runs],
        }

    # --- lifecycle -------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop every run still going (they end cancelled, sessions intact)."""
        self.runs.abort_all()
        if self._pumps:
            await asyncio.wait(list(self._pumps), timeout=10)
        await self.router.aclose()
        if self.fleet is not None:
            await self.fleet.aclose()


@dataclasses.dataclass(frozen=True)
class Adopted:
    """A channel's run as the gateway shows it: its events numbered, its end recorded."""

    run: LiveRun
    metrics: Metrics

    def publish(self, event: Event) -> None:
        self.run.publish(event)
        self.metrics.observe(event)

    def finish(self, result: RunResult | None, error: str | None = None) -> None:
        self.run.finish(result, error, "failed" if result is None else "completed")
        self.metrics.finished(self.run.status)


def _check_session(session: str | None) -> None:
    if session is not None and not SESSION_ID.fullmatch(session):
        raise ConfigError("session ids are 1-128 letters, digits and ._- (starting with a "
                          "letter or digit)")
