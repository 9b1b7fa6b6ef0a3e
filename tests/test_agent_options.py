"""Agent's constructor: the common options as keywords, the rest in AgentOptions' sections."""

from __future__ import annotations

import inspect

import pytest

from thinkloop import Agent, AgentOptions, ScriptedModel
from thinkloop.agent import with_options
from thinkloop.core.errors import ConfigError


def test_the_constructor_takes_at_most_twelve_parameters() -> None:
    params = [p for p in inspect.signature(Agent.__init__).parameters if p != "self"]
    assert len(params) <= 12, params


def test_the_sections_reach_the_agent() -> None:
    agent = Agent(ScriptedModel(["ok"]), plugins=False, store="memory",
                  options=AgentOptions(protocol="json", timeout_s=5, tool_timeout_s=2,
                                       output_retries=1, deps={"k": 1}))
    assert (agent.protocol.name, agent.limits.timeout_s, agent.limits.tool_timeout_s,
            agent.limits.output_retries, agent.deps) == ("json", 5, 2, 1, {"k": 1})
    with pytest.raises(ConfigError, match="options= takes AgentOptions"):
        Agent(ScriptedModel([]), options={"protocol": "json"})  # type: ignore[arg-type]


def test_flat_keywords_are_gathered_into_options() -> None:
    kw = with_options({"name": "a", "protocol": "json", "timeout_s": 3})
    assert kw == {"name": "a", "options": AgentOptions(protocol="json", timeout_s=3)}
    merged = with_options({"options": AgentOptions(checkpoints=False), "protocol": "xml"})
    assert merged["options"] == AgentOptions(checkpoints=False, protocol="xml")
    assert with_options({"name": "a"}) == {"name": "a"}


def test_guard_true_is_the_defaults_and_a_wrong_type_is_one_clear_error() -> None:
    on = Agent(ScriptedModel(["ok"]), plugins=False, store="memory", guard=True)
    default = Agent(ScriptedModel(["ok"]), plugins=False, store="memory")
    def names(agent: Agent) -> list[str]:
        return [h.name for hs in agent.hooks.by_stage.values() for h in hs]

    assert names(on) == names(default) != names(Agent(ScriptedModel([]), plugins=False,
                                                       store="memory", guard=False))
    with pytest.raises(ConfigError, match="guard= takes GuardSettings, True or False, got str"):
        Agent(ScriptedModel([]), store="memory", guard="on")  # type: ignore[arg-type]
