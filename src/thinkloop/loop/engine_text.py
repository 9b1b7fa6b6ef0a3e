"""Whether a final answer is really the engine's (or a tool's) words, not the model's.

A small model often "answers" with what it just read: a notice or a hint, the name of a
tool, spotlight markup, or a tool's bookkeeping line (``Saved memory 'name'.``). None of
these answers the user. The loop then asks once more with the tools withheld, and a run whose
second reply is still engine text ends ``no_answer`` (``loop/phases.decide``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from thinkloop.core.run import RunState
from thinkloop.core.types import ToolSpec
from thinkloop.guard.input import NAMED
from thinkloop.guard.patterns import DEFAULT_PATTERNS
from thinkloop.loop.notices import NOT_AN_ANSWER_NOTICE, is_internal_echo
from thinkloop.spotlight import strip_echo

__all__ = ["NOT_AN_ANSWER_NOTICE", "why_not_an_answer"]

# Tools whose results only confirm what they did: never the answer to a question.
BOOKKEEPING_TOOLS = frozenset({"remember", "forget"})
_TAG = re.compile(r"</?[A-Za-z_][^<>]*>|&lt;/?[A-Za-z_][^<>]*?(?:&gt;|>|$)|&[a-z]+;")
# The names the input guard shows the model in a note ("looks like a prompt injection
# (ignore_instructions, classifier)"): a small model once answered with them.
_GUARD_NOTE = re.compile(re.escape(NAMED).replace(re.escape("{names}"), "([^()]*)"))
# The default patterns' machine names: no prose is made of them. (Plain words such as
# "exfiltration" or "classifier" count only when this run's notes showed them.)
_PATTERN_NAMES = frozenset(p.name for p in DEFAULT_PATTERNS if "_" in p.name)
_LABEL_SPLIT = re.compile(r"[\s,;:()\[\]{}\"'`.]+")
_CALL = re.compile(r"^`?([A-Za-z_][\w.-]*)(\(.*\))?`?\.?$", re.DOTALL)


def _norm(text: str) -> str:
    return " ".join(text.split()).strip("\"'` .").lower()


def why_not_an_answer(text: str, tools: Sequence[ToolSpec], state: RunState) -> str | None:
    """Why ``text`` is not an answer (a phrase for the notice and the run's status), or None."""
    if not text.strip():
        return None  # an empty answer is the protocol's business (silent replies)
    # Judged as it will be delivered: a copied block of outside content reads as its content
    # (the answer cleaners unwrap it), which answers "what does the note say?"; stray tags
    # and nothing else are markup.
    text = strip_echo(text)
    if not text:
        return "was markup, not prose"
    if is_internal_echo(text):
        return "repeated the engine's instructions"
    call = _CALL.match(text.strip())
    if call and call.group(1) in {t.name for t in tools} | _called(state):
        return f"only named the tool {call.group(1)!r}"
    if _is_markup(text):
        return "was markup, not prose"
    if _only_guard_labels(text, state):
        return "only named the input guard's patterns"
    norm = _norm(text)
    for name, content, is_error in _results(state):
        if norm and norm == _norm(content) and (is_error or name in BOOKKEEPING_TOOLS):
            return f"repeated what the tool {name!r} reported"
    return None


def _is_markup(text: str) -> bool:
    """Mostly tags (spotlight's among them, whole or cut off): prose around a stray tag, as
    a sub-agent's forged closing tag, is still an answer."""
    if not _TAG.search(text):
        return False
    stripped = _TAG.sub(" ", text)
    letters = sum(c.isalnum() for c in stripped)
    return letters < max(3, sum(c.isalnum() for c in text) // 3)


def _only_guard_labels(text: str, state: RunState) -> bool:
    """The reply is the guard's pattern names or detector labels and nothing else, once or
    repeated (``(ignore_instructions) (ignore_instructions)``)."""
    words = {w.lower() for w in _LABEL_SPLIT.split(text) if w}
    if not words or words <= _PATTERN_NAMES:
        return bool(words)
    shown = {n.strip().lower() for _, content, _ in _results(state)
             for names in _GUARD_NOTE.findall(content) for n in names.split(",")}
    return words <= shown | _PATTERN_NAMES


def _called(state: RunState) -> set[str]:
    return {r.call.name for step in state.steps for r in step.results}


def _results(state: RunState) -> Iterable[tuple[str, str, bool]]:
    for step in state.steps:
        for r in step.results:
            yield r.call.name, r.content, r.is_error
