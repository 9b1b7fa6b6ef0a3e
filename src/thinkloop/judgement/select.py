"""Model selection per turn (CortexPrism's Model Quartermaster, MQM).

A :class:`ModelPool` lists models tagged with their price and capability (1 = cheap and
quick ... 3 = strongest). Before step 1 the task's needs are read from the assessment: when
a model made it, its judgement of difficulty and risk (``strong_model``, ``risk``) decides
(capability 3 when strong or risky, else 1) and the price decides among the able models;
otherwise the step-budget heuristic: trivial and simple tasks need
capability 1, standard ones 2, complex, code and multi-step work 3. How sure that reading is
decides how binding the choice is:

==========  ====================  ==============================================
mode        confidence            effect
==========  ====================  ==============================================
enforce     >= ``enforce_at``     the chosen model answers every call of the run
suggest     >= ``suggest_at``     used only when it is stronger than the default
                                  (a suggestion never downgrades); else noted
defer       below                 the agent's own model
==========  ====================  ==============================================

The choice and why go out as a ``model.selected`` event; each call's ``llm.response`` names
the model that answered. A pool entry may set ``reasoning_effort`` for the calls it serves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from thinkloop.core.errors import ConfigError
from thinkloop.core.events import ModelSelected
from thinkloop.core.model import Model
from thinkloop.core.types import Usage
from thinkloop.guard.budget import classify
from thinkloop.guard.run_memory import RunMemory
from thinkloop.hooks import AssessContext, Hook, ReasonContext
from thinkloop.judgement.assess import Assessor
from thinkloop.judgement.signals import Assessment, heuristic
from thinkloop.models.pricing import price_for
from thinkloop.models.registry import resolve_model

Mode = Literal["enforce", "suggest", "defer"]
Effort = Literal["low", "medium", "high"]
NEEDS = {"trivial": 1, "simple": 1, "standard": 2, "complex": 3}
STRONG_DECISIONS = frozenset({"plan_with_rollback", "delegate"})


@dataclass(frozen=True)
class PoolModel:
    model: Model | str
    capability: int  # 1 cheap/quick, 2 capable, 3 strongest
    cost_in: float | None = None  # USD per million input tokens (None: the pricing table)
    cost_out: float | None = None
    reasoning_effort: Effort | None = None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Choice:
    model: Model | None  # None: the agent's own model
    name: str
    capability: int
    needed: int
    mode: Mode
    confidence: float
    reason: str
    reasoning_effort: Effort | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.name, "capability": self.capability, "needed": self.needed,
                "mode": self.mode, "confidence": round(self.confidence, 3),
                "reason": self.reason, "reasoning_effort": self.reasoning_effort}


@dataclass(frozen=True)
class ModelPool:
    models: Sequence[PoolModel]
    enforce_at: float = 0.7
    suggest_at: float = 0.45
    _resolved: list[tuple[PoolModel, Model]] = field(default_factory=list, compare=False,
                                                     repr=False)

    def __post_init__(self) -> None:
        if not self.models:
            raise ConfigError("a ModelPool needs at least one model")

    def resolve(self, resolver: Callable[[Model | str], Model] = resolve_model) -> None:
        """Resolve the pool's model strings, once: an agent passes its own resolver (its
        settings and model registry); a pool used alone resolves with the loaded settings."""
        if not self._resolved:
            self._resolved.extend((m, resolver(m.model))
                                  for m in sorted(self.models, key=lambda m: m.capability))

    def entries(self) -> list[tuple[PoolModel, Model]]:
        self.resolve()
        return list(self._resolved)

    def pick(self, needed: int) -> tuple[PoolModel, Model]:
        """The cheapest model able enough for ``needed`` (the strongest when none is)."""
        entries = self.entries()
        able = [(p, m) for p, m in entries if p.capability >= needed]
        return able[0] if able else entries[-1]

    def capability_of(self, model: Model) -> int:
        return next((p.capability for p, m in self.entries() if m is model
                     or m.name == model.name), 0)

    def cost(self, model_name: str, usage: Usage) -> float:
        """USD for ``usage`` on a pool model (tagged price, else the pricing table)."""
        for p, m in self.entries():
            if m.name == model_name and p.cost_in is not None:
                return (usage.input_tokens * p.cost_in
                        + usage.output_tokens * (p.cost_out or p.cost_in)) / 1_000_000
        price = price_for(model_name)
        if price is None:
            return usage.cost_usd
        return (usage.input_tokens * price[0] + usage.output_tokens * price[1]) / 1_000_000


def needs(task: str, found: Assessment) -> tuple[int, float, str]:
    """Capability the task needs, how sure that is, and why: the model's judgement of
    difficulty and risk when the assessment is the model's, the heuristic's otherwise."""
    if found.source == "model" and found.strong_model is not None:
        risky = found.risk in ("high", "irreversible")
        need = 3 if found.strong_model or risky else 1
        strong = "needed" if found.strong_model else "not needed"
        why = f"assessed by the model: strong model {strong}, risk {found.risk or 'unstated'}"
        return need, found.confidence, why
    complexity = classify(task)
    need = NEEDS[complexity]
    why = f"task looks {complexity}"
    if found.decision in STRONG_DECISIONS or found.signals.get("code", 0) >= 0.5:
        need, why = 3, f"{why}; assessment {found.decision}"
    return need, found.confidence, why


class ModelSelector:
    def __init__(self, pool: ModelPool, assessor: Assessor | None = None) -> None:
        self.pool = pool
        self.assessor = assessor
        self.choices: RunMemory[list[Choice]] = RunMemory(list)

    def hooks(self) -> list[Hook]:
        return [Hook("pre_assess", self.select, name="judgement.select"),
                Hook("pre_reason", self.apply, name="judgement.select.apply"),
                self.choices.drop_hook("judgement.select")]

    def choose(self, task: str, default: Model, found: Assessment | None = None) -> Choice:
        found = found or heuristic(task)
        need, conf, why = needs(task, found)
        entry, model = self.pool.pick(need)
        p = self.pool
        mode: Mode = ("enforce" if conf >= p.enforce_at else
                      "suggest" if conf >= p.suggest_at else "defer")
        stronger = entry.capability > p.capability_of(default)
        if mode == "defer" or (mode == "suggest" and not stronger):
            return Choice(None, default.name, p.capability_of(default), need, mode, conf,
                          f"{why}; {mode}: kept {default.name} (suggested {model.name})")
        return Choice(model, model.name, entry.capability, need, mode, conf,
                      f"{why}; needs capability {need}: {model.name} is the cheapest able "
                      "model", entry.reasoning_effort)

    def select(self, ctx: AssessContext) -> None:
        found = self.assessor.latest.get(ctx.run_id) if self.assessor else None
        choice = self.choose(ctx.task, ctx.cfg.model, found)
        self.choices.get(ctx).append(choice)
        ctx.emit(ModelSelected, **choice.to_dict())

    def apply(self, ctx: ReasonContext) -> None:
        chosen = self.choices.get(ctx)
        if not chosen or chosen[-1].model is None:
            return
        choice = chosen[-1]
        ctx.model = choice.model
        if choice.reasoning_effort and ctx.settings is not None:
            ctx.settings = replace(ctx.settings, reasoning_effort=choice.reasoning_effort)


def parse_pool(spec: str) -> ModelPool:
    """``"openai:gpt-4o-mini=1,openai:o4-mini=3/high"``: model=capability[/effort], ..."""
    entries = []
    for item in (i.strip() for i in spec.split(",")):
        if not item:
            continue
        model, sep, rest = item.rpartition("=")
        level, _, effort = rest.partition("/")
        if not sep or not model or not level.isdigit() or effort not in ("", "low", "medium",
                                                                        "high"):
            raise ConfigError(f"bad model pool entry {item!r}: expected "
                              "provider:model=capability[/low|medium|high]")
        entries.append(PoolModel(model, int(level),
                                 reasoning_effort=effort or None))  # type: ignore[arg-type]
    if not entries:
        raise ConfigError("judgement part 'select' needs a model pool (--model-pool or "
                          "THINKLOOP_MODEL_POOL), e.g. 'openai:gpt-4o-mini=1,openai:gpt-4o=3'")
    return ModelPool(entries)
