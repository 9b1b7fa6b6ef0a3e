"""Every model family's format, read whole, typed by the tools' schemas (cases: families.py)."""

from __future__ import annotations

from typing import Any

import pytest

from thinkloop.protocols import parse_tool_calls
from thinkloop.protocols.table import family_of

from .families import CASES, FAMILIES, QUIRKS, SCENARIOS, TOOLS, Family, Scenario, render


def flat(text: str) -> str:
    return " ".join(text.split())


def test_every_family_has_at_least_15_cases() -> None:
    assert len(SCENARIOS) >= 15
    assert len(FAMILIES) >= 25


@pytest.mark.parametrize(("family", "scenario"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_family_scenario_parses_whole(family: Family, scenario: Scenario) -> None:
    text = render(family, scenario)
    parsed = parse_tool_calls(text, tools=TOOLS)
    assert [(c.name, c.arguments) for c in parsed.calls] == scenario.calls, text
    assert all(c.parse_error is None for c in parsed.calls)
    assert parsed.problems == []
    assert flat(parsed.content) == flat(f"{scenario.before} {scenario.after}")
    assert parsed.thoughts == ([scenario.thought] if scenario.thought else [])


@pytest.mark.parametrize(("family", "scenario"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_family_scenario_parses_in_the_familys_own_formats(family: Family,
                                                           scenario: Scenario) -> None:
    known = family_of(family.model)
    assert known is not None, family.model
    parsed = parse_tool_calls(render(family, scenario), tools=TOOLS, formats=known.formats)
    assert [(c.name, c.arguments) for c in parsed.calls] == scenario.calls


@pytest.mark.parametrize(("text", "calls", "content"), [q[1:] for q in QUIRKS],
                         ids=[q[0] for q in QUIRKS])
def test_family_quirks(text: str, calls: list[tuple[str, dict[str, Any]]], content: str) -> None:
    parsed = parse_tool_calls(text, tools=TOOLS)
    assert [(c.name, c.arguments) for c in parsed.calls] == calls
    assert flat(parsed.content) == content
