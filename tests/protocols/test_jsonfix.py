"""Lenient JSON: each repair on its own, the bracket map, and what stays an error."""

from __future__ import annotations

from typing import Any

import pytest

from thinkloop.protocols.jsonfix import JsonRepairError, loads_lenient, match_brackets


@pytest.mark.parametrize(("text", "value"), [
    ('{"a": "line\nnext"}', {"a": "line\nnext"}),
    ("{a: 1, b_2: {c: 2}}", {"a": 1, "b_2": {"c": 2}}),
    ("{'a': 'it\\'s', \"b\": 'say \"hi\"'}", {"a": "it's", "b": 'say "hi"'}),
    ('{"a": [1, 2,], "b": 3,}', {"a": [1, 2], "b": 3}),
    ('{"t": True, "f": False, "n": None}', {"t": True, "f": False, "n": None}),
    ('{"a": {"b": [1, 2', {"a": {"b": [1, 2]}}),
    ('{"a": "unterminated', {"a": "unterminated"}),
    ('{"a": ', {"a": None}),
    ('{"a": 1 "b": 2}', {"a": 1, "b": 2}),
    ('{"p": "C:\\dir\\x"}', {"p": "C:\\dir\\x"}),
    ('{"n": +5, "m": 1_000}', {"n": 5, "m": 1000}),
])
def test_repairs(text: str, value: Any) -> None:
    assert loads_lenient(text) == value


@pytest.mark.parametrize("text", ["{a: hello world}", "{'a': 1}}", "<x>", '{"a": 1 2}', ""])
def test_hopeless_text_is_one_clear_error(text: str) -> None:
    with pytest.raises(JsonRepairError):
        loads_lenient(text)


def test_match_brackets_pairs_across_strings_and_ignores_prose_quotes() -> None:
    text = 'It\'s {"a": "}", "b": [1, {"c": 2}]} and [x] and {'
    pairs = match_brackets(text)
    assert text[5:pairs[5] + 1] == '{"a": "}", "b": [1, {"c": 2}]}'
    assert text[pairs[text.index("[x]")]] == "]"
    assert text.rindex("{") not in pairs
