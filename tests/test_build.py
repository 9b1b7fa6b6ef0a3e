"""The one recipe (thinkloop.build): every shell, sub-agents and the memory flush build their
agents from one AgentSpec over the Settings; no shell holds a recipe of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from thinkloop.build import AgentSpec, build_agent, build_child
from thinkloop.errors import ConfigError
from thinkloop.guard.approval import ApprovalRequest, AutoApprove, Decision
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.settings import load_settings
from thinkloop.store.inprocess import MemoryStore
from thinkloop.tools.base import tool

SRC = Path(__file__).resolve().parents[1] / "src" / "thinkloop"
SHELLS = ("cli", "server", "workers", "channels", "tui")


@tool
def shout(text: str) -> str:
    """Shout.

    Args:
        text: what to shout
    """
    return text.upper()


def _settings(tmp_path: Path, **env: str):  # type: ignore[no-untyped-def]
    return load_settings(env={"THINKLOOP_HOME": str(tmp_path), **env}, cwd=tmp_path)


def test_one_spec_reads_as_a_gateway_definition_cli_flags_and_a_sub_agent() -> None:
    gateway = AgentSpec.model_validate({"model": "ollama:m", "tools": ["calculator"],
                                        "approve": "auto", "max_steps": 3})
    assert (gateway.tool_names(), gateway.approve, gateway.name) == ("calculator", "auto", None)
    child = AgentSpec("shouter", "shouts text", tools=[shout], max_steps=2)
    assert (child.name, child.description, child.tool_names()) == ("shouter", "shouts text", "")
    assert AgentSpec(tools="none").tool_names() == "none"
    assert AgentSpec().tool_names() == "default"
    with pytest.raises(ValueError, match="max_steps"):
        AgentSpec.model_validate({"max_steps": 0})
    with pytest.raises(ValueError, match="extra"):
        AgentSpec.model_validate({"temperature": 2})


def test_the_recipe_applies_the_spec_over_the_settings(tmp_path: Path) -> None:
    s = _settings(tmp_path, THINKLOOP_PROTOCOL="json", THINKLOOP_MAX_STEPS="9")
    store = MemoryStore()
    agent = build_agent(AgentSpec(name="helper", model="ollama:m", tools="calculator",
                                  max_steps=4, approve="pause", ask_before=["calc*"]),
                        s, store=store, extra_tools=[shout])
    assert (agent.name, agent.model.name, agent.limits.max_steps, agent.protocol.name) == (
        "helper", "ollama:m", 4, "json")
    assert {"calculator", "shout"} <= set(agent.tools)
    assert "remember" in agent.tools and agent.store is store  # a store: memory, its tools
    bare = build_agent(AgentSpec(tools="none"), s, store=store)
    # "none": memory without its tools (read_more is the engine's pager, offered only once a
    # result was cut)
    assert bare.memory is not None and set(bare.tools) <= {"read_more"}
    assert agent.config.origin("max_steps") == "argument"


class Recording:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def decide(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request.tool)
        return Decision(True)


@tool(needs_approval=True)
def launch(target: str) -> str:
    """Launch something.

    Args:
        target: what to launch
    """
    return f"launched {target}"


async def _approved(spec: AgentSpec, tmp_path: Path, approver: Recording) -> str:
    model = ScriptedModel([reply("", call("launch", target="x")), "ok"])
    agent = build_agent(spec, _settings(tmp_path), approver=approver, extra_tools=[launch],
                        model=model)
    result = await agent.run("go")
    await agent.aclose()
    return result.steps[0].results[0].content


async def test_approvals_are_the_shells_unless_the_spec_says_otherwise(tmp_path: Path) -> None:
    person = Recording()
    assert await _approved(AgentSpec(tools="none"), tmp_path, person) == "launched x"
    assert person.asked == ["launch"]
    paused = await _approved(AgentSpec(tools="none", approve="pause"), tmp_path, person)
    assert paused.startswith("Not approved: deferred")  # no session: it cannot pause
    denied = await _approved(AgentSpec(tools="none", approve="deny"), tmp_path, person)
    assert "launched" not in denied and person.asked == ["launch"]
    with pytest.raises(ConfigError, match="must be one of"):
        build_agent(AgentSpec(tools="none", approve="maybe"), _settings(tmp_path))


async def test_a_child_outside_a_run_has_its_spec_and_the_child_defaults() -> None:
    model = ScriptedModel(["done"])
    child = build_child(AgentSpec("shouter", tools=[shout]), None, model)
    assert (child.name, child.limits.max_steps, set(child.tools) >= {"shout"}) == (
        "shouter", 8, True)
    assert child.instructions.startswith("You are a focused sub-agent")
    result = await child.run("go")
    assert result.text == "done"


def test_the_cli_and_the_gateway_build_the_same_agent(tmp_path: Path) -> None:
    from thinkloop.channels import ConsoleChannel
    from thinkloop.cli.build import AgentOptions
    from thinkloop.cli.build import build_agent as cli_build
    from thinkloop.server.agents import Wiring
    from thinkloop.server.agents import build_agent as gateway_build

    s = _settings(tmp_path)
    spec = AgentSpec(model="ollama:m", tools="default", max_steps=5)
    cli = cli_build(AgentOptions(model="ollama:m", tools="default", max_steps=5, approve="auto"),
                    s, store=MemoryStore())
    wiring = Wiring(s, MemoryStore(), AutoApprove(), ConsoleChannel())
    gw = gateway_build("thinkloop", spec, wiring)
    assert sorted(cli.tools) == sorted(gw.tools)
    assert (cli.limits, cli.protocol.name, cli.system_prompt()) == (
        gw.limits, gw.protocol.name, gw.system_prompt())


def test_no_shell_builds_an_agent_itself() -> None:
    """Shells call thinkloop.build; an ``Agent(...)`` call there would be a recipe of its own."""
    found = []
    for shell in SHELLS:
        for path in sorted((SRC / shell).rglob("*.py")) if (SRC / shell).is_dir() else []:
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                        and node.func.id == "Agent":
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert found == []
