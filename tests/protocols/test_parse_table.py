"""The parser against a table of realistic raw model outputs, one per format variant."""

from __future__ import annotations

from typing import Any

import pytest

from thinkloop.protocols import parse_tool_calls

from .cases import ALL


def test_the_table_is_large_enough() -> None:
    assert len(ALL) >= 80
    assert len({case[0] for case in ALL}) == len(ALL)


@pytest.mark.parametrize(("raw", "calls", "content", "thoughts"),
                         [c[1:] for c in ALL], ids=[c[0] for c in ALL])
def test_parse(raw: str, calls: list[tuple[str, dict[str, Any]]], content: str,
               thoughts: list[str]) -> None:
    parsed = parse_tool_calls(raw)
    assert [(c.name, c.arguments) for c in parsed.calls] == calls
    assert all(c.parse_error is None for c in parsed.calls)
    assert parsed.content == content
    assert parsed.thoughts == thoughts
    assert parsed.problems == []
    assert [c.id for c in parsed.calls] == [f"call_{i}" for i in range(1, len(calls) + 1)]
