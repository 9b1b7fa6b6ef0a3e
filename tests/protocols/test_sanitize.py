"""GoClaw's seven-step output sanitizer, step by step, then as a pipeline."""

from __future__ import annotations

import re

import pytest

from thinkloop.protocols import sanitize as s


@pytest.mark.parametrize(("raw", "clean"), [
    ('Done.\n<tool_call>{"name": "x", "arguments": {}}</tool_call>', "Done.\n"),
    ("<tool_call>\n<function=x>\n</function>\n</tool_call>", ""),
    ('<minimax:tool_call>{"a": 1}</minimax:tool_call>Result: 3', "Result: 3"),
    ('Text <parameter name="path">a.txt</parameter> more', "Text  more"),
    ("Answer </tool_call> trailing", "Answer  trailing"),
    ("<tool_use>unclosed answer", "unclosed answer"),
    ("No tags here.", "No tags here."),
])
def test_strip_garbled_tool_xml(raw: str, clean: str) -> None:
    assert s.strip_garbled_tool_xml(raw) == clean


@pytest.mark.parametrize(("raw", "clean"), [
    ('[Tool Call: web_search]\n{"query": "x"}\n\nIt is 8C.', "It is 8C."),
    ("Intro\n[Tool Result web_search]\n10 results\nmore\n\nSummary", "Intro\n\nSummary"),
    ("[Historical context: earlier turn]\nold\n\nNow.", "Now."),
    ("[Tool read_file]: contents\n\nThe file says hi.", "The file says hi."),
    ("A\n\n[Tool Call: x]\n{}\n\nB", "A\n\nB"),
    ("A [Tool Call: inline] mention stays.", "A [Tool Call: inline] mention stays."),
])
def test_strip_downgraded_tool_call_text(raw: str, clean: str) -> None:
    assert s.strip_downgraded_tool_call_text(raw) == clean


@pytest.mark.parametrize(("raw", "clean"), [
    ("<think>plan</think>Answer", "Answer"),
    ("<THINKING>a\nb</THINKING>\nAnswer", "\nAnswer"),
    ("<thought>x</thought>A<antThinking>y</antThinking>B", "AB"),
    ("<<THINK>>plan<</THINK>>Answer", "Answer"),
    ("reasoning first</think>Answer", "Answer"),
    ("<think>outer <think>inner</think> still</think>Answer", "Answer"),
    ("Keep this.", "Keep this."),
])
def test_strip_thinking_tags(raw: str, clean: str) -> None:
    assert s.strip_thinking_tags(raw) == clean


def test_strip_final_tags_keeps_inner_content() -> None:
    assert s.strip_final_tags("<final>It is 8C.</final>") == "It is 8C."
    assert s.strip_final_tags("< FINAL >x</final >") == "x"


def test_strip_echoed_system_messages() -> None:
    raw = "[System Message] You must obey.\nsecond line\n\nThe real answer."
    assert s.strip_echoed_system_messages(raw) == "The real answer."
    assert s.strip_echoed_system_messages("Mentioning [System Message] inline") == (
        "Mentioning [System Message] inline")


def test_collapse_consecutive_duplicate_blocks() -> None:
    raw = "Para one.\n\nPara one.\n\n  Para one.  \n\nPara two.\n\nPara one."
    assert s.collapse_consecutive_duplicate_blocks(raw) == (
        "Para one.\n\nPara two.\n\nPara one.")


def test_a_sentence_said_again_and_again_is_kept_once() -> None:
    loop = "I'm glad to hear that you're enjoying your trip to the beach."
    raw = f"Sure. {loop} {loop} {loop} I'm glad to hear that you're enjoying your trip to the"
    assert s.collapse_consecutive_duplicate_blocks(raw) == f"Sure. {loop}"
    assert s.sanitize_output(f"{loop}  {loop}\n\nIt prints hi. It prints hi.") == (
        f"{loop}\n\nIt prints hi.")
    # Short repeats may be meant, and text with no repeat keeps its exact spacing.
    for kept in ("No. No. No.", "Go on.  Then stop.\tDone.", "It is 4. It is 4?",
                 "The sum is 4. The sum is 4.5."):
        assert s.collapse_consecutive_duplicate_blocks(kept) == kept


def test_strip_leading_blank_lines_keeps_indentation() -> None:
    assert s.strip_leading_blank_lines("\n  \n\t\n    code()\nmore") == "    code()\nmore"


def test_steps_are_the_seven_in_goclaw_order() -> None:
    assert [f.__name__ for f in s.CLEANERS] == [
        "strip_garbled_tool_xml", "strip_downgraded_tool_call_text", "strip_thinking_tags",
        "strip_final_tags", "strip_echoed_system_messages",
        "collapse_consecutive_duplicate_blocks", "strip_leading_blank_lines",
    ]


def test_sanitize_output_runs_every_step() -> None:
    raw = ("\n\n<think>plan</think>\n<final>Paris is 8C.</final>\n\n[System Message] obey\n\n"
           "Paris is 8C.\n\n[Tool Call: web_search]\n{\"q\": 1}\n\nBye "
           '<tool_call>{"name": "x"}</tool_call>now  \n')
    assert s.sanitize_output(raw) == "Paris is 8C.\n\nBye now"


def test_sanitize_output_accepts_a_custom_pipeline() -> None:
    assert s.sanitize_output("<final>x</final>\n", [s.strip_final_tags]) == "x"


@pytest.mark.parametrize(("text", "silent"), [
    ("NO_REPLY", True), ("  NO_REPLY\n", True), ("`NO_REPLY`", True), ("**NO_REPLY**.", True),
    ("NO_REPLY, because nothing changed", False), ("I will NO_REPLY", False), ("", False),
])
def test_is_silent(text: str, silent: bool) -> None:
    assert s.is_silent(text) is silent


class _CountingPattern:
    """A line pattern that counts the lines it is tried on."""

    def __init__(self, regex: re.Pattern[str]) -> None:
        self.regex, self.tried = regex, 0

    def match(self, line: str) -> re.Match[str] | None:
        self.tried += 1
        return self.regex.match(line)


def test_many_short_lines_without_a_block_are_not_read_a_line_at_a_time() -> None:
    """Half a million short lines took a Python step each (0.15 s) though no line could
    start a block; a text that holds one is still read a line at a time, and cleaned."""
    from thinkloop.protocols import sanitize

    pattern = _CountingPattern(sanitize._DOWNGRADED)
    lines = "a\n" * 100_000
    assert sanitize._drop_blocks(lines, pattern, ("[tool ",)) == lines  # type: ignore[arg-type]
    assert pattern.tried == 0
    text = lines + "[Tool Call: x]\n{}\n\nkept"
    assert sanitize.strip_downgraded_tool_call_text(text) == lines + "\nkept"
    assert sanitize._drop_blocks(text, pattern, ("[tool ",)) == lines + "\nkept"  # type: ignore[arg-type]
    assert pattern.tried > 100_000
    # Not ASCII: ignoring case, re matches the long s to s, so only the bracket rules such
    # a text out.
    assert sanitize.strip_downgraded_tool_call_text(
        "ok\n[Hi\u017ftorical context: x]\n{}\n\nkept") == "ok\n\nkept"
