"""Provenance by intent: a request asks for a tool's effect through an action verb, not
through nouns that happen to be words of the tool's name. The table (tests/guard/data/
intent_table.tsv) holds over 200 requests, each labelled with the effects it asks for
("[edit]": either reading is fair); every tool's answer must match its label."""

from __future__ import annotations

from pathlib import Path

import pytest

from thinkloop.guard.intent import asked_effects, asked_for, tool_effects

TOOLS = {"write_file": "write", "edit_file": "edit", "delete_file": "delete",
         "send_email": "send", "send_message": "send", "transfer_money": "pay",
         "run_command": "run", "shell": "run", "schedule_meeting": "schedule"}


def table() -> list[tuple[str, set[str], set[str]]]:
    rows = []
    path = Path(__file__).parent / "data" / "intent_table.tsv"
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        request, labels = line.split("\t")
        words = labels.split() if labels != "-" else []
        rows.append((request, {w for w in words if not w.startswith("[")},
                     {w.strip("[]") for w in words if w.startswith("[")}))
    return rows


def test_the_table_is_large_and_varied() -> None:
    rows = table()
    assert len(rows) >= 200 and len({r for r, _, _ in rows}) == len(rows)
    asked = {e for _, want, _ in rows for e in want}
    assert asked == {"write", "edit", "delete", "send", "pay", "run", "schedule"}
    assert sum(not want for _, want, _ in rows) >= 40  # requests that ask for nothing


@pytest.mark.parametrize(("request_", "want", "either"), table(),
                         ids=[r[:40] for r, _, _ in table()])
def test_each_request_asks_for_exactly_its_tools(request_: str, want: set[str],
                                                 either: set[str]) -> None:
    for tool, effect in TOOLS.items():
        if effect in either:
            continue
        assert asked_for(tool, request_) == (effect in want), (tool, sorted(
            asked_effects(request_)))


def test_tool_effects_come_from_its_name_or_its_declaration() -> None:
    assert tool_effects("mail_send_email") == {"send"}
    assert tool_effects("transfer_money") == {"pay"}
    assert tool_effects("frobnicate") == frozenset()
    assert tool_effects("frobnicate", ["delete"]) == {"delete"}
    # A tool of no known effect is asked for by its own name in the position of a verb.
    assert asked_for("frobnicate", "Please frobnicate the widget.")
    assert not asked_for("frobnicate", "What does the frobnicate flag do?")
