"""Open registries: a package adds a tool-call protocol and a model provider by entry point,
and an agent runs with both by name; a registry made in code takes a factory too."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.distributions import install

from thinkloop import Agent
from thinkloop.agent import AgentOptions
from thinkloop.errors import ConfigError, UnknownModelError
from thinkloop.models.registry import default_registry
from thinkloop.models.scripted import ScriptedModel
from thinkloop.protocols import JsonProtocol, ProtocolRegistry, get_protocol
from thinkloop.tools.base import tool
from thinkloop.types import OBSERVATION

PLUGIN = '''
import json

from thinkloop.models.scripted import ScriptedModel
from thinkloop.protocols.base import Act, Answer
from thinkloop.types import Message, ToolCall

MODELS = {}


def provider(name, env):
    """'line:<name>': adds 2 and 3 with one call, then answers."""
    MODELS[name] = ScriptedModel(['CALL add {"a": 2, "b": 3}', "The sum is 5."], name=name)
    return MODELS[name]


class LineProtocol:
    """One call per reply, written as: CALL <tool> <JSON arguments>."""

    name = "line"

    def prompt_section(self, tools):
        return "Call a tool with one line: CALL <tool> <JSON arguments>."

    def model_tools(self, tools):
        return ()

    def reply_constraint(self, tools, *, required=False):
        return None

    def read(self, response):
        text = response.message.content
        if text.startswith("CALL "):
            name, _, args = text[5:].partition(" ")
            return Act((ToolCall("line-1", name, json.loads(args)),), text)
        return Answer(text)

    def observations(self, assistant, results):
        return [Message.observation("; ".join(f"RESULT {r.call.name} = {r.content}"
                                              for r in results))]


def broken():
    raise RuntimeError("no line today")
'''


@pytest.fixture
def lineplug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An installed distribution (as pip leaves it) with one protocol and one provider."""
    site = install(tmp_path / "site", "lineplug", PLUGIN,
                   "[thinkloop.protocols]\nline = lineplug:LineProtocol\nbroken = lineplug:broken\n"
                   "[thinkloop.providers]\nline = lineplug:provider\n")
    monkeypatch.syspath_prepend(str(site))
    yield importlib.import_module("lineplug")
    sys.modules.pop("lineplug", None)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_an_installed_protocol_and_provider_run_an_agent(lineplug: Any) -> None:
    async with Agent("line:adder", tools=[add], options=AgentOptions(protocol="line")) as agent:
        result = await agent.run("What is 2 + 3?")
    assert (result.status, result.output) == ("completed", "The sum is 5.")
    assert result.steps[0].results[0].content == "5"
    model = lineplug.MODELS["adder"]
    first, second = (c.messages for c in model.calls)
    assert "CALL <tool> <JSON arguments>" in first[0].content  # the protocol's prompt section
    assert [c.tools for c in model.calls] == [(), ()]  # no native tools: the protocol's choice
    assert [m.content for m in second if m.name == OBSERVATION] == ["RESULT add = 5"]


def test_an_installed_protocol_that_cannot_load_is_a_config_error_naming_it(
        lineplug: Any) -> None:
    with pytest.raises(ConfigError, match=r"protocol 'broken' \(lineplug:broken, .*no line today"):
        get_protocol("broken")
    assert isinstance(get_protocol("line"), lineplug.LineProtocol)  # the other still loads


def test_unknown_names_list_the_installed_ones(lineplug: Any) -> None:
    with pytest.raises(ConfigError, match="unknown tool-call protocol 'morse'; known: native, "
                                          "auto, json, tags, xml, broken, line"):
        get_protocol("morse")
    with pytest.raises(UnknownModelError, match=r"'morse'.*known: .*line"):
        default_registry().resolve("morse:x")


def test_a_registry_made_in_code_takes_a_factory_and_keeps_the_builtins() -> None:
    made: list[str] = []

    def loud() -> JsonProtocol:
        made.append("loud")
        return JsonProtocol()

    registry = ProtocolRegistry()
    registry.register_protocol("loud", loud)
    assert isinstance(get_protocol("loud", registry), JsonProtocol)
    assert made == ["loud"]
    assert get_protocol("xml", registry).name == "xml"
    with pytest.raises(ConfigError, match="unknown tool-call protocol 'loud'"):
        get_protocol("loud")  # registered in that registry only: nothing global


def test_a_provider_registered_in_code_resolves_its_prefix() -> None:
    registry = default_registry()
    registry.register("mine", lambda name, env: ScriptedModel([], name=f"mine/{name}"))
    model = registry.resolve("mine:m1", {})
    assert isinstance(model, ScriptedModel) and model.name == "mine/m1"
