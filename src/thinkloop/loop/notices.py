"""What the engine itself says to the model, and how to tell when a reply merely repeats it.

The cap notice, nudges, guard notes and format instructions are the engine's words: they go
to the model for one request (or inside an observation), never into the history as the
user's turn, and a reply that repeats them, or a format placeholder such as ``TEXT``, is not
an answer (the model is asked again; at the step cap the run ends without one).
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


@functools.cache
def _runs() -> frozenset[tuple[str, ...]]:
    """Every run of ``_RUN`` words in the fixed stretches (no ``{fields}``) of the engine's
    templates."""
    from thinkloop.guard import loops, nudges, rounds
    from thinkloop.loop import phases
    from thinkloop.models import decision

    templates = [CAP_NOTICE, ECHO_NOTICE, NOT_AN_ANSWER_NOTICE, phases.MALFORMED_NOTICE,
                 phases.OUTPUT_NOTICE,
                 loops.DUPLICATE_NOTE, loops.SAME_STEP_NOTE, loops.LOOP_NOTE,
                 nudges.URGENCY, nudges.TRANSPARENCY, *rounds.FOLLOW_UPS, rounds.HINT,
                 # What a small model is told after a tool result (models/decision.py).
                 decision.AFTER_RESULT, decision.AFTER_LONG_RESULT, decision.AFTER_ERROR,
                 decision.AFTER_STEP,
                 decision.ANSWER_ONLY, decision.CALCULATOR_HINT]
    out: set[tuple[str, ...]] = set()
    for t in templates:
        for piece in _FIELD.split(t):
            out.update(_windows(_words(piece)))
    return frozenset(out)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _windows(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + _RUN]) for i in range(len(words) - _RUN + 1)}


def is_internal_echo(text: str) -> bool:
    """Whether an answer is a placeholder or repeats one of the engine's own notices."""
    norm = " ".join(text.split()).strip("\"'` ").lower()
    if norm in PLACEHOLDERS or norm.strip(".[]<> ") in PLACEHOLDERS:
        return True
    return not _windows(_words(text)).isdisjoint(_runs())
