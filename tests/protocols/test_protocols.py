"""Each protocol on its own: prompt section, native tools, reading replies, observations."""

from __future__ import annotations

import json

import pytest

from thinkloop.errors import ConfigError
from thinkloop.models.scripted import call, reply
from thinkloop.protocols import (
    Act,
    Answer,
    AutoProtocol,
    JsonProtocol,
    Malformed,
    NativeProtocol,
    TagsProtocol,
    XmlProtocol,
    get_protocol,
)
from thinkloop.protocols.text import TextProtocol, conform
from thinkloop.tools.base import tool
from thinkloop.types import Message, ToolCall, ToolResult


@tool
def lookup_price(symbol: str) -> str:
    """Look up the current USD price of a token.

    Args:
        symbol: The token's ticker, e.g. SOL.
    """
    return symbol


@tool
def convert(amount: float, currency: str, exact: bool = False) -> str:
    """Convert a USD amount into another currency."""
    return currency


@tool
def plot(points: list[list[int]]) -> str:
    """Plot points."""
    return "ok"


SPECS = [lookup_price.spec, convert.spec, plot.spec]
TEXT = [JsonProtocol, TagsProtocol, XmlProtocol]


def fresh(cls: type[TextProtocol]) -> TextProtocol:
    protocol = cls()
    protocol.prompt_section(SPECS)
    return protocol


def test_get_protocol_knows_every_name_and_makes_fresh_instances() -> None:
    kinds = {n: type(get_protocol(n)) for n in ("native", "auto", "json", "tags", "xml")}
    assert kinds == {"native": NativeProtocol, "auto": AutoProtocol, "json": JsonProtocol,
                     "tags": TagsProtocol, "xml": XmlProtocol}
    assert get_protocol("xml") is not get_protocol("xml")
    mine = XmlProtocol()
    assert get_protocol(mine) is mine
    with pytest.raises(ConfigError, match=r"unknown tool-call protocol 'yaml'.*tags"):
        get_protocol("yaml")


@pytest.mark.parametrize("cls", TEXT)
def test_prompt_section_describes_tools_format_and_example(cls: type[TextProtocol]) -> None:
    protocol = cls()
    section = protocol.prompt_section(SPECS)
    for spec in SPECS:
        assert spec.name in section
        assert spec.description.splitlines()[0] in section
        assert json.dumps(spec.parameters, ensure_ascii=False) in section
    example = protocol.render("lookup_price", {"symbol": "..."})
    assert "Example, calling lookup_price:\n" in section
    assert section.rstrip().endswith(example)
    assert protocol.model_tools(SPECS) == ()
    assert cls().prompt_section([]) == ""


def test_each_prompt_names_its_own_format() -> None:
    assert '"completed": true' in JsonProtocol().prompt_section(SPECS)
    tags = TagsProtocol().prompt_section(SPECS)
    assert "<<TOOL:lookup_price:symbol>>" in tags and "<<THINK>>" in tags
    assert "<tool_call>" in XmlProtocol().prompt_section(SPECS)


def test_native_and_auto_hand_tools_to_the_provider() -> None:
    assert NativeProtocol().model_tools(SPECS) == SPECS
    auto = AutoProtocol()
    assert auto.prompt_section(SPECS) == ""
    assert auto.model_tools(SPECS) == SPECS


@pytest.mark.parametrize(("cls", "text"), [
    (JsonProtocol, '{"reasoning": "price first", "tools": [{"name": "lookup_price", '
     '"arguments": {"symbol": "SOL"}}], "completed": false}'),
    (TagsProtocol, "<<THINK>>price first<</THINK>>\n<<TOOL:LOOKUP_PRICE:SOL>>"),
    (XmlProtocol, '<think>price first</think>\n<tool_call>\n{"name": "lookup_price", '
     '"arguments": {"symbol": "SOL"}}\n</tool_call>'),
])
def test_read_acts_on_a_call(cls: type[TextProtocol], text: str) -> None:
    reading = fresh(cls).read(reply(text))
    assert reading == Act((ToolCall("call_1", "lookup_price", {"symbol": "SOL"}),), "",
                          "price first")


@pytest.mark.parametrize(("cls", "text", "answer"), [
    (JsonProtocol, '{"reasoning": "done", "tools": [], "completed": true, "answer": "131 EUR"}',
     "131 EUR"),
    (JsonProtocol, "SOL is 131 EUR.", "SOL is 131 EUR."),
    (TagsProtocol, "<<THINK>>done<</THINK>>\nSOL is 131 EUR.", "SOL is 131 EUR."),
    (XmlProtocol, "<think>done</think>SOL is 131 EUR.", "SOL is 131 EUR."),
])
def test_read_answers_without_calls(cls: type[TextProtocol], text: str, answer: str) -> None:
    reading = fresh(cls).read(reply(text))
    assert isinstance(reading, Answer) and reading.text == answer


