"""Sub-agents (CortexPrism fan-out, GoClaw minimal prompt): child :class:`Agent` runs.

:class:`SubAgents` runs child agents with their own tools and a minimal prompt, in parallel up
to a concurrency limit, and returns their results in the order the tasks were given. Every
time control passes to a child and back, a ``handoff`` event is published. Each child's usage
is added to the parent run: through ``ctx.charge_usage`` when the loop provides it, and always
in :meth:`SubAgents.usage_for` keyed by the parent's run id.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from thinkloop.errors import ConfigError, ToolArgumentsError
from thinkloop.events import Event, Handoff
from thinkloop.models.base import Model
from thinkloop.tools.base import Tool, ToolContext, as_tool, make_tool
from thinkloop.types import Usage

MINIMAL_INSTRUCTIONS = (
    "You are a focused sub-agent working for another agent. Do exactly the task you are given, "
    "using your tools when they help, and reply with a short, complete, self-contained result. "
    "Do not ask questions; state any assumption you had to make."
)


@dataclass(frozen=True)
class AgentSpec:
    """A kind of child agent the parent may spawn."""

    name: str
    description: str = "a general-purpose worker"
    instructions: str = MINIMAL_INSTRUCTIONS
    tools: Sequence[Tool | Callable[..., Any]] = ()
    model: str | Model | None = None
    max_steps: int = 8
    timeout_s: float | None = 300.0
    plugins: bool = True  # outside a run: also the installed plugin tools and hooks


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
    max_concurrency: int = 4
    on_event: Callable[[Event], Any] | None = None
    _usage: defaultdict[str, Usage] = field(default_factory=lambda: defaultdict(Usage))

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ConfigError("max_concurrency must be at least 1")
        if not self.specs:
            raise ConfigError("SubAgents needs at least one AgentSpec")
        self.by_name: Mapping[str, AgentSpec] = {s.name: s for s in self.specs}
        self._limit = asyncio.Semaphore(self.max_concurrency)

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

    def _agent(self, spec: AgentSpec, parent: ToolContext | None) -> Any:
        # The one place below agent.py that builds an Agent: a child run is a whole agent.
        from thinkloop.agent import Agent  # plugin boundary

        model = spec.model if spec.model is not None else self.model
        run = getattr(parent, "run", None)
        if run is None:  # called outside a run: nothing to inherit, the default guards apply
            return Agent(model, tools=spec.tools, instructions=spec.instructions,
                         name=spec.name, max_steps=spec.max_steps, timeout_s=spec.timeout_s,
                         plugins=spec.plugins)
        return Agent(model, instructions=spec.instructions, name=spec.name,
                     deps=run.deps, **inherited(spec, run))

    async def run_one(
        self, task: str, agent: str | None = None, parent: ToolContext | None = None
    ) -> ChildResult:
        spec = self.by_name.get(agent or self.specs[0].name)
        if spec is None:
            known = ", ".join(self.by_name)
            raise ToolArgumentsError(f"unknown sub-agent {agent!r}; available: {known}")
        async with self._limit:
            child = self._agent(spec, parent)
            handle = child.start(task, user_id=parent.user_id if parent else None,
                                 stream_model=False)
            self._emit(parent, direction="to_child", agent=spec.name, task=task,
                       child_run_id=handle.run_id)
            start = time.perf_counter()
            result = await handle.result()
        self._charge(parent, result.usage)
        self._emit(parent, direction="to_parent", agent=spec.name,
                   child_run_id=result.run_id, status=result.status,
                   duration_s=round(time.perf_counter() - start, 6))
        return ChildResult(spec.name, task, result.status, result.text, result.usage,
                           result.run_id, result.error)

    async def fan_out(
        self, tasks: Sequence[str | tuple[str, str]], parent: ToolContext | None = None
    ) -> list[ChildResult]:
        """Run every task (``"task"`` or ``("agent", "task")``); results keep the given order."""
        jobs = [(None, t) if isinstance(t, str) else t for t in tasks]
        return list(await asyncio.gather(*(self.run_one(t, a, parent) for a, t in jobs)))

    def tool(self) -> Tool:
        """The ``spawn_agent`` tool bound to these specs."""
        kinds = "; ".join(f"{s.name}: {s.description}" for s in self.specs)

        async def spawn_agent(ctx: ToolContext, tasks: list[str], agent: str | None = None) -> str:
            """Hand independent tasks to sub-agents that work in parallel.

            Each task must be self-contained: the sub-agent sees only the task text.

            Args:
                tasks: one self-contained task per sub-agent
                agent: which kind of sub-agent runs them
            """
            if not tasks:
                raise ToolArgumentsError("tasks must name at least one task")
            results = await self.fan_out([(agent or self.specs[0].name, t) for t in tasks], ctx)
            return render_results(results)

        t = make_tool(spawn_agent, idempotent=False, trusted_output=False)
        # starts_runs: its arguments become another run's task, so secrets stay placeholders
        # in them (judgement/sensitive.py); the child run resolves them itself.
        return replace(t, description=f"{t.description}\n\nSub-agents: {kinds}.",
                       meta={**t.meta, "starts_runs": True})


def _narrower(mine: float | None, parents: float | None) -> float | None:
    return parents if mine is None else mine if parents is None else min(mine, parents)


def inherited(spec: AgentSpec, run: Any) -> dict[str, Any]:
    """What a child of the run ``run`` (a ``RunConfig``) gets: at most what the parent has.

    Tools: the spec's (the developer chose them), each as the parent run has it when it has
    one of that name. Hooks: every guard, plugin and user hook of the parent (policy, allow
    and deny lists, approvals, dangerous-command rules, rate limits), so whatever the parent
    may not call its children may not call either; without the parent's own context and
    memory hooks. Limits: the smaller of the
    spec's and the parent's. Workspace and user: the parent's (same tools, same user id).
    Settings: the parent's.
    """
    parent_tools: Mapping[str, Tool] = run.tools
    wanted = [as_tool(t) for t in spec.tools]
    tools = [parent_tools.get(t.name, t) for t in wanted]
    hooks = [h for stage in run.hooks.by_stage.values() for h in stage
             if not h.name.startswith(_PARENTS_OWN)]
    limits = run.limits
    return {
        "tools": tools,
        "hooks": hooks,
        "guard": False,  # the parent's guards come in with its hooks, settings and state
        "plugins": False,  # plugin hooks too
        "max_steps": min(spec.max_steps, run.limits.max_steps),
        "timeout_s": _narrower(spec.timeout_s, limits.timeout_s),
        "tool_timeout_s": limits.tool_timeout_s,
        "config": getattr(run, "config", None),  # the parent's settings, not read again
    }


# The parent's own conversation and records (history, memory, trace, run log) and its step
# budget (the child's steps are already no more than the parent's): not inherited.
_PARENTS_OWN = ("context.", "memory.", "tracing.", "runs.", "guard.steps")


def render_results(results: Sequence[ChildResult]) -> str:
    blocks = []
    for i, r in enumerate(results, 1):
        head = f"[{i}] {r.agent} ({r.status})"
        body = r.text if r.status == "completed" else (r.text or r.error or "no answer")
        blocks.append(f"{head}\n{body}")
    return "\n\n".join(blocks)
