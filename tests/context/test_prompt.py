"""The system prompt builder: snapshots of whole prompts, section order, modes, edits."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import BaseModel

from thinkloop import Agent, ScriptedModel, tool
from thinkloop.agent import AgentOptions
from thinkloop.context.bootstrap import FIRST_RUN, Bootstrap
from thinkloop.context.prompt import PromptBuilder, PromptOptions, prompt_context
from thinkloop.context.sections import (
    DEFAULT_SECTIONS,
    INLINE_MAX,
    ContextFile,
    Delegate,
    PromptContext,
    Skill,
)
from thinkloop.errors import ConfigError
from thinkloop.protocols import NativeProtocol
from thinkloop.types import ToolSpec

SNAPSHOTS = Path(__file__).parent / "snapshots"
NOW = datetime(2026, 3, 14, 15, 9, 26, tzinfo=UTC)


def clock() -> datetime:
    return NOW


def check_snapshot(name: str, text: str) -> None:
    """Compare with snapshots/<name>.txt; THINKLOOP_UPDATE_SNAPSHOTS=1 rewrites it."""
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("THINKLOOP_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    assert path.exists(), f"no snapshot {path.name}; run with THINKLOOP_UPDATE_SNAPSHOTS=1"
    assert text + "\n" == path.read_text(encoding="utf-8")


class TagProtocol(NativeProtocol):
    """A text protocol's prompt section, so the tooling section has something to show."""

    name = "tags"

    def prompt_section(self, tools: Sequence[ToolSpec]) -> str:
        names = ", ".join(t.name for t in tools)
        return f"Call a tool by writing <<TOOL:name:argument>>. Tools: {names}."


@tool(guidance="Search before answering a question about current events.")
def search(query: str) -> str:
    """Search the web."""
    return query


@tool(external=True)
def fetch(url: str) -> str:
    """Fetch a page as markdown."""
    return url


class Verdict(BaseModel):
    answer: str
    confidence: float


def plain_agent() -> Agent:
    return Agent(ScriptedModel([]), plugins=False,
                 options=AgentOptions(prompt=PromptBuilder(
        options=PromptOptions(clock=clock))))


def full_agent(root: Path) -> Agent:
    (root / "MISSION.md").write_text("# Global mission\nServe the household.\n")
    agent_dir = root / "agents" / "concierge"
    agent_dir.mkdir(parents=True)
    (agent_dir / "MISSION.md").write_text("# Concierge mission\nBook things, never pay.\n")
    workspace = root / "ws"
    (workspace / "notes").mkdir(parents=True)
    (workspace / "todo.md").write_text("- call plumber\n")
    (workspace / ".hidden").write_text("x")
    options = PromptOptions(
        bootstrap=Bootstrap(root),
        workspace=workspace,
        sandbox="docker",
        channel="telegram",
        extra_context="The household has two cats.",
        context_files=(ContextFile("AGENTS.md", "Prefer morning slots.\n</context_file>"),),
        skills=(Skill("book_table", "Book a restaurant table.", "1. search\n2. call"),),
        delegates=(Delegate("travel", "plans trips"), Delegate("finance", "pays bills")),
        team=(Delegate("billing", "invoices and refunds"),),
        silent_replies=True,
        heartbeat="every 30 minutes",
        subagents=True,
        user_names={"u-42": "Ada"},
        clock=clock,
    )
    return Agent(ScriptedModel([], name="openai:gpt-4o-mini"), tools=[search, fetch],
                 instructions="You are Concierge.", name="concierge", plugins=False,
                 options=AgentOptions(protocol=TagProtocol(), output_type=Verdict,
                                      prompt=PromptBuilder(options=options)))


def normalised(text: str, root: Path) -> str:
    return text.replace(str(root), "<root>")


@pytest.mark.parametrize("mode", ["full", "minimal"])
def test_snapshot_plain_agent(mode: str) -> None:
    check_snapshot(f"plain_{mode}", plain_agent().system_prompt(mode))  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["full", "minimal"])