@pytest.mark.parametrize(("cls", "text", "problem"), [
    (XmlProtocol, "<tool_call>lookup_price for SOL please</tool_call>",
     "could not read the tool call in <tool_call>"),
    (TagsProtocol, "<<TOOL:lookup_price:SOL", "missing its closing '>>'"),
    (JsonProtocol, '{"reasoning": "r", "tools": [{"name": "lookup_price", "arguments": '
     '{"symbol": SOL}}], "completed": false}', "a JSON tool call could not be decoded"),
    (JsonProtocol, '{"reasoning": "r", "tools": [], "completed": false}',
     '"completed" is false but "tools" is empty'),
    (XmlProtocol, "```tool_call\nlookup_price SOL\n```", "could not read the ```tool_call block"),
])
def test_read_reports_an_unreadable_call_as_malformed(cls: type[TextProtocol], text: str,
                                                      problem: str) -> None:
    protocol = fresh(cls)
    reading = protocol.read(reply(text))
    assert isinstance(reading, Malformed)
    assert problem in reading.problem
    assert reading.problem.endswith(f"Expected format: {protocol.format_hint}")
    assert reading.text == text


def test_observations_report_every_result_in_order_in_one_user_message() -> None:
    a = ToolCall("call_1", "lookup_price", {"symbol": "SOL"})
    b = ToolCall("call_2", "convert", {"amount": 1})
    results = [ToolResult(a, "142.5 USD"), ToolResult(b, "Error: invalid arguments", True)]
    for cls in TEXT:
        assert cls().observations(Message.assistant("..."), results) == [Message.observation(
            "[Tool lookup_price]: 142.5 USD\n[Tool convert] ERROR: Error: invalid arguments")]


def test_conform_fits_parsed_calls_to_the_tool_schema() -> None:
    specs = {s.name: s for s in SPECS}
    assert conform(ToolCall("c", "LOOKUP_PRICE", {"_param": "SOL"}), specs) == ToolCall(
        "c", "lookup_price", {"symbol": "SOL"})
    # XML carries text: values are decoded where the schema wants another type.
    assert conform(ToolCall("c", "convert", {"amount": "2.5", "currency": "EUR",
                                             "exact": "true"}), specs).arguments == {
        "amount": 2.5, "currency": "EUR", "exact": True}
    assert conform(ToolCall("c", "plot", {"points": "[[1, 2]]"}), specs).arguments == {
        "points": [[1, 2]]}
    several = conform(ToolCall("c", "convert", {"_param": "2.5 EUR"}), specs)
    assert several.arguments == {} and several.parse_error is not None
    assert "pass them as a JSON object" in several.parse_error
    unknown = ToolCall("c", "nope", {"_param": "x"})
    assert conform(unknown, specs) is unknown


def test_tool_name_tags_are_limited_to_known_tools() -> None:
    protocol = fresh(XmlProtocol)
    act = protocol.read(reply("<lookup_price><symbol>SOL</symbol></lookup_price>"))
    assert isinstance(act, Act) and act.calls[0].arguments == {"symbol": "SOL"}
    answer = protocol.read(reply("<note><symbol>SOL</symbol></note>"))
    assert answer == Answer("<note><symbol>SOL</symbol></note>", None)


def test_text_protocol_ids_are_unique_across_replies() -> None:
    protocol = fresh(XmlProtocol)
    text = '<tool_call>{"name": "lookup_price", "arguments": {"symbol": "A"}}</tool_call>' * 2
    ids = [c.id for _ in range(3) for c in protocol.read(reply(text)).calls]  # type: ignore[union-attr]
    assert ids == [f"call_{n}" for n in range(1, 7)]


def test_auto_reads_native_calls_natively_and_text_calls_by_parsing() -> None:
    auto = AutoProtocol()
    auto.prompt_section(SPECS)
    native = call("lookup_price", symbol="SOL")
    assert auto.read(reply("", native)) == Act((native,), "", None)
    parsed = auto.read(reply('[TOOL_CALLS][{"name": "lookup_price", "arguments": '
                             '{"symbol": "SOL"}}]'))
    assert isinstance(parsed, Act)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("lookup_price", {"symbol": "SOL"})]
    assert auto.read(reply("Just prose.")) == Answer("Just prose.", None)
    # a plain answer reaches the loop untouched (the output sanitizer cleans it there)
    assert auto.read(reply("  Line one\n\n\n\nLine two  ")) == Answer(
        "  Line one\n\n\n\nLine two  ", None)
    assert auto.read(reply("<think>hm</think>Yes.")) == Answer("Yes.", "hm")
    result = [ToolResult(native, "142.5")]
    assert auto.observations(Message.assistant("", (native,)), result) == [
        Message.tool(native.id, "lookup_price", "142.5")]
    assert auto.observations(Message.assistant("<tool_call>..."), result) == [
        Message.observation("[Tool lookup_price]: 142.5")]
