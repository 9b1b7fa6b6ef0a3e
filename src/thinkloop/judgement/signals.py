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
# Actions that cannot be taken back, as a person would say them: any tense or person
# ("cancel", "cancelled", "cancelling"), phrasal forms ("get rid of", "clean up", "take
# down"), money, publishing, production, credentials and history rewrites.
_DESTRUCTIVE = re.compile(
    r"\b(?:rm|delet\w*|drop(?:s|ped|ping)?|purg\w*|wip(?:e|es|ed|ing)|eras\w*|destroy\w*|"
    r"truncat\w*|remov\w*|overwrit\w*|uninstall\w*|shred\w*|nuk\w*|kill\w*|revok\w*|"
    r"cancel\w*|unsubscrib\w*|terminat\w*|close\s+(?:my|our|the)\b[^.]*\baccount|"
    r"get(?:ting)?\s+rid\s+of|got\s+rid\s+of|clean(?:ed|ing|s)?\s+up|tid(?:y|ied)\s+up|"
    r"take\s+down|took\s+down|go\s+away|free\s+up|no\s+longer\s+need|"
    r"transfer\w*|wir(?:e|ed|ing)\s+(?:the\s+)?(?:money|funds|\$)|pa(?:y|ys|ying)\b|"
    r"donat\w*|sell\w*|sold|refund\w*|publish\w*|post(?:s|ed|ing)?\s+(?:the|it|this|my)|"
    r"send\w*|sent|deploy\w*|ship\s+it|roll(?:s|ed|ing)?\s+back|rollback|migrat\w*|"
    r"force[- ]push\w*|squash\w*|rotat\w*|revert\w*|reset\w*|archiv\w*|approv\w*|"
    r"merg(?:e|es|ed|ing)\s+(?:everything|all)|let\s+(?:the\s+)?\w+\s+know|announc\w*|"
    r"book(?:s|ed|ing)?\s+(?:us|me|a|the)|buy\w*|bought|order(?:s|ed)?\s+(?:us|me|a|the)|"
    r"sort(?:ed|ing)?\s+out|clear\s+(?:all|the|every|out)|"
    r"format(?:ting)?\s+(?:the\s+)?(?:disk|drive|partition|sd|usb))\b", _I)
# Asking about something (explain, what does, how do I) is not doing it.
_INFORMATIONAL = re.compile(
    r"^\s*(?:(?:can|could)\s+you\s+)?(?:please\s+)?(?:explain|what|what's|whats|why|how|"
    r"is|are|does|do|which|when|who|where|should|spell\s+out|describe|define|tell\s+me|"
    r"in\s+\w+\s+terms|roughly|summari[sz]e\s+what|bash\s+one-liner|give\s+me\s+a|"
    r"show\s+me)\b|\bdon'?t\s+(?:run|send|change|do)\b|\bbut\s+don'?t\b|\?\s*$", _I)
# The target named exactly and the consequence accepted: an explicit irreversible request.
_EXPLICIT = re.compile(
    r"\bpermanently\b|\bi'?m\s+sure\b|\byes\b|\bit'?s\s+final\b|\bregenerat\w*|"
    r"\b(?:right\s+)?now\b|\bconfirm(?:ed)?\b|\bi'?m\s+the\s+only\b|\banyway\b", _I)
_TARGET = re.compile(r"[/\\~]\w|\w\.\w{2,4}\b|@\w|'[^']+'|\"[^\"]+\"|`[^`]+`|#\d|"
                     r"\bline\s+\d", _I)
_VAGUE = re.compile(
    r"\b(?:something|stuff|things?|somehow|whatever|anything|etc|some\s+way|the\s+usual|"
    r"sort\s+of|kind\s+of|better|nicer|properly|whatnot|everything|those|the\s+old|"
    r"the\s+new|we\s+talked\s+about|not\s+using|bigger|smaller|faster|cleaner|"
    r"anymore)\b", _I)
_BARE_OBJECT = re.compile(
    r"^\s*(?:please\s+)?\w+\s+(?:it|this|that|them|those|these|everything|all)"
    r"(?:\s+(?:up|out|again|now|please|for\s+me))*\s*[.!?]?\s*$", _I)