def test_snapshot_full_agent(mode: str, tmp_path: Path) -> None:
    agent = full_agent(tmp_path)
    text = agent.system_prompt(mode, user_id="u-42", session="s-1", seed=True)  # type: ignore[arg-type]
    check_snapshot(f"concierge_{mode}", normalised(text, tmp_path))


def test_snapshot_custom_sections() -> None:
    agent = plain_agent()
    agent.prompt.remove("runtime", "current_time")
    agent.prompt.add("house_rules", lambda ctx: f"House rules for {ctx.agent_id}: be brief.",
                     after="identity")
    agent.prompt.replace("identity", lambda ctx: "You are a pirate.")
    agent.prompt.add("sign_off", lambda ctx: "Sign off with 'Arr'.", modes=frozenset({"full"}))
    check_snapshot("custom_full", agent.system_prompt("full"))
    assert agent.system_prompt("minimal") == (
        "You are a pirate.\n\nHouse rules for thinkloop: be brief.")


def test_sections_in_the_fixed_order_with_all_inputs(tmp_path: Path) -> None:
    agent = full_agent(tmp_path)
    ctx = prompt_context(agent, user_id="u-42", session_id="s-1")
    names = [r.name for r in agent.prompt.render(ctx)]
    assert names == [s.name for s in DEFAULT_SECTIONS]
    minimal = [r.name for r in agent.prompt.render(
        prompt_context(agent, "minimal", user_id="u-42"))]
    assert minimal == ["identity", "tooling", "output_format", "safety",
                       "workspace", "sandbox",
                       "current_time", "extra_context", "project_context", "runtime"]


def test_many_skills_and_delegates_switch_to_search() -> None:
    many = tuple(Skill(f"s{i}", "d") for i in range(INLINE_MAX + 1))
    team = tuple(Delegate(f"d{i}", "x") for i in range(INLINE_MAX + 1))
    search = ToolSpec("search_tools", "Search skills and workflows.", {"type": "object"})
    text = PromptBuilder().build(PromptContext("a", skills=many, delegates=team,
                                               tools=(search,)))
    assert "search them with the search_tools tool" in text and "## s0" not in text
    assert "with the search_tools tool before delegating" in text and "- d0:" not in text


def test_the_prompt_names_only_tools_the_agent_has() -> None:
    many = tuple(Skill(f"s{i}", "d") for i in range(INLINE_MAX + 1))
    team = tuple(Delegate(f"d{i}", "x") for i in range(INLINE_MAX + 1))
    text = PromptBuilder().build(PromptContext("a", skills=many, delegates=team))
    assert "search_tools" not in text and "skill_search" not in text
    assert "- s0: d" in text and "- d0: x" in text


def test_runtime_prompt_is_what_the_model_receives(tmp_path: Path) -> None:
    agent = full_agent(tmp_path)
    model = agent.model
    assert isinstance(model, ScriptedModel)
    model.script += ['{"answer": "x", "confidence": 1}'] * 2
    preview = agent.system_prompt(user_id="u-42", session="s-1")  # writes nothing
    assert not (tmp_path / "agents" / "concierge" / "users").exists()
    result = agent.run_sync("Book it", user_id="u-42", session="s-1")
    assert result.output == Verdict(answer="x", confidence=1)
    assert model.calls[0].messages[0].content == preview
    assert "first conversation" in preview
    agent.run_sync("Again", user_id="u-42", session="s-1")
    second = model.calls[1].messages[0].content
    assert second == preview.replace(FIRST_RUN + "\n\n", "")


def test_edit_errors_are_clear() -> None:
    builder = PromptBuilder()
    with pytest.raises(ConfigError, match="no prompt section 'nope'"):
        builder.remove("nope")
    with pytest.raises(ConfigError, match="exists; use replace"):
        builder.add("identity", lambda ctx: "x")
    with pytest.raises(ConfigError, match="not both"):
        builder.add("x", lambda ctx: "x", before="identity", after="tooling")


def test_builders_are_per_agent() -> None:
    a, b = plain_agent(), plain_agent()
    a.prompt.remove("runtime")
    assert "Runtime:" in b.system_prompt() and "Runtime:" not in a.system_prompt()
