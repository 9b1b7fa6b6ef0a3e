"""Reply constraints of the text protocols: the JSON schema, and how providers are sent them."""

from collections.abc import Iterator
from contextlib import aclosing
from typing import Any

import jsonschema
import orjson
import pytest

from thinkloop.agent import Agent, AgentOptions
from thinkloop.models.base import ModelSettings, ReplyConstraint
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.openai_wire import WireQuirks
from thinkloop.protocols import JsonProtocol, get_protocol, prompts
from thinkloop.protocols.constraint import json_decision_schema
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion
from thinkloop.tools.builtin.calculator import calculator
from thinkloop.types import ToolSpec

CALC = calculator.spec
SEARCH = ToolSpec("search", "Search the web.", {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["query", "limit"],
})
NOW = ToolSpec("now", "The current time.", {"type": "object", "properties": {}})
TOOLS = [CALC, SEARCH, NOW]
ARGS = {"calculator": {"expression": "12*7"}, "search": {"query": "llama", "limit": 3},
        "now": {}}
DONE = {"reasoning": "I have everything I need.", "tools": [], "completed": True,
        "answer": "84"}


def _valid(schema: dict[str, Any], reply: str) -> bool:
    try:
        jsonschema.validate(orjson.loads(reply), schema)
    except jsonschema.ValidationError:
        return False
    return True


@pytest.mark.parametrize("name", ["calculator", "search", "now"])
def test_json_schema_admits_every_rendered_call(name: str) -> None:
    protocol = JsonProtocol()
    schema = json_decision_schema(TOOLS)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert _valid(schema, protocol.render(name, ARGS[name]))
    example = prompts.example_arguments(next(t for t in TOOLS if t.name == name))
    assert _valid(schema, protocol.render(name, example))
    assert _valid(json_decision_schema(TOOLS, required=True), protocol.render(name, ARGS[name]))


def test_json_schema_admits_the_prompted_final_answer() -> None:
    section = JsonProtocol().prompt_section(TOOLS)
    done = next(line for line in section.splitlines() if '"completed": true' in line)
    assert _valid(json_decision_schema(TOOLS), done)
    assert _valid(json_decision_schema(TOOLS), prompts.dumps(DONE))
    assert not _valid(json_decision_schema(TOOLS, required=True), prompts.dumps(DONE))


def _act(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"reasoning": "r", "tools": list(calls), "completed": False}


@pytest.mark.parametrize("reply", [
    _act({"name": "weather", "arguments": {"city": "Paris"}}),  # unknown tool
    _act({"name": "calculator", "arguments": {"expression": 12}}),  # wrong type
    _act({"name": "calculator", "arguments": {"expression": "1", "x": 1}}),  # extra argument
    _act({"name": "calculator", "arguments": {}}),  # missing argument
    _act({"name": "search", "arguments": {"query": "q", "limit": "3"}}),  # wrong type
    _act({"name": "calculator"}),  # no arguments at all
    _act(),  # acting without calls
    _act(*[{"name": "now", "arguments": {}}] * 5),  # more calls than one reply may carry
    {"reasoning": "r", "tools": [], "completed": False},
    {"reasoning": "r", "tools": [], "completed": True},  # completed without an answer
    {"reasoning": "r", "tools": [{"name": "now", "arguments": {}}], "completed": True,
     "answer": "x"},  # completed while calling
    {"tools": [], "completed": True, "answer": "x"},  # no reasoning
    {"reasoning": "x" * 257, "tools": [], "completed": True, "answer": "x"},  # rambling
    {"answer": "84"},  # the native decision shape is not this protocol's
])
def test_json_schema_rejects_malformed_decisions(reply: dict[str, Any]) -> None:
    assert not _valid(json_decision_schema(TOOLS), prompts.dumps(reply))


