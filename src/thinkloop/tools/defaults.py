"""Which built-in tools an agent gets, chosen by name: the CLI's ``--tools`` option."""

from __future__ import annotations

from typing import Any

from thinkloop.errors import ConfigError
from thinkloop.tools.base import Tool


def all_builtin_tools() -> list[tuple[Tool, str]]:
    """Every built-in tool thinkloop ships, with what it needs before an agent gets it.

    The default set needs nothing; the others are built here against placeholder settings
    only to show their schemas (``thinkloop tools``): nothing is connected or loaded.
    """
    from pathlib import Path

    from thinkloop.memory.recall import MiniLMEmbedder
    from thinkloop.store.sqlite import SQLiteStore
    from thinkloop.tools.builtin import ToolSettings, builtin_tools
    from thinkloop.tools.builtin.memory import memory_tools
    from thinkloop.tools.builtin.toolsearch import ToolIndex, search_tools_tool
    from thinkloop.tools.builtin.websearch import SearxNG, web_search_tool
    from thinkloop.tools.builtin.workflows import Registry, run_workflow_tool
    from thinkloop.tools.workspace import Workspace

    # Only schemas are shown: no sandbox is needed (nor checked) to list them.
    settings = ToolSettings(sandbox="none")  # defaults only: nothing here is run
    out = [(t, "") for t in builtin_tools(settings)]
    out.append((web_search_tool(SearxNG("http://search.invalid")),
                "THINKLOOP_TOOLS_SEARCH_BACKEND (searxng, brave or tavily)"))
    registry = Registry(Path("workflows.yaml"), (), "")
    out.append((search_tools_tool(ToolIndex([], MiniLMEmbedder())),
                "THINKLOOP_TOOLS_WORKFLOWS or THINKLOOP_TOOLS_SKILLS"))
    out.append((run_workflow_tool(registry, Workspace(settings.workspace), settings),
                "THINKLOOP_TOOLS_WORKFLOWS (a YAML registry)"))
    out += [(t, "a durable store (Agent(memory=True) or thinkloop run --session)")
            for t in memory_tools(SQLiteStore(Path("unused.db")))]
    return out


def pick_tools(available: list[Tool], names: str) -> list[Tool]:
    """``"default"`` (all of ``available``), ``"none"``, or a comma-separated list of names."""
    names = names.strip()
    if names == "default":
        return available
    if names in ("", "none"):
        return []
    by_name = {t.name: t for t in available}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise ConfigError(
            f"unknown tool(s) {', '.join(unknown)}; available: {', '.join(sorted(by_name))}"
        )
    return [by_name[n] for n in wanted]


def default_tools(names: str = "default", **toolbox_options: Any) -> tuple[list[Tool], list[str]]:
    """The chosen built-in tools and the prompt guidance that goes with them."""
    from thinkloop.tools.builtin import Toolbox

    box = Toolbox(**toolbox_options)
    tools = pick_tools(box.tools, names)
    chosen = {t.name for t in tools}
    sections = box.prompt_sections if chosen & {"ask_human", "search_tools"} else []
    return tools, sections