_STEPS = re.compile(
    r"\b(?:then|after\s+that|afterwards|next|finally|first|second|third|lastly|before\s+"
    r"that|once\s+(?:done|that)|one\s+\w+\s+at\s+a\s+time|cutover|keep(?:ing)?\s+(?:the|a|"
    r"every)|without\s+changing|so\s+it\s+can\s+be\s+undone|untouched)\b|"
    r"^\s*(?:\d+[.)]|[-*])\s", _I | re.MULTILINE)
_CHANGE = re.compile(
    r"\b(?:upgrad\w*|migrat\w*|mov(?:e|ing)\s+\w+(?:\s+\w+)?\s+(?:to|from)|convert\w*|"
    r"reorgani[sz]\w*|replac\w*|swap\w*|bump\w*|split\w*|refactor\w*|raise\s+the|"
    r"roll\s+\w+(?:\s+\w+){0,4}\s+out|turn\s+on|apply\s+the|rewrit\w*|restructur\w*|"
    r"merge\s+duplicate\w*|scrub\w*)\b", _I)
_INDEPENDENT = re.compile(
    r"\b(?:and\s+also|as\s+well\s+as|then\s+after|separately|in\s+parallel|"
    r"independently|each\s+of|for\s+each|each\s+one|one\s+\w+\s+each|both|three|four|"
    r"five|six|all\s+the)\b|\bfirst\b.*\bsecond\b|;", _I | re.DOTALL)
_CODE = re.compile(
    r"\b(?:code|function|method|class|bug|fix|refactor|compile|stack\s*trace|traceback|"
    r"unit\s+tests?|test\s+suite|module|script|regex|api\s+endpoint|exception|"
    r"implement|debug)\b|\.(?:py|js|ts|go|rs|java|c|cpp)\b", _I)
_EXPLORE = re.compile(
    r"\b(?:explore|investigat\w*|look\s+into|figure\s+out|find\s+out|dig\s+(?:into|through)|"
    r"map\s+out|survey|track\s+down|audit|research\w*|see\s+what|evidence|options|"
    r"competitors|why\s+(?:does|do|is|are)\b.*\b(?:keep|take|down|slow|dropp\w*|spik\w*)|"
    r"where\s+the\s+\w+\s+comes?\s+from|which\s+of\s+our|dig\s+into\s+why)\b", _I)
_RESEARCH = re.compile(
    r"\b(?:research|compare|look\s+up|search|find|summari[sz]e|news|sources|prices?|"
    r"weather|reviews?|collect|gather|check)\b", _I)
_CONCRETE = re.compile(r"[/\\.]\w|\d|\"[^\"]+\"|'[^']+'|`[^`]+`|\b[A-Z][a-z]+\b")
_GREETING = re.compile(r"^\s*(?:hi|hello|hey|thanks|thank\s+you|ping|good\s+\w+)\b", _I)
_LIST = re.compile(r"\w[^,;]*,\s*\w[^,;]*(?:,\s*|\s+and\s+)\w", _I)


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
    risk: str = ""  # the model's judgement: none, low, high, irreversible
    strong_model: bool | None = None  # the model's judgement (None: not judged)
    steps: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision, "confidence": round(self.confidence, 3),
                "signals": {k: round(v, 3) for k, v in self.signals.items()},
                "suggested_subagents": list(self.suggested_subagents),
                "question": self.question, "subtasks": list(self.subtasks),
                "source": self.source, "escalated": self.escalated,
                "reasons": list(self.reasons), "risk": self.risk,
                "strong_model": self.strong_model, "steps": list(self.steps)}


