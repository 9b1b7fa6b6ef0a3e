"""Parser behaviour beyond the table: problems, ids, argument errors, hostile input."""

from __future__ import annotations

import pytest

from thinkloop.protocols import parse_tool_calls


def test_ids_come_from_the_given_iterator() -> None:
    text = '<tool_call>{"name": "a", "arguments": {}}</tool_call>' * 2
    parsed = parse_tool_calls(text, ids=iter(["x1", "x2"]))
    assert [c.id for c in parsed.calls] == ["x1", "x2"]


def test_arguments_that_are_not_an_object_become_a_parse_error() -> None:
    parsed = parse_tool_calls('<tool_call>{"name": "add", "arguments": [1, 2]}</tool_call>')
    assert [(c.name, c.arguments) for c in parsed.calls] == [("add", {})]
    assert parsed.calls[0].parse_error == "arguments must be a JSON object, got list"
    broken = parse_tool_calls('<tool_call>{"name": "add", "arguments": "a=1 b=2"}</tool_call>')
    assert broken.calls[0].parse_error is not None
    assert broken.calls[0].parse_error.startswith("arguments are not valid JSON")


@pytest.mark.parametrize(("text", "problem"), [
    ("<tool_call>please run add</tool_call>", "could not read the tool call in <tool_call>"),
    ("<<TOOL:ADD:1, 2", "<<TOOL:ADD:...>> is missing its closing '>>'"),
    ("<|python_tag|>do the search<|eom_id|>", "could not read the call after <|python_tag|>"),
    ("[TOOL_CALLS] add 1 2", "could not read the calls after [TOOL_CALLS]"),
    ('{"name": "add", "arguments": {"a": 1 2}}', "a JSON tool call could not be decoded"),
    ("<function=add><a>1</a> junk</function>", "could not read the arguments of <function=add>"),
])
def test_attempted_but_unreadable_calls_are_problems(text: str, problem: str) -> None:
    parsed = parse_tool_calls(text)
    assert parsed.calls == []
    assert len(parsed.problems) == 1 and parsed.problems[0].startswith(problem)


def test_tool_names_limit_tag_calls_to_known_tools() -> None:
    text = "<read_file><path>a</path></read_file><get_time></get_time>"
    assert [c.name for c in parse_tool_calls(text).calls] == ["read_file"]
    known = parse_tool_calls(text, tool_names={"get_time"})
    assert [(c.name, c.arguments) for c in known.calls] == [("get_time", {})]
    assert known.content == "<read_file><path>a</path></read_file>"


def test_nothing_is_read_twice() -> None:
    # The JSON inside the tag must not also be found by the bare-JSON reader.
    text = ('<tool_call>{"name": "a", "arguments": {"inner": {"name": "b", "arguments": {}}}}'
            "</tool_call>")
    assert [c.name for c in parse_tool_calls(text).calls] == ["a"]


@pytest.mark.parametrize("text", [
    "{" * 50_000, "}" * 50_000, "[" * 50_000, '{"a":' * 10_000 + "}" * 10_000,
    '<tool_call>{"name": "x", ' * 2_000, "<<TOOL:X:" * 5_000, "<think>" * 5_000,
    "<function=a>" * 4_000, "<|python_tag|>" * 3_000, "```\n" * 10_000,
    "".join(f"<t{i}>" for i in range(5_000)), "<tool_call " + "a" * 50_000,
])
def test_hostile_input_ends_without_calls(text: str) -> None:
    parsed = parse_tool_calls(text)
    assert parsed.calls == []
