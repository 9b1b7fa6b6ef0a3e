"""The stderr line of a refused call: whole words, the reason's first clause, how to allow."""

from __future__ import annotations

from thinkloop.cli.refusals import REASON_CHARS, line


def test_a_refusal_line_is_the_first_clause_then_how_to_allow_it() -> None:
    reason = ("Not approved: send_message needs approval and there is no terminal to ask on; "
              "run again with --approve auto to allow such calls (or --approve pause --session "
              "NAME to decide later with 'thinkloop approvals decide'). The call was not run; "
              "do not retry it as is.")
    said = line({"tool": "send_message", "reason": reason,
                 "allow": "--approve auto runs such calls without asking"})
    assert said == ("thinkloop: refused send_message: Not approved: send_message needs "
                    "approval and there is no terminal to ask on (to allow it: --approve auto "
                    "runs such calls without asking)")


def test_a_long_reason_is_cut_at_a_word() -> None:
    reason = "Access refused: " + "very " * 60 + "long"
    said = line({"tool": "read_file", "reason": reason, "allow": "--workspace DIR"})
    shown = said.removeprefix("thinkloop: refused read_file: ").split(" (to allow it")[0]
    assert shown.endswith("very…") and len(shown) <= REASON_CHARS + 1
    path = line({"tool": "write_file", "reason": "Error: absolute paths are not allowed. Use "
                 "a path in the workspace.", "allow": "--workspace DIR"})
    assert "refused write_file: Error: absolute paths are not allowed (to allow" in path
