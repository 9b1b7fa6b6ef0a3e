"""What the engine itself says to the model, and how to tell when a reply merely repeats it.

The cap notice, nudges, guard notes and format instructions are the engine's words: they go
to the model for one request (or inside an observation), never into the history as the
user's turn, and a reply that repeats them, or a format placeholder such as ``TEXT``, is not
an answer (the model is asked again; at the step cap the run ends without one). So is a
short piece of one, such as ``...Now reply with {`` (SmolLM2-135M's answer once): a reply whose
words are all, in order, a stretch of one template, with nothing else but format scaffold.
"""

from __future__ import annotations

import functools
import re

CAP_NOTICE = (
    "You have used all {n} steps available for this task. Do not call any more tools. "
    "Give your best final answer now from what you have found so far."
)
ECHO_NOTICE = (
    "Your reply repeated an instruction or a placeholder instead of answering. Answer the "
    "user's question itself, in your own words, or make a tool call."
)
NOT_AN_ANSWER_NOTICE = (
    "Your reply was not an answer: it {why}. Do not call tools now. Answer the user's "
    "question itself, in your own words, from what you have found so far."
)
# Placeholders of format instructions (decision prompts, protocol examples).
PLACEHOLDERS = frozenset({"text", "name", "answer", "your answer", "final answer", "...",
                          "<answer>", "<text>", "value", "result"})
_RUN = 5  # words in a row copied from a notice make an echo
_FIELD = re.compile(r"\{[^{}]*\}")
# A shorter piece is an echo only when it is the whole reply, bar these format marks.
_SCAFFOLD = frozenset("{}[]()<>\"'`:;,.!?-*\u2026 \t\r\n")
_SHORT = 3  # words of a whole-reply piece; fewer count only beside a brace or "..."
# Fields filled with a count ("[Round 2]"): any number stands in for them. Other fields
# stand for themselves ("{answer}" copied as it is): what fills them is the model's content.
_COUNTS = frozenset({"n", "step", "pct", "runs", "first"})
_NUMBER = "#"  # a template word that matches any number (no template has a "#")


@functools.cache
def _templates() -> tuple[str, ...]:
    from thinkloop.guard import loops, nudges, rounds
    from thinkloop.loop import phases
    from thinkloop.models import decision

    return (CAP_NOTICE, ECHO_NOTICE, NOT_AN_ANSWER_NOTICE, phases.MALFORMED_NOTICE,
            phases.OUTPUT_NOTICE,
            loops.DUPLICATE_NOTE, loops.SAME_STEP_NOTE, loops.LOOP_NOTE, loops.ANSWER_NOW,
            nudges.URGENCY, nudges.TRANSPARENCY, *rounds.FOLLOW_UPS, rounds.HINT,
            # What a small model is told after a tool result (models/decision.py).
            decision.AFTER_RESULT, decision.AFTER_LONG_RESULT, decision.AFTER_ERROR,
            decision.AFTER_STEP,
            decision.ANSWER_ONLY, decision.CALCULATOR_HINT, decision.TOOL_FORMAT)


@functools.cache
def _runs() -> frozenset[tuple[str, ...]]:
    """Every run of ``_RUN`` words in the fixed stretches (no ``{fields}``) of the engine's
    templates."""
    out: set[tuple[str, ...]] = set()
    for t in _templates():
        for piece in _FIELD.split(t):
            out.update(_windows(_words(piece)))
    return frozenset(out)


@functools.cache
def _texts() -> tuple[tuple[str, ...], ...]:
    """Each template's words in order, a count field as ``_NUMBER``."""
    def word(field: re.Match[str]) -> str:
        name = field.group()[1:-1]
        return f" {_NUMBER} " if name in _COUNTS else f" {name} "
    return tuple(tuple(re.findall(r"[a-z0-9']+|#", _FIELD.sub(word, t).lower()))
                 for t in _templates())


@functools.cache
def _places() -> dict[str, tuple[tuple[int, int], ...]]:
    """Where each word of the templates stands: (template, position), ``_NUMBER`` too."""
    found: dict[str, list[tuple[int, int]]] = {}
    for k, text in enumerate(_texts()):
        for i, word in enumerate(text):
            found.setdefault(word, []).append((k, i))
    return {word: tuple(at) for word, at in found.items()}


def _is_piece(words: list[str]) -> bool:
    """Are ``words`` a stretch of one template, in order?

    Only where the reply's rarest word stands in a template can a stretch match (a number
    stands wherever a count field does): trying every offset of every template was about
    300 µs a final answer of a few words, each run's last model call."""
    n = len(words)
    if not n:
        return bool(_texts())
    places = _places()
    counts = places.get(_NUMBER, ())
    best: tuple[tuple[int, int], ...] | None = None
    anchor = 0
    for j, w in enumerate(words):
        at = places.get(w, ())
        if w.isdigit():
            at += counts
        if best is None or len(at) < len(best):
            best, anchor = at, j
            if not at:
                return False  # a word no template has, where no count field could be
    texts = _texts()
    for k, p in best or ():
        text, i = texts[k], p - anchor
        if i >= 0 and i + n <= len(text) and all(
                t == w or (t == _NUMBER and w.isdigit())
                for t, w in zip(text[i:i + n], words, strict=True)):
            return True
    return False


def _is_short_echo(text: str) -> bool:
    """The reply is a piece of one template and nothing else but scaffold: ``Now reply
    with``, ``reply with {``. Any word of its own (a number, a name) makes it an answer."""
    words = _words(text)
    rest = re.sub(r"[a-z0-9']+", "", text.lower())
    if not words or len(words) > 40 or not set(rest) <= _SCAFFOLD:
        return False
    if len(words) < _SHORT and not ({"{", "}", "\u2026"} & set(rest) or "..." in rest):
        return False
    return _is_piece(words)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _windows(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + _RUN]) for i in range(len(words) - _RUN + 1)}


def is_internal_echo(text: str) -> bool:
    """Whether an answer is a placeholder or repeats one of the engine's own notices."""
    norm = " ".join(text.split()).strip("\"'` ").lower()
    if norm in PLACEHOLDERS or norm.strip(".[]<> ") in PLACEHOLDERS:
        return True
    return not _windows(_words(text)).isdisjoint(_runs()) or _is_short_echo(text)