def test_tool_defs_are_hoisted_and_references_still_resolve() -> None:
    point = ToolSpec("plot", "Plot a point.", {
        "type": "object",
        "properties": {"at": {"$ref": "#/$defs/Point"}},
        "required": ["at"],
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}},
                            "required": ["x"]}},
    })
    schema = json_decision_schema([point])
    assert set(schema["$defs"]) == {"plot__Point"}
    assert _valid(schema, JsonProtocol().render("plot", {"at": {"x": 1.5}}))
    assert not _valid(schema, JsonProtocol().render("plot", {"at": {"x": "far"}}))


def test_only_text_protocols_constrain_replies() -> None:
    assert get_protocol("native").reply_constraint(TOOLS) is None
    assert get_protocol("auto").reply_constraint(TOOLS) is None
    for name in ("json", "tags", "xml"):
        protocol = get_protocol(name)
        assert protocol.reply_constraint([]) is None  # no tools: the reply is free text
        first = protocol.reply_constraint(TOOLS)
        assert first is not None
        assert first.kind == ("json_schema" if name == "json" else "gbnf")
        # Built once per tool list, not per step.
        assert protocol.reply_constraint(TOOLS) is first
        assert protocol.reply_constraint(TOOLS, required=True) != first
    schema = get_protocol("json").reply_constraint(TOOLS)
    assert schema is not None and orjson.loads(schema.text) == json_decision_schema(TOOLS)


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


async def test_json_protocol_sends_its_schema_as_response_format(server: OpenAIServer) -> None:
    server.clear()
    call = JsonProtocol().render("calculator", {"expression": "12*7"})
    server.enqueue(Reply(body=completion(call)), Reply(body=completion(prompts.dumps(DONE))))
    model = OpenAICompatModel("m", base_url=server.base_url)
    async with aclosing(model):
        agent = Agent(model=model, tools=[calculator], guard=False,
                      options=AgentOptions(protocol="json", settings=ModelSettings(timeout_s=5)))
        result = await agent.run("What is 12*7?")
    assert result.output == "84"
    assert [r.content for s in result.steps for r in s.results] == ["84"]
    expected = {"type": "json_schema", "json_schema": {
        "name": "decision", "schema": json_decision_schema([CALC])}}
    assert [r["response_format"] for r in server.requests] == [expected, expected]
    for request in server.requests:
        assert set(request) == {"model", "messages", "response_format"}  # no native tools
        assert "grammar" not in request


@pytest.mark.parametrize("takes_grammar", [False, True])
async def test_grammar_goes_only_to_servers_that_take_it(
    server: OpenAIServer, takes_grammar: bool
) -> None:
    server.clear()
    server.enqueue(Reply(body=completion("84")))
    model = OpenAICompatModel("m", base_url=server.base_url,
                              quirks=WireQuirks(grammar=takes_grammar))
    async with aclosing(model):
        agent = Agent(model=model, tools=[calculator], guard=False,
                      options=AgentOptions(protocol="xml", settings=ModelSettings(timeout_s=5)))
        await agent.run("What is 12*7?")
    (request,) = server.requests
    grammar = get_protocol("xml").reply_constraint([CALC])
    assert grammar is not None
    assert request.get("grammar") == (grammar.text if takes_grammar else None)
    assert "response_format" not in request


async def test_no_constraint_leaves_the_request_unchanged(server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(Reply(body=completion("hi")))
    model = OpenAICompatModel("m", base_url=server.base_url, quirks=WireQuirks(grammar=True))
    async with aclosing(model):
        await model.complete([], [], ModelSettings(timeout_s=5, constraint=None))
        assert ModelSettings().constraint is None
    (request,) = server.requests
    assert set(request) == {"model", "messages"}


def test_constraint_is_plain_hashable_data() -> None:
    c = ReplyConstraint("gbnf", 'root ::= "x"')
    assert c == ReplyConstraint("gbnf", 'root ::= "x"') and hash(c) == hash(ReplyConstraint(
        "gbnf", 'root ::= "x"'))
    assert c.name == "reply"
