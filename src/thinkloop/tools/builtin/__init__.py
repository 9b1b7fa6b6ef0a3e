"""The built-in tools and :func:`builtin_tools`, the registry ``thinkloop tools`` lists.

One module per family: ``files`` (read/write/edit/list/glob/grep), ``shell``, ``web``
(web_fetch), ``websearch``, ``browser``, ``messaging`` (send_message, ask_human), ``workflows``
and ``toolsearch`` (run_workflow, search_tools), ``memory`` (remember/recall/forget),
``calculator``. Sub-agents (``spawn_agent``) live in :mod:`thinkloop.tools.subagents`, MCP in
:mod:`thinkloop.tools.mcp`, entry point plugins in :mod:`thinkloop.tools.plugins`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from thinkloop.core.channel import Channel, ConsoleChannel
from thinkloop.core.settings import load_settings
from thinkloop.core.tool import Tool
from thinkloop.sandbox import CommandSlots, Sandbox
from thinkloop.tools.builtin.browser import BrowserSession, browser_tools
from thinkloop.tools.builtin.files import file_tools
from thinkloop.tools.builtin.messaging import SendPolicy, messaging_tools
from thinkloop.tools.builtin.settings import ToolSettings, make_sandbox
from thinkloop.tools.builtin.shell import shell_tool
from thinkloop.tools.builtin.web import web_fetch_tool
from thinkloop.tools.builtin.websearch import backend_from_settings, web_search_tool
from thinkloop.tools.workspace import Workspace

__all__ = ["ToolSettings", "Toolbox", "builtin_tools"]


def _workflow_tools(
    settings: ToolSettings, workspace: Workspace, embedder: Any, sandbox: Sandbox,
    slots: CommandSlots,
) -> list[Tool]:
    """search_tools (carrying the prompt guidance for workflows and skills) and run_workflow."""
    from thinkloop.tools.builtin.embeddings import MiniLMEmbedder
    from thinkloop.tools.builtin.toolsearch import Entry, ToolIndex, search_tools_tool
    from thinkloop.tools.builtin.workflows import (
        WORKFLOW_GUIDANCE,
        load_registry,
        load_skills,
        run_workflow_tool,
        skills_prompt_section,
    )

    tools: list[Tool] = []
    sections = [WORKFLOW_GUIDANCE]
    entries: list[Entry] = []
    cache = None
    if settings.workflows is not None:
        registry = load_registry(settings.workflows)
        tools.append(run_workflow_tool(registry, workspace, settings, sandbox, slots))
        entries += [Entry("workflow", w.name, w.search_text(), w) for w in registry.workflows]
        cache = settings.workflows.parent / ".embeddings-cache.json"
    if settings.skills is not None:
        skills = load_skills(settings.skills)
        sections.append(skills_prompt_section(skills))
        entries += [Entry("skill", s.name, s.search_text(), s) for s in skills]
        cache = cache or settings.skills / ".embeddings-cache.json"
    index = ToolIndex(entries, embedder or MiniLMEmbedder(), cache)
    # The guidance travels with search_tools: any agent given it gets it in its prompt.
    search = replace(search_tools_tool(index), guidance="\n\n".join(s for s in sections if s))
    return [search, *tools]


@dataclass
class Toolbox:
    """The built-in tools for one agent, and the resources (browser) they hold."""

    # Unset: the loaded settings' (environment, thinkloop.toml), as an Agent's are.
    settings: ToolSettings = field(default_factory=lambda: load_settings().tools)
    channels: Sequence[Channel] = ()
    send_policy: SendPolicy | None = None
    embedder: Any = None
    browser: bool | None = None  # None: when the playwright package is installed
    # spawn_agent's "worker" children get these tools minus the ones that talk to the user;
    # their model is ``worker_model`` (None: the default model, resolved when one is spawned).
    sub_agents: bool = True
    worker_model: Any = None
    max_workers: int = 4
    # The agent's TEAM (``TeamMember``s): spawn_agent delegates to these too, and refuses any
    # other agent by name (the generic "worker" stays available).
    team: Sequence[Any] = ()

    def __post_init__(self) -> None:
        self.workspace = Workspace.of(self.settings)
        # Checked once, here: a sandbox that cannot run is a configuration error, never a
        # silent fallback to running commands unconfined.
        self.sandbox = make_sandbox(self.settings)
        # One set of caps for every tool that starts a sandbox (shell, run_workflow).
        self.slots = CommandSlots()
        self.browser_session = BrowserSession(
            self.settings.chromium_path, allow_private=self.settings.fetch_allow_private)
        self.tools = self._build()

    def _build(self) -> list[Tool]:
        s, ws = self.settings, self.workspace
        tools = [*file_tools(ws, s), shell_tool(ws, s, self.sandbox, self.slots),
                 web_fetch_tool(s)]
        backend = backend_from_settings(s)
        if backend is not None:
            tools.append(web_search_tool(backend, s.fetch_timeout_s))
        use_browser = self.browser
        if use_browser is None:
            use_browser = importlib.util.find_spec("playwright") is not None
        if use_browser:
            tools += browser_tools(self.browser_session, ws, s)
        tools += messaging_tools(list(self.channels) or [ConsoleChannel()],
                                 policy=self.send_policy, ask_timeout_s=s.ask_timeout_s)
        if s.workflows is not None or s.skills is not None:
            tools += _workflow_tools(s, ws, self.embedder, self.sandbox, self.slots)
        from thinkloop.tools.builtin.calculator import calculator

        tools.append(calculator)
        if self.sub_agents:
            tools.append(self._spawn_tool(tools))
        return tools

    def _spawn_tool(self, tools: list[Tool]) -> Tool:
        from thinkloop.tools.subagents import AgentSpec, SubAgents

        private = {"send_message", "ask_human"}
        shared = [t for t in tools if t.name not in private]
        worker = AgentSpec("worker", "a general-purpose worker with the same tools as you",
                           tools=shared)
        members = [_teammate(m, shared) for m in self.team]
        self.sub_agent_runner = SubAgents(
            [worker, *members], model=self.worker_model, max_concurrency=self.max_workers,
            team=tuple(m.name or "" for m in members) if members else None)
        return self.sub_agent_runner.tool()

    async def aclose(self) -> None:
        await self.browser_session.close()

    async def __aenter__(self) -> Toolbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _teammate(member: Any, shared: list[Tool]) -> Any:
    """A teammate as a sub-agent: its own model, instructions and limits, with the tools of
    its definition that the worker has (all of them by default)."""
    from thinkloop.tools.subagents import AgentSpec

    own = member.spec or AgentSpec()
    names = own.tool_names().strip()
    picked = (shared if names == "default" else [] if names in ("", "none") else
              [t for t in shared if t.name in {n.strip() for n in names.split(",")}])
    return AgentSpec(member.name, member.description or own.description, model=own.model,
                     instructions=own.instructions, tools=picked, max_steps=own.max_steps,
                     timeout_s=own.timeout_s)


def builtin_tools(settings: ToolSettings | None = None, **options: Any) -> list[Tool]:
    """Every built-in tool for ``settings`` (``thinkloop tools`` prints these).

    ``spawn_agent`` hands tasks to "worker" children with the same tools (less send_message and
    ask_human); for other kinds of children build it with
    :meth:`thinkloop.tools.subagents.SubAgents.tool`.
    """
    return Toolbox(settings or load_settings().tools, **options).tools
