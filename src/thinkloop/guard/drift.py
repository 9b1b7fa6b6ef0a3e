"""Goal drift (CortexPrism): does this turn change the session's goal? (``pre_assess``)

Compares the new user message with the previous one in the session: explicit drift phrases
("actually", "instead", "on second thought", "new plan") plus the Jaccard divergence of their
word sets. A ``goal.drift`` event fires when the combined score reaches ``threshold`` (0.4).
It only reports; memory and planning hooks may act on the event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from thinkloop.core.events import DriftDetected
from thinkloop.hooks import AssessContext, Hook

_PHRASES = re.compile(
    r"\b(?:actually|instead|on\s+second\s+thought|new\s+plan|change\s+of\s+plans?|"
    r"scratch\s+that|forget\s+(?:that|it)|never\s*mind)\b", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]{3,}")


@dataclass(frozen=True)
class DriftSettings:
    enabled: bool = True
    threshold: float = 0.4
    keyword_weight: float = 0.5


def drift_score(previous: str, current: str, keyword_weight: float = 0.5) -> tuple[float, float,
                                                                                   float]:
    """(score, keyword part, Jaccard divergence), each in [0, 1]."""
    keyword = min(1.0, 0.5 * len(_PHRASES.findall(current)))
    a = {w.lower() for w in _WORD.findall(previous)}
    b = {w.lower() for w in _WORD.findall(current)}
    divergence = 1.0 - (len(a & b) / len(a | b) if a | b else 1.0)
    score = keyword_weight * keyword + (1 - keyword_weight) * divergence
    return round(score, 3), keyword, round(divergence, 3)


class GoalDrift:
    def __init__(self, settings: DriftSettings | None = None) -> None:
        self.settings = settings or DriftSettings()

    def hooks(self) -> list[Hook]:
        return [Hook("pre_assess", self.check, name="guard.drift")]

    def check(self, ctx: AssessContext) -> None:
        history = ctx.state.messages[1 : ctx.state.new_from]
        previous = next((m.content for m in reversed(history) if m.role == "user"), None)
        if previous is None:
            return
        score, keyword, divergence = drift_score(previous, ctx.task,
                                                 self.settings.keyword_weight)
        if score >= self.settings.threshold:
            ctx.emit(DriftDetected, score=score, keyword=keyword, divergence=divergence,
                     previous=previous[:200])
