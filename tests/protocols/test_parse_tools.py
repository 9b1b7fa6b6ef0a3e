"""parse_tool_calls(tools=...): calls fitted to known tools, typed by schema; mentions are prose."""

from __future__ import annotations

from typing import Any

import pytest

from thinkloop.protocols import parse_tool_calls
from thinkloop.protocols.coerce import coerce_value

from .families import TOOLS

CALL = '<tool_call>{"name": "%s", "arguments": {"city": "Paris"}}</tool_call>'


def test_an_unknown_tool_stays_text_and_is_named_as_a_problem() -> None:
    text = "Trying.\n" + CALL % "launch_rocket"
    parsed = parse_tool_calls(text, tools=TOOLS)
    assert parsed.calls == []
    assert parsed.content == text
    assert parsed.problems == ["unknown tool 'launch_rocket'"]


def test_known_calls_are_kept_beside_an_unknown_one() -> None:
    text = '[TOOL_CALLS][{"name": "get_time", "arguments": {}}, {"name": "nope", "arguments": {}}]'
    parsed = parse_tool_calls(text, tools=TOOLS)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("get_time", {})]
    assert parsed.problems == ["unknown tool 'nope'"]


@pytest.mark.parametrize("written", ["GET_WEATHER", "functions.get_weather", "Get_Weather"])
def test_names_match_the_tool_in_any_case_and_namespace(written: str) -> None:
    parsed = parse_tool_calls(CALL % written, tools=TOOLS)
    assert [c.name for c in parsed.calls] == ["get_weather"]


def test_openai_style_tool_dicts_are_accepted() -> None:
    tools = [{"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}]
    text = "<tool_call>\n<function=add>\n<parameter=a>\n2\n</parameter>\n<parameter=b>\n-3\n" \
           "</parameter>\n</function>\n</tool_call>"
    parsed = parse_tool_calls(text, tools=tools)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("add", {"a": 2, "b": -3})]


def test_without_tools_xml_values_stay_text() -> None:
    text = "<tool_call>\n<function=set_flags>\n<parameter=flag>\ntrue\n</parameter>\n" \
           "</function>\n</tool_call>"
    assert parse_tool_calls(text).calls[0].arguments == {"flag": "true"}
    assert parse_tool_calls(text, tools=TOOLS).calls[0].arguments == {"flag": True}


@pytest.mark.parametrize("text", [
    'To call it, write {"name": "get_weather", "arguments": {"city": "Paris"}} in your reply.',
    'Example: {"name": "get_time", "parameters": {}} is the Llama 3.1 format.',
    "I could run [get_weather(city='Paris')] but I already know it is sunny.",
    'The format is `<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>`, see?',
    "Calling get_weather(city='Paris') would tell us; it is sunny anyway.",
    'A list like [{"name": "get_time", "arguments": {}}] is what xLAM writes.',
    "Phi writes functools[...] and Mistral [TOOL_CALLS], but I need neither.",
    'Use ```json fences``` like {"name": "echo", "arguments": {"text": "x"}} only when asked.',
])
def test_a_call_mentioned_in_prose_is_not_made(text: str) -> None:
    parsed = parse_tool_calls(text, tools=TOOLS)
    assert parsed.calls == []
    assert parsed.content == text


@pytest.mark.parametrize(("text", "name"), [
    ('Checking:\n{"name": "get_time", "parameters": {}}\n', "get_time"),
    ("I will look.\n[get_weather(city='Paris')]", "get_weather"),
    ('  {"name": "get_time", "arguments": {}}  \nDone.', "get_time"),
])
def test_the_same_call_on_a_line_of_its_own_is_made(text: str, name: str) -> None:
    assert [c.name for c in parse_tool_calls(text, tools=TOOLS).calls] == [name]


@pytest.mark.parametrize(("value", "schema", "typed"), [
    ("true", {"type": "boolean"}, True),
    ("False", {"type": "boolean"}, False),
    ("42", {"type": "integer"}, 42),
    ("4.0", {"type": "integer"}, 4),
    ("-2.5e1", {"type": "number"}, -25.0),
    ("7", {"type": "number"}, 7),
    ("null", {"type": ["string", "null"]}, None),
    ("None", {"type": "null"}, None),
    ("[1, 2]", {"type": "array"}, [1, 2]),
    ("('a', 'b')", {"type": "array"}, ["a", "b"]),
    ("{'k': True}", {"type": "object"}, {"k": True}),
    ('{"k": 1}', {"anyOf": [{"type": "object"}, {"type": "null"}]}, {"k": 1}),
    ("not a number", {"type": "integer"}, "not a number"),
    ("2024", {"type": "string"}, "2024"),
    (5, {"type": "string"}, "5"),
    (3.0, {"type": "integer"}, 3),
    (["1", "2"], {"type": "array", "items": {"type": "integer"}}, [1, 2]),
    ({"n": "3"}, {"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": 3}),
    ("b", {"enum": ["a", "b"]}, "b"),
    ("1" * 400, {"type": "integer"}, "1" * 400),
])
def test_values_are_typed_by_the_schema(value: Any, schema: dict[str, Any], typed: Any) -> None:
    result = coerce_value(value, schema)
    assert result == typed and type(result) is type(typed)
