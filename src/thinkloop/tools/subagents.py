"""Sub-agents (CortexPrism fan-out, GoClaw minimal prompt): child :class:`Agent` runs.

:class:`SubAgents` runs child agents with their own tools and a minimal prompt, in parallel up
to a concurrency limit, and returns their results in the order the tasks were given. Every
time control passes to a child and back, a ``handoff`` event is published. Each child's usage
is added to the parent run: through ``ctx.charge_usage`` when the loop provides it, and always
in :meth:`SubAgents.usage_for` keyed by the parent's run id.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from thinkloop.core.errors import ConfigError, ToolArgumentsError, ToolExecutionError
from thinkloop.core.events import Event, Handoff, usage_payload
from thinkloop.core.model import Model

# The one agent spec: a kind of child agent the parent may spawn.
from thinkloop.core.spec import (
    MINIMAL_INSTRUCTIONS,
    AgentSpec,
    Child,
    ChildHandle,
    Spawn,
    inherited,
)
from thinkloop.core.tool import Tool, ToolContext, make_tool
from thinkloop.core.types import Usage

__all__ = ["MINIMAL_INSTRUCTIONS", "AgentSpec", "ChildResult", "SubAgents", "inherited",
           "render_results"]


DEFAULT_DESCRIPTION = "a general-purpose worker"
# A child may spawn children of its own down to this depth (the parent run is depth 0), and
# one spawn_agent call hands out at most this many tasks (issue 30: a spec that could spawn
# itself recursed without end and deadlocked on the shared slots).
MAX_SUBAGENT_DEPTH = 3
MAX_SUBAGENT_TASKS = 8
# How deep the current task is among sub-agents: a child's run task copies the context of the
# run_one that started it, so each child sees its parent's depth plus one.
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("thinkloop_subagent_depth",
                                                            default=0)


def _name(spec: AgentSpec) -> str:
    return spec.name or "worker"


@dataclass(frozen=True, slots=True)
class ChildResult:
    agent: str
    task: str
    status: str
    text: str
    usage: Usage
    run_id: str
    error: str | None = None


@dataclass
class SubAgents:
    """Runs child agents; one instance may serve many parent runs at once."""

    specs: Sequence[AgentSpec]
    model: str | Model | None = None
    max_concurrency: int = 4  # children running at once, at each depth
    max_depth: int = MAX_SUBAGENT_DEPTH
    max_tasks: int = MAX_SUBAGENT_TASKS  # tasks in one spawn_agent call
    on_event: Callable[[Event], Any] | None = None
    # How children start (None: the calling run's ``spawn``; thinkloop.subagents gives one).
    spawn: Spawn | None = None
    # The agent's TEAM, when it has one: an agent asked for by name outside it (and not one
    # of ``specs``) is refused with the names it may use.
    team: Sequence[str] | None = None
    _usage: defaultdict[str, Usage] = field(default_factory=lambda: defaultdict(Usage))

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ConfigError("max_concurrency must be at least 1")
        if not self.specs:
            raise ConfigError("SubAgents needs at least one AgentSpec")
        self.specs = [s if s.name else s.model_copy(update={"name": "worker"})
                      for s in self.specs]
        self.by_name: Mapping[str, AgentSpec] = {_name(s): s for s in self.specs}
        # Slots per depth: a parent holds its slot while its children run, so children
        # taking slots from the same pool deadlocked once every slot held a waiting parent.
        self._limits: defaultdict[int, asyncio.Semaphore] = defaultdict(
            lambda: asyncio.Semaphore(self.max_concurrency))

    def usage_for(self, parent_run_id: str) -> Usage:
        """All child usage charged to one parent run so far."""
        return self._usage[parent_run_id]

    def _emit(self, parent: ToolContext | None, **fields: Any) -> None:
        if self.on_event is not None:
            run_id, step = (parent.run_id, parent.step) if parent else ("", 0)
            self.on_event(Handoff(run_id, step, **fields))
        emit = getattr(parent, "emit", None)
        if callable(emit):
            emit(Handoff, **fields)

    def _charge(self, parent: ToolContext | None, usage: Usage) -> None:
        if parent is None:
            return
        self._usage[parent.run_id] = self._usage[parent.run_id] + usage
        charge = getattr(parent, "charge_usage", None)
        if callable(charge):
            charge(usage)

    def _agent(self, spec: AgentSpec, parent: ToolContext | None, spawn: Spawn | None) -> Child:
        # A child run is a whole agent: the caller's, this runner's or the parent run's spawn
        # makes it, so that nothing here imports the agent.
        run = getattr(parent, "run", None)
        spawn = spawn or self.spawn or getattr(run, "spawn", None)
        if spawn is None:
            raise ConfigError("sub-agents need a way to start agents: run them inside an "
                              "agent's run, or use thinkloop.subagents.SubAgents")
        return spawn(spec, run, self.model)

    async def run_one(
        self, task: str, agent: str | None = None, parent: ToolContext | None = None,
        spawn: Spawn | None = None,
    ) -> ChildResult:
        spec = self.by_name.get(agent or _name(self.specs[0]))
        if spec is None:
            known = ", ".join(self.by_name)
            if self.team is not None:
                raise ToolArgumentsError(
                    f"{agent!r} is not on your team, so you cannot delegate to it. Your team: "
                    f"{', '.join(self.team)}; or 'worker' for a general-purpose sub-agent. "
                    "Call spawn_agent again with one of these, or do the task yourself.")
            raise ToolArgumentsError(f"unknown sub-agent {agent!r}; available: {known}")
        depth = _DEPTH.get() + 1
        if depth > self.max_depth:
            raise ToolExecutionError(
                f"sub-agents may not be nested deeper than {self.max_depth}: do this task "
                "yourself with your own tools")
        async with self._limits[depth]:
            child = self._agent(spec, parent, spawn)
            handle = _start(child, task, parent, depth)
            children = getattr(parent, "children", None)
            if children is not None:
                children.started(handle.run_id, _name(spec), task, handle)
            self._emit(parent, direction="to_child", agent=_name(spec), task=task,
                       child_run_id=handle.run_id, model=child.model.name)
            start = time.perf_counter()
            try:
                result = await handle.result()
            except asyncio.CancelledError:  # the parent was aborted: so is its child
                handle.cancel()
                self._ended(parent, spec, handle.run_id, "cancelled", start)
                raise
        self._charge(parent, result.usage)
        self._ended(parent, spec, result.run_id, result.status, start, result.usage)
        return ChildResult(_name(spec), task, result.status, result.text, result.usage,
                           result.run_id, result.error)

    def _ended(self, parent: ToolContext | None, spec: AgentSpec, run_id: str, status: str,
               start: float, usage: Usage | None = None) -> None:
        children = getattr(parent, "children", None)
        if children is not None:
            children.ended(run_id, status)
        self._emit(parent, direction="to_parent", agent=_name(spec), child_run_id=run_id,
                   status=status, duration_s=round(time.perf_counter() - start, 6),
                   usage=None if usage is None else {**usage_payload(usage),
                                                     "cost_usd": usage.cost_usd})

    async def fan_out(
        self, tasks: Sequence[str | tuple[str, str]], parent: ToolContext | None = None,
        spawn: Spawn | None = None,
    ) -> list[ChildResult]:
        """Run every task (``"task"`` or ``("agent", "task")``); results keep the given order."""
        jobs = [(None, t) if isinstance(t, str) else t for t in tasks]
        return list(await asyncio.gather(*(self.run_one(t, a, parent, spawn) for a, t in jobs)))

    def tool(self) -> Tool:
        """The ``spawn_agent`` tool bound to these specs."""
        kinds = "; ".join(f"{_name(s)}: {s.description or DEFAULT_DESCRIPTION}"
                          for s in self.specs)

        async def spawn_agent(ctx: ToolContext, tasks: list[str], agent: str | None = None) -> str:
            """Hand independent tasks to sub-agents that work in parallel.

            Each task must be self-contained: the sub-agent sees only the task text.

            Args:
                tasks: one self-contained task per sub-agent
                agent: which kind of sub-agent runs them
            """
            if not tasks:
                raise ToolArgumentsError("tasks must name at least one task")
            if len(tasks) > self.max_tasks:
                raise ToolArgumentsError(
                    f"at most {self.max_tasks} tasks per spawn_agent call ({len(tasks)} "
                    "given): hand out the most important ones now, the rest in later calls")
            results = await self.fan_out([(agent or _name(self.specs[0]), t) for t in tasks], ctx)
            return render_results(results)

        t = make_tool(spawn_agent, idempotent=False, trusted_output=False)
        # starts_runs: its arguments become another run's task, so secrets stay placeholders
        # in them (judgement/sensitive.py); the child run resolves them itself.
        return replace(t, description=f"{t.description}\n\nSub-agents: {kinds}.",
                       meta={**t.meta, "starts_runs": True})


def _start(child: Child, task: str, parent: ToolContext | None, depth: int) -> ChildHandle:
    """The child's run, with the minimal prompt (GoClaw's sub-agent mode), for the parent's
    user, naming the parent's run."""
    token = _DEPTH.set(depth)  # the child's run task copies it
    try:
        return child.start(task, user_id=parent.user_id if parent else None,
                           stream_model=False, prompt_mode="minimal",
                           parent_run_id=parent.run_id if parent else None)
    finally:
        _DEPTH.reset(token)


def render_results(results: Sequence[ChildResult]) -> str:
    blocks = []
    for i, r in enumerate(results, 1):
        head = f"[{i}] {r.agent} ({r.status})"
        body = r.text if r.status == "completed" else (r.text or r.error or "no answer")
        blocks.append(f"{head}\n{body}")
    return "\n\n".join(blocks)