def signals(task: str) -> dict[str, float]:
    """Each signal of the table above, 0..1."""
    words = task.split()
    n = max(len(words), 1)
    vague = len(_VAGUE.findall(task))
    ambiguity = min(1.0, vague * 0.35 + (0.6 if _BARE_OBJECT.match(task) else 0.0))
    if not _CONCRETE.search(task) and n <= 6 and not _GREETING.match(task):
        ambiguity = min(1.0, ambiguity + 0.25)
    steps = len(_STEPS.findall(task))
    complexity = min(1.0, (0.25 if n > 20 else 0.0) + 0.25 * steps + (0.25 if n > 60 else 0.0))
    explicit = bool(_TARGET.search(task)) and bool(_EXPLICIT.search(task))
    return {
        "ambiguity": ambiguity,
        "destructive": 1.0 if _DESTRUCTIVE.search(task) else 0.0,
        "informational": 1.0 if _INFORMATIONAL.search(task) else 0.0,
        "explicit": 1.0 if explicit else 0.0,
        "change": 1.0 if _CHANGE.search(task) else 0.0,
        "complexity": complexity,
        "independent": min(1.0, 0.5 * len(_INDEPENDENT.findall(task))
                           + (1.0 if _LIST.search(task) else 0.0)),
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


def question_for(task: str, s: dict[str, float]) -> str:
    if s["destructive"]:
        verb = (_DESTRUCTIVE.search(task) or re.search(r"\w+", task) or ["change"])[0]
        return (f"Before I {verb.lower()} anything: this cannot be undone. Which exact items "
                f"should I {verb.lower()}, and is there a backup I can rely on?")
    return ("Could you say more precisely what you want? Which file, item or topic do you "
            "mean, and what result do you expect?")


def _decide(task: str, s: dict[str, float]) -> tuple[Decision, float, tuple[str, ...], str]:
    """(decision, confidence, suggested sub-agents, reason): the first rule that holds."""
    multi = s["complexity"] >= 0.5 or s["change"] > 0
    if (s["independent"] >= 1.0 or (s["independent"] and len(subtasks(task)) >= 2)) \
            and not s["destructive"] and not s["change"] and len(task.split()) > 7:
        return "parallelize", 0.55 + 0.3 * min(s["independent"], 1.0), ("research",), (
            "independent parts")
    if s["exploratory"] and (not s["informational"] or s["exploratory"] >= 0.6) \
            and not s["destructive"] * (1 - s["informational"]):
        return "delegate", 0.55 + 0.3 * s["exploratory"], ("explore",), "exploration first"
    if s["informational"] and not (s["destructive"] and s["ambiguity"] >= 0.5):
        return "direct", 0.8, (), "a question about something, not an action"
    if s["destructive"] and len(task.split()) <= 6 and not _TARGET.search(task):
        return "ask_first", 0.85, (), "a short irreversible request: confirm what and how"
    if multi and (s["change"] or s["destructive"]):
        return "plan_with_rollback", 0.8, ("plan",), "a change in several steps: plan, keep " \
            "a way back"
    if s["destructive"] and s["explicit"]:
        return "direct", 0.7, (), "irreversible, but target and consequence are explicit"
    if s["destructive"]:
        return "ask_first", 0.9, (), "irreversible action without an explicit target and " \
            "consequence: confirm first"
    if s["ambiguity"] >= 0.5:
        return "ask_first", 0.5 + 0.4 * s["ambiguity"], (), "vague request: ask what is meant"
    if multi:
        return "plan_with_rollback", 0.5 + 0.4 * s["complexity"], ("plan",), "multi-step"
    return "direct", 0.9 - 0.9 * s["ambiguity"], (), "plain request"


def heuristic(task: str) -> Assessment:
    """The decision the signals point to, with a confidence (see the module table)."""
    s = signals(task)
    decision, conf, agents, why = _decide(task, s)
    reasons = [why]
    escalated = decision == "direct" and conf < ESCALATE_BELOW
    if escalated:
        decision = "ask_first"
        reasons.append(f"confidence {conf:.2f} < {ESCALATE_BELOW}: escalated to ask_first")
    question = question_for(task, s) if decision == "ask_first" else ""
    parts = subtasks(task) if decision == "parallelize" else ()
    return Assessment(decision, min(conf, 1.0), s, agents, question, parts,
                      escalated=escalated, reasons=tuple(reasons))
