"""A short piece of the engine's own prompt ("...Now reply with {", SmolLM2-135M's answer once)
is no answer: it is asked again like a long echo. Short answers that only share words with a
template ("84", "Now reply with the total: 12") are answers."""

from __future__ import annotations

import re

import pytest
from tests.loop.short_echoes import HELD, TUNED

from thinkloop import Agent, ScriptedModel, tool
from thinkloop.core.types import ToolSpec
from thinkloop.guard import loops, nudges, rounds
from thinkloop.loop import notices, phases
from thinkloop.loop.notices import NOT_AN_ANSWER_NOTICE, is_internal_echo
from thinkloop.models import decision
from thinkloop.models.scripted import call, reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _engine_texts() -> list[str]:
    """What the engine says to a model, as it says it (the format line of the tools prompt
    rendered for a tool)."""
    spec = ToolSpec("calculator", "Evaluate an expression.",
                    {"type": "object", "properties": {"expression": {"type": "string"}}})
    return [notices.CAP_NOTICE, notices.ECHO_NOTICE, NOT_AN_ANSWER_NOTICE,
            phases.MALFORMED_NOTICE, phases.OUTPUT_NOTICE, loops.DUPLICATE_NOTE,
            loops.SAME_STEP_NOTE, loops.LOOP_NOTE, loops.ANSWER_NOW, nudges.URGENCY,
            nudges.TRANSPARENCY, *rounds.FOLLOW_UPS, rounds.HINT, decision.AFTER_RESULT,
            decision.AFTER_LONG_RESULT, decision.AFTER_ERROR, decision.AFTER_STEP,
            decision.ANSWER_ONLY, decision.tools_prompt([spec])]


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _in_order(needle: list[str], hay: list[str]) -> bool:
    return any(hay[i:i + len(needle)] == needle for i in range(len(hay) - len(needle) + 1))


@pytest.mark.parametrize("text", [t for t, echo in TUNED + HELD if echo])
def test_every_labelled_echo_is_copied_from_a_real_template(text: str) -> None:
    # The labels' echoes are the engine's words (the "[Round 2]" of a follow-up is its {n}).
    words = [w for w in _words(text) if not w.isdigit()]
    fixed = [_words(re.sub(r"\{[a-z_]+\}", " ", t)) for t in _engine_texts()]
    assert any(_in_order(words, t) for t in fixed), text


def _score(cases: tuple[tuple[str, bool], ...]) -> tuple[int, list[str], list[str]]:
    missed = [t for t, echo in cases if echo and not is_internal_echo(t)]
    wrong = [t for t, echo in cases if not echo and is_internal_echo(t)]
    return len(cases) - len(missed) - len(wrong), missed, wrong


def test_the_tuned_half_is_labelled_right() -> None:
    assert _score(TUNED) == (len(TUNED), [], [])


def test_the_held_half_rejects_no_answer_and_catches_most_echoes() -> None:
    """Scored once, after the rule was fixed (see short_echoes.py): no answer may be taken
    for an echo; an echo let through ends as it did before."""
    right, missed, wrong = _score(HELD)
    assert wrong == []
    assert right >= len(HELD) - 2, missed


async def test_the_measured_short_echo_is_asked_again() -> None:
    model = ScriptedModel([reply("", call("add", a=80, b=4)), "...Now reply with {", "84"])
    result = await Agent(model, tools=[add]).run("80+4?")
    assert (result.status, result.text) == ("completed", "84")
    notice = NOT_AN_ANSWER_NOTICE.format(why="repeated the engine's instructions")
    assert model.calls[2].messages[-1].content == notice and model.calls[2].tools == ()


async def test_twice_a_short_echo_ends_no_answer() -> None:
    model = ScriptedModel([reply("", call("add", a=80, b=4)), "...Now reply with {",
                           'Now reply with {"answer": "..."}'])
    result = await Agent(model, tools=[add]).run("80+4?")
    assert (result.status, result.text) == ("no_answer", "")


def _is_piece_by_every_offset(words: list[str]) -> bool:
    """The rule as first written: every offset of every template tried."""
    n = len(words)
    for text in notices._texts():
        for i in range(len(text) - n + 1):
            if all(t == w or (t == notices._NUMBER and w.isdigit())
                   for t, w in zip(text[i:i + n], words, strict=True)):
                return True
    return False


def test_a_piece_is_found_where_trying_every_offset_finds_it() -> None:
    """``_is_piece`` looks only where the reply's rarest word stands: the same answers as
    trying every offset of every template, on every stretch of every template (a count
    field as a number, a word changed) and on the labelled replies."""
    cases: list[list[str]] = [[], ["7"], ["12", "34"], ["done", "after", "10", "steps"]]
    for text in notices._texts():
        for n in (1, 2, 3, 5, 8):
            for i in range(0, max(1, len(text) - n + 1), 3):
                piece = ["42" if w == notices._NUMBER else w for w in text[i:i + n]]
                cases += [piece, [*piece[:-1], "zebra"], [*piece[1:], "42"], piece[::-1]]
    cases += [notices._words(reply) for reply, _ in (*TUNED, *HELD)]
    for words in cases:
        assert notices._is_piece(words) == _is_piece_by_every_offset(words), words
