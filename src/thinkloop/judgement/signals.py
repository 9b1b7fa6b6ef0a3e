"""Assess before acting (CortexPrism metacognition ``assessTask``): the heuristic.

Signals, each 0..1, read from the task text alone:

===================  =============================================  ======================
signal               trigger                                        leans to
===================  =============================================  ======================
ambiguity            vague words ("it", "stuff", "somehow"), a      ask_first
                     bare pronoun as the object, nothing concrete
destructive          rm, delete, drop, purge, wipe, overwrite ...   ask_first (one step),
                                                                    plan_with_rollback
complexity           > 20 words, multi-step markers, numbered list  plan_with_rollback
independent          "and also", "as well as", "first ... second",  parallelize
                     several separate asks
code                 code, function, bug, fix, refactor, test ...   plan_with_rollback
exploratory          explore, investigate, look into, figure out    delegate
===================  =============================================  ======================

A ``direct`` decision whose confidence falls below 0.35 escalates to ``ask_first``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

Decision = Literal["direct", "ask_first", "plan_with_rollback", "parallelize", "delegate"]
DECISIONS: tuple[Decision, ...] = get_args(Decision)
ESCALATE_BELOW = 0.35

_I = re.IGNORECASE
_DESTRUCTIVE = re.compile(
    r"\b(?:rm|delete|deletes|deleting|drop|purge|wipe|erase|destroy|truncate|remove|"
    r"overwrite|uninstall|format|shred|nuke|kill|revoke|reset\s+--hard|force[- ]push|"
    r"clear\s+(?:all|the|every))\b", _I)
_VAGUE = re.compile(
    r"\b(?:something|stuff|things?|somehow|whatever|anything|etc|some\s+way|the\s+usual|"
    r"sort\s+of|kind\s+of|better|nicer|properly|whatnot)\b", _I)
_BARE_OBJECT = re.compile(
    r"^\s*(?:please\s+)?\w+\s+(?:it|this|that|them|those|these|everything|all)"
    r"(?:\s+(?:up|out|again|now|please|for\s+me))*\s*[.!?]?\s*$", _I)
_STEPS = re.compile(
    r"\b(?:then|after\s+that|afterwards|next|finally|first|second|third|lastly|before\s+"
    r"that|once\s+(?:done|that))\b|^\s*(?:\d+[.)]|[-*])\s", _I | re.MULTILINE)
_INDEPENDENT = re.compile(
    r"\b(?:and\s+also|as\s+well\s+as|then\s+after|separately|in\s+parallel|"
    r"independently|each\s+of|for\s+each|both)\b|\bfirst\b.*\bsecond\b|;", _I | re.DOTALL)
_CODE = re.compile(
    r"\b(?:code|function|method|class|bug|fix|refactor|compile|stack\s*trace|traceback|"
    r"unit\s+tests?|test\s+suite|module|script|regex|api\s+endpoint|exception|"
    r"implement|debug)\b|\.(?:py|js|ts|go|rs|java|c|cpp)\b", _I)
_EXPLORE = re.compile(
    r"\b(?:explore|investigate|look\s+into|figure\s+out|find\s+out|dig\s+into|map\s+out|"
    r"survey|understand|how\s+does|where\s+is|what\s+does|audit)\b", _I)
_RESEARCH = re.compile(
    r"\b(?:research|compare|look\s+up|search|find|summari[sz]e|news|sources|prices?|"
    r"weather|reviews?|collect|gather|check)\b", _I)
_CONCRETE = re.compile(r"[/\\.]\w|\d|\"[^\"]+\"|'[^']+'|`[^`]+`|\b[A-Z][a-z]+\b")
_GREETING = re.compile(r"^\s*(?:hi|hello|hey|thanks|thank\s+you|ping|good\s+\w+)\b", _I)


@dataclass(frozen=True)
class Assessment:
    """How to approach a task: the plan artifact of one run."""

    decision: Decision
    confidence: float
    signals: dict[str, float]
    suggested_subagents: tuple[str, ...] = ()
    question: str = ""
    subtasks: tuple[str, ...] = ()
    source: str = "heuristic"
    escalated: bool = False
    reasons: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision, "confidence": round(self.confidence, 3),
                "signals": {k: round(v, 3) for k, v in self.signals.items()},
                "suggested_subagents": list(self.suggested_subagents),
                "question": self.question, "subtasks": list(self.subtasks),
                "source": self.source, "escalated": self.escalated,
                "reasons": list(self.reasons)}


def signals(task: str) -> dict[str, float]:
    """Each signal of the table above, 0..1."""
    words = task.split()
    n = max(len(words), 1)
    vague = len(_VAGUE.findall(task))
    ambiguity = min(1.0, vague * 0.35 + (0.6 if _BARE_OBJECT.match(task) else 0.0))
    if not _CONCRETE.search(task) and n <= 6 and not _GREETING.match(task):
        ambiguity = min(1.0, ambiguity + 0.25)
    steps = len(_STEPS.findall(task))
    complexity = min(1.0, (0.5 if n > 20 else 0.0) + 0.25 * steps + (0.25 if n > 60 else 0.0))
    return {
        "ambiguity": ambiguity,
        "destructive": 1.0 if _DESTRUCTIVE.search(task) else 0.0,
        "complexity": complexity,
        "independent": min(1.0, 0.5 * len(_INDEPENDENT.findall(task))),
        "code": min(1.0, 0.5 * len(_CODE.findall(task))),
        "exploratory": min(1.0, 0.6 * len(_EXPLORE.findall(task))),
        "research": min(1.0, 0.5 * len(_RESEARCH.findall(task))),
    }


_SPLIT = re.compile(
    r"\s*(?:;|\band\s+also\b|\bas\s+well\s+as\b|\bthen\s+after\s+that\b|\bseparately\b|"
    r"\n\s*(?:\d+[.)]|[-*])\s*|\b(?:first|second|third|lastly)\b,?)\s*", _I)


def subtasks(task: str) -> tuple[str, ...]:
    """Independent parts of ``task`` (split at "and also", ";", list items, ordinals)."""
    parts = [p.strip(" ,.:") for p in _SPLIT.split(task)]
    return tuple(p for p in parts if len(p.split()) >= 2)


def _question(task: str, s: dict[str, float]) -> str:
    if s["destructive"]:
        verb = (_DESTRUCTIVE.search(task) or re.search(r"\w+", task) or ["change"])[0]
        return (f"Before I {verb.lower()} anything: this cannot be undone. Which exact items "
                f"should I {verb.lower()}, and is there a backup I can rely on?")
    return ("Could you say more precisely what you want? Which file, item or topic do you "
            "mean, and what result do you expect?")


def heuristic(task: str) -> Assessment:
    """The decision the signals point to, with a confidence (see the module table)."""
    s = signals(task)
    multi = s["complexity"] >= 0.5
    reasons: list[str] = []
    decision: Decision
    agents: tuple[str, ...]
    if s["destructive"] and not multi:
        conf, decision, agents = 0.6 + 0.3 * s["destructive"], "ask_first", ()
        reasons.append("destructive action in one step: confirm first")
    elif s["ambiguity"] >= 0.5 and not multi:
        conf, decision, agents = 0.5 + 0.4 * s["ambiguity"], "ask_first", ()
        reasons.append("vague request: ask what is meant")
    elif s["destructive"]:
        conf, decision, agents = 0.8, "plan_with_rollback", ("plan",)
        reasons.append("destructive multi-step work: plan with a way back")
    elif s["code"] and s["exploratory"]:
        conf, decision, agents = 0.55 + 0.3 * min(s["code"], s["exploratory"]), "delegate", (
            "explore", "code")
        reasons.append("code task that needs exploring first")
    elif s["independent"] and len(subtasks(task)) >= 2:
        conf, decision, agents = 0.55 + 0.3 * s["independent"], "parallelize", ("research",)
        reasons.append("independent subtasks")
    elif s["exploratory"] and not s["code"]:
        conf, decision, agents = 0.5 + 0.35 * s["exploratory"], "delegate", ("explore",)
        reasons.append("exploration")
    elif multi or s["code"]:
        conf = 0.5 + 0.4 * max(s["complexity"], s["code"])
        decision, agents = "plan_with_rollback", ("plan",)
        reasons.append("multi-step" if multi else "code change")
    else:
        conf, decision, agents = 0.9 - 0.9 * s["ambiguity"], "direct", ()
        reasons.append("plain request")
    escalated = decision == "direct" and conf < ESCALATE_BELOW
    if escalated:
        decision = "ask_first"
        reasons.append(f"confidence {conf:.2f} < {ESCALATE_BELOW}: escalated to ask_first")
    question = _question(task, s) if decision == "ask_first" else ""
    parts = subtasks(task) if decision == "parallelize" else ()
    return Assessment(decision, min(conf, 1.0), s, agents, question, parts,
                      escalated=escalated, reasons=tuple(reasons))
