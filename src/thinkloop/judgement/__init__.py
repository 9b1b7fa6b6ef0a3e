"""The agent's judgement (CortexPrism metacognition, MQM, supervisor, post-turn learning).

Each part is a hook plugin, switched on through :class:`Judgement`:

    Agent(model, judgement=Judgement())            # every part with its defaults
    Agent(model, judgement=Judgement.parse("assess,learn"))
    Agent(model, judgement=Judgement(select=ModelPool([PoolModel(cheap, 1), PoolModel(big, 3)])))
    thinkloop run --judgement assess,learn "..."   # or THINKLOOP_JUDGEMENT=all

``None`` on a field turns that part off.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from thinkloop.core.errors import ConfigError
from thinkloop.core.model import Model
from thinkloop.core.tool import Tool
from thinkloop.guard.approval import ApprovalSettings
from thinkloop.hooks import Hook
from thinkloop.judgement.assess import Assessor, AssessSettings
from thinkloop.judgement.learn import Learner, LearningSettings, run_observations
from thinkloop.judgement.select import ModelPool, ModelSelector, PoolModel, parse_pool
from thinkloop.judgement.sensitive import (
    Rule,
    SensitivityGuard,
    SensitivitySettings,
    Supervisor,
    classify_call,
)
from thinkloop.judgement.signals import DECISIONS, Assessment, Decision, heuristic, signals
from thinkloop.side_calls import UsageMeter, side_call
from thinkloop.tools.subagents import SubAgents

if TYPE_CHECKING:
    from thinkloop.core.run import RunConfig, RunState

    # A run's scope, as thinkloop.loop.handle.Scope (judgement sits below the loop).
    Scope = Callable[[RunConfig, RunState], AbstractAsyncContextManager[None]]

PARTS = ("assess", "select", "sensitive", "learn")


@dataclass(frozen=True)
class Judgement:
    assess: AssessSettings | None = field(default_factory=AssessSettings)
    subagents: SubAgents | None = None  # parallelize / delegate fan out to these
    select: ModelPool | None = None  # model selection per turn (needs a pool)
    sensitive: SensitivitySettings | None = field(default_factory=SensitivitySettings)
    learn: LearningSettings | None = field(default_factory=LearningSettings)

    @staticmethod
    def parse(spec: str, pool: str = "") -> Judgement | None:
        """``"all"``, ``"off"``/``""`` or a comma list of parts (``assess``, ...).

        ``pool`` is the model pool for ``select`` (see :func:`parse_pool`); ``all`` includes
        ``select`` only when a pool is given."""
        names = {p.strip().lower() for p in spec.split(",") if p.strip()}
        if not names or names == {"off"}:
            return None
        if "all" in names:
            names = set(PARTS) if pool else set(PARTS) - {"select"}
        unknown = names - set(PARTS)
        if unknown:
            raise ConfigError(f"unknown judgement part(s) {', '.join(sorted(unknown))}; "
                              f"parts: all, off, {', '.join(PARTS)}")
        j = Judgement()
        return replace(j, assess=j.assess if "assess" in names else None,
                       select=parse_pool(pool) if "select" in names else None,
                       sensitive=j.sensitive if "sensitive" in names else None,
                       learn=j.learn if "learn" in names else None)


@dataclass
class JudgementPlugins:
    """The live plugins of one agent (their hooks, and what they keep between runs)."""

    assessor: Assessor | None
    selector: ModelSelector | None
    sensitive: SensitivityGuard | None
    learner: Learner | None
    tools: list[Tool]  # tools the plugins offer (search_tools over learned skills)
    approval: ApprovalSettings  # the agent's, with the supervisor in front of its approver
    meter: UsageMeter

    def hooks(self) -> tuple[list[Hook], list[Hook]]:
        """(hooks that go before the guards, hooks that go after them)."""
        early: list[Hook] = []
        out: list[Hook] = []
        if self.sensitive is not None:
            early += self.sensitive.early_hooks()
            out += self.sensitive.hooks()
        if self.assessor is not None:
            out += self.assessor.hooks()
        if self.selector is not None:  # after the assessor: it reads the assessment
            out += self.selector.hooks()
        if self.learner is not None:
            out += self.learner.hooks()
        return early, out

    def hide_task(self, run_id: str, task: str) -> str:
        return self.sensitive.hide_task(run_id, task) if self.sensitive is not None else task

    def hiding_first(self, scope: Scope, run_id: str, task: str) -> Scope:
        """``scope`` entered once ``task``, with its secrets hidden in a worker thread, is the
        run's task: for a task too long to scan on the event loop (``offload.off_loop``).
        Until then the run's task is empty, so nothing shows the secrets meanwhile."""
        sensitive = self.sensitive

        @asynccontextmanager
        async def hidden(cfg: RunConfig, state: RunState) -> AsyncIterator[None]:
            state.task = task if sensitive is None \
                else await sensitive.hide_long_task(run_id, task)
            async with scope(cfg, state):
                yield

        return hidden

    async def aclose(self) -> None:
        """Close the pool's models (their HTTP clients), for shells that own them."""
        for _, model in self.selector.pool.entries() if self.selector else ():
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()


def build(j: Judgement, *, store: object, approval: ApprovalSettings | None = None,
          tool_names: Sequence[str] = (),
          resolve: Callable[[Model | str], Model] | None = None) -> JudgementPlugins:
    """The plugins of one agent; ``approval`` is its guards' approval settings,
    ``tool_names`` the tools it has already, ``resolve`` how it resolves model strings."""
    meter = UsageMeter()
    assessor = Assessor(j.assess, store=store, subagents=j.subagents) if j.assess else None
    selector = None
    if j.select is not None:
        if resolve is not None:
            j.select.resolve(resolve)
        selector = ModelSelector(j.select, assessor)
    approval = approval or ApprovalSettings()
    sensitive = None
    if j.sensitive is not None:
        supervisor = j.sensitive.supervisor
        if supervisor is not None:  # one per agent, in front of the agent's own approver
            supervisor = replace(supervisor, fallback=approval.decider, meter=meter)
            approval = replace(approval, approver=supervisor)
        sensitive = SensitivityGuard(j.sensitive, approval)
    learner = Learner(j.learn, store, meter) if j.learn is not None else None
    tools = learner.tools(tool_names) if learner is not None else []
    return JudgementPlugins(assessor, selector, sensitive, learner, tools, approval, meter)


__all__ = [
    "DECISIONS",
    "PARTS",
    "AssessSettings",
    "Assessment",
    "Assessor",
    "Decision",
    "Judgement",
    "JudgementPlugins",
    "Learner",
    "LearningSettings",
    "ModelPool",
    "ModelSelector",
    "PoolModel",
    "Rule",
    "SensitivityGuard",
    "SensitivitySettings",
    "Supervisor",
    "UsageMeter",
    "build",
    "classify_call",
    "heuristic",
    "run_observations",
    "side_call",
    "signals",
]
