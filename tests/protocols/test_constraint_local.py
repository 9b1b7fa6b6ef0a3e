"""Text-protocol constraints against llama.cpp itself: its grammar engine admits every reply
the protocols render and nothing malformed, and the local model, decoding under them, gets
its tool calls parsed and run in every text format."""

import sys
from contextlib import aclosing
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from llama_cpp.llama_grammar import json_schema_to_gbnf

from thinkloop.agent import Agent, AgentOptions
from thinkloop.models.base import ModelSettings
from thinkloop.models.local import _load
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.openai_wire import WireQuirks
from thinkloop.protocols import (
    JsonProtocol,
    Malformed,
    TagsProtocol,
    XmlProtocol,
    get_protocol,
    prompts,
)
from thinkloop.protocols.constraint import xml_grammar
from thinkloop.protocols.text import TextProtocol
from thinkloop.tools.builtin.calculator import calculator
from thinkloop.types import Message, ModelResponse, ToolSpec, Usage

from .grammar_check import admits

pytestmark = pytest.mark.slow

CALC = calculator.spec
SEARCH = ToolSpec("search", "Search the web.", {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["query", "limit"],
})
NOW = ToolSpec("now", "The current time.", {"type": "object", "properties": {}})
TOOLS = [CALC, SEARCH, NOW]
ARGS = {"calculator": {"expression": "12*7"}, "search": {"query": "llama <3", "limit": 3},
        "now": {}}


@pytest.fixture(scope="module")
def llm(smollm2_path: Path) -> Any:
    # The same process-wide weights the local provider uses (loaded once).
    return _load(smollm2_path, 4096).llm


def _grammar(protocol: TextProtocol, *, required: bool = False) -> str:
    constraint = protocol.reply_constraint(TOOLS, required=required)
    assert constraint is not None
    if constraint.kind == "json_schema":
        return str(json_schema_to_gbnf(constraint.text))
    return constraint.text


def _reads_back(protocol: TextProtocol, reply: str) -> list[tuple[str, dict[str, Any]]]:
    reading = protocol.read(ModelResponse(Message.assistant(reply), Usage(), "stop", "m"))
    assert not isinstance(reading, Malformed), reading
    return [(c.name, c.arguments) for c in getattr(reading, "calls", ())]


def _calls(protocol: TextProtocol) -> list[str]:
    render = protocol.render
    replies = [render(name, args) for name, args in ARGS.items()]
    if isinstance(protocol, JsonProtocol):  # several calls share one decision object
        replies.append(prompts.dumps({"reasoning": "Both.", "tools": [
            {"name": "calculator", "arguments": {"expression": "1+1"}},
            {"name": "now", "arguments": {}}], "completed": False}))
    else:
        replies.append(render("calculator", {"expression": "1+1"}) + "\n" + render("now", {}))
    return replies


@pytest.mark.parametrize("protocol", [JsonProtocol(), XmlProtocol(), TagsProtocol()],
                         ids=["json", "xml", "tags"])
def test_grammar_admits_every_rendered_call_and_it_reads_back(
    llm: Any, protocol: TextProtocol
) -> None:
    protocol.prompt_section(TOOLS)
    for required in (False, True):
        grammar = _grammar(protocol, required=required)
        for reply in _calls(protocol):
            assert admits(llm, grammar, reply), reply
            assert _reads_back(protocol, reply)
    assert _reads_back(protocol, protocol.render("search", ARGS["search"])) == [
        ("search", ARGS["search"])]


@pytest.mark.parametrize(("protocol", "replies"), [
    (XmlProtocol(), [
        "The answer is 84.",
        "Let me check.\n" + XmlProtocol().render("calculator", {"expression": "6*7"}),
        "<think>Multiply.</think>\n" + XmlProtocol().render("now", {}),
    ]),
    (TagsProtocol(), [
        "The answer is 84.",
        "<<TOOL:calculator:12*7>>",
        "<<THINK>>Multiply.<</THINK>>\n<<TOOL:calculator:12*7>>",
        "<<TOOL:now>>",
    ]),
], ids=["xml", "tags"])
def test_grammar_admits_prose_thoughts_and_plain_answers(
    llm: Any, protocol: TextProtocol, replies: list[str]
) -> None:
    protocol.prompt_section(TOOLS)
    grammar = _grammar(protocol)
    for reply in replies:
        assert admits(llm, grammar, reply), reply
    # A required call rules out the answer without one.
    assert not admits(llm, _grammar(protocol, required=True), "The answer is 84.")


