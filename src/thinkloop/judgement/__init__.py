"""The agent's judgement (CortexPrism metacognition, MQM, supervisor, post-turn learning).

Each part is a hook plugin, switched on through :class:`Judgement`:

    Agent(model, judgement=Judgement())            # every part with its defaults
    Agent(model, judgement=Judgement.parse("assess,learn"))
    thinkloop run --judgement assess,learn "..."   # or THINKLOOP_JUDGEMENT=all

``None`` on a field turns that part off.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from thinkloop.errors import ConfigError
from thinkloop.hooks import Hook
from thinkloop.judgement.assess import Assessor, AssessSettings
from thinkloop.judgement.sidecall import UsageMeter, side_call
from thinkloop.judgement.signals import DECISIONS, Assessment, Decision, heuristic, signals
from thinkloop.tools.agents import SubAgents

PARTS = ("assess",)


@dataclass(frozen=True)
class Judgement:
    assess: AssessSettings | None = field(default_factory=AssessSettings)
    subagents: SubAgents | None = None  # parallelize / delegate fan out to these

    @staticmethod
    def parse(spec: str) -> Judgement | None:
        """``"all"``, ``"off"``/``""`` or a comma list of parts (``assess``, ...)."""
        names = {p.strip().lower() for p in spec.split(",") if p.strip()}
        if not names or names == {"off"}:
            return None
        if "all" in names:
            names = set(PARTS)
        unknown = names - set(PARTS)
        if unknown:
            raise ConfigError(f"unknown judgement part(s) {', '.join(sorted(unknown))}; "
                              f"parts: all, off, {', '.join(PARTS)}")
        j = Judgement()
        return replace(j, assess=j.assess if "assess" in names else None)


@dataclass
class JudgementPlugins:
    """The live plugins of one agent (their hooks, and what they keep between runs)."""

    assessor: Assessor | None
    meter: UsageMeter

    def hooks(self) -> list[Hook]:
        out: list[Hook] = []
        if self.assessor is not None:
            out += self.assessor.hooks()
        return out


def build(j: Judgement, *, store: object) -> JudgementPlugins:
    assessor = Assessor(j.assess, store=store, subagents=j.subagents) if j.assess else None
    return JudgementPlugins(assessor, UsageMeter())


__all__ = [
    "DECISIONS",
    "PARTS",
    "AssessSettings",
    "Assessment",
    "Assessor",
    "Decision",
    "Judgement",
    "JudgementPlugins",
    "UsageMeter",
    "build",
    "heuristic",
    "side_call",
    "signals",
]