@pytest.mark.parametrize(("protocol", "replies"), [
    (JsonProtocol(), [
        '{"reasoning": "r", "tools": [{"name": "weather", "arguments": {}}], "completed": false}',
        '{"reasoning": "r", "tools": [{"name": "calculator", "arguments": {"expression": 1}}], '
        '"completed": false}',
        '{"reasoning": "r", "tools": [], "completed": true}',
        '{"reasoning": "r", "tools": [{"name": "now", "arguments": {}}], "completed": false',
        "The answer is 84.",
    ]),
    (XmlProtocol(), [
        '<tool_call>{"name": "weather", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "search", "arguments": {"query": "q", "limit": "3"}}</tool_call>',
        '<tool_call>{"name": "calculator"}</tool_call>',
        '<tool_call>{"name": "calculator", "arguments": {"expression": "1"}}',
        "Use <b>bold</b> text.",
        "<tool_call>{}</tool_call>\nThe answer.",
    ]),
    (TagsProtocol(), [
        "<<TOOL:weather:Paris>>",
        "<<TOOL:search:llamas>>",  # two arguments: a plain parameter cannot fill them
        '<<TOOL:calculator:{"expr": "1"}>>',
        "<<TOOL:calculator:1+1",
        "<<TOOL:calculator:1+1>> and then prose",
    ]),
], ids=["json", "xml", "tags"])
def test_grammar_rejects_malformed_replies(
    llm: Any, protocol: TextProtocol, replies: list[str]
) -> None:
    grammar = _grammar(protocol)
    for reply in replies:
        assert not admits(llm, grammar, reply), reply


def test_without_llama_cpp_arguments_are_any_json_object(
    llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The grammar is built where llama.cpp may be absent (a remote server that takes GBNF).
    monkeypatch.setitem(sys.modules, "llama_cpp.llama_grammar", None)
    grammar = xml_grammar(TOOLS)
    assert "json-object" in grammar and "args0" not in grammar
    assert admits(llm, grammar, XmlProtocol().render("search", ARGS["search"]))
    assert admits(llm, grammar, XmlProtocol().render("calculator", {"x": [1, {"y": None}]}))
    assert not admits(llm, grammar, XmlProtocol().render("weather", {}))
    assert not admits(llm, grammar, '<tool_call>{"name": "now", "arguments": [1]}</tool_call>')


@pytest.mark.parametrize("protocol", ["json", "xml", "tags"])
async def test_local_model_calls_tools_in_every_text_protocol(
    smollm2_path: Path, protocol: str
) -> None:
    # Greedy decoding, and a call required on every step: the run ends at the step cap with
    # an unconstrained answer, whatever the 135M model makes of the arithmetic.
    agent = Agent(model="local", tools=[calculator], guard=False, max_steps=2,
                  options=AgentOptions(
                      protocol=protocol, settings=ModelSettings(temperature=0, max_tokens=192,
                                                      tool_choice="required")))
    events = [e async for e in agent.stream("What is 12 * 7? Use the calculator tool.")]
    assert events[-1].type == "run.completed", events[-1].payload
    texts = [e.payload["text"] for e in events if e.type == "llm.response"]
    calls = [e.payload for e in events if e.type == "tool.call"]
    results = [e.payload for e in events if e.type == "tool.result"]
    assert len(texts) == 3  # two constrained steps, then the answer at the cap
    reader = get_protocol(protocol)
    assert isinstance(reader, TextProtocol)
    reader.prompt_section([CALC])
    for text in texts[:2]:
        # Every constrained reply parses to calls (never Malformed, never an answer).
        parsed = _reads_back(reader, text)
        assert parsed and all(name == "calculator" for name, _ in parsed), text
    assert calls and [r["id"] for r in results] == [c["id"] for c in calls]
    for call in calls:
        assert call["name"] == "calculator"
        jsonschema.validate(call["arguments"], CALC.parameters)


async def test_llama_cpp_server_decodes_under_the_grammar_it_is_sent(llama_server: str) -> None:
    # llama-cpp-python's server takes llama.cpp's "grammar" field: with the quirk on, the
    # xml protocol's grammar reaches it and every reply carries a well-formed call.
    model = OpenAICompatModel("smollm2", base_url=llama_server,
                              quirks=WireQuirks(tool_call_content="empty", grammar=True))
    async with aclosing(model):
        agent = Agent(model=model, tools=[calculator], guard=False, max_steps=1,
                      options=AgentOptions(
                          protocol="xml", settings=ModelSettings(temperature=0, max_tokens=160,
                                                          tool_choice="required")))
        events = [e async for e in agent.stream("What is 12 * 7? Use the calculator tool.")]
    assert events[-1].type == "run.completed", events[-1].payload
    calls = [e.payload for e in events if e.type == "tool.call"]
    assert calls and all(c["name"] == "calculator" for c in calls)
    for call in calls:
        jsonschema.validate(call["arguments"], CALC.parameters)
