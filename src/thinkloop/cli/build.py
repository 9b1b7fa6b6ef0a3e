"""How the CLI assembles an agent from its options; ``run`` and ``prompt`` share it."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from thinkloop.agent import Agent
from thinkloop.core.channel import ConsoleChannel
from thinkloop.guard.approval import ApprovalRequest, Approver, Decision
from thinkloop.memory.manager import Memory
from thinkloop.models.base import Model
from thinkloop.settings import Settings, quiet_model_loaders
from thinkloop.store.base import Store
from thinkloop.tools.base import Tool


@dataclass(frozen=True)
class AgentOptions:
    model: str | None = None
    tools: str = "default"
    max_steps: int | None = None
    timeout_s: float | None = None
    protocol: str | None = None
    approve: str | None = None  # None: ask on a terminal, else refuse (cli_approver)
    name: str = "thinkloop"
    judgement: str | None = None  # None: the setting (THINKLOOP_JUDGEMENT)
    model_pool: str | None = None  # None: the setting (THINKLOOP_MODEL_POOL)
    isolation: str = "off"  # "plan": plan-then-execute (guard/isolation.py)
    # --workspace: the tools work in this directory itself, whoever the user is.
    workspace: Path | None = None

    def settings_args(self) -> dict[str, Any]:
        """The options that are settings, by setting name (None: not given)."""
        own = self.workspace is not None
        return {"model": self.model, "max_steps": self.max_steps, "timeout_s": self.timeout_s,
                "protocol": self.protocol, "judgement": self.judgement,
                "model_pool": self.model_pool, "tools.workspace": self.workspace,
                "tools.workspace_per_user": False if own else None}


def build_agent(
    opts: AgentOptions,
    settings: Settings,
    *,
    model: Model | None = None,
    extra_tools: Sequence[Tool] = (),
    store: Store | None = None,
    memory: bool = True,
) -> Agent:
    """The agent ``thinkloop run`` runs (``model`` replaces the resolved one, for previews).

    With a durable ``store`` the agent also gets the memory layers and the memory tools
    (unless ``memory=False``: the store then only records the runs).
    """
    from thinkloop.cli.prompt import cli_prompt_builder
    from thinkloop.guard import GuardSettings
    from thinkloop.guard.approval import ApprovalSettings
    from thinkloop.judgement import Judgement
    from thinkloop.tools.defaults import default_tools

    # The CLI draws its own progress: model loaders' progress bars stay off the terminal
    # (here, where models load, rather than at start-up: pydantic is not for --help).
    quiet_model_loaders()
    # The flags join the settings as arguments (``agent.config.origin`` says so).
    settings = settings.with_arguments(opts.settings_args())
    spec = settings.model_spec()
    # The agent talks to the person on stderr: stdout carries the run's output (--json).
    tools, guidance = default_tools(opts.tools, settings=settings.tools, worker_model=spec,
                                    channels=[ConsoleChannel(out=sys.stderr)])
    builder = cli_prompt_builder(settings)
    if guidance:
        text = "\n\n".join(guidance)
        builder.add("tool_guidance", lambda ctx: text, after="tooling")
    guard = replace(GuardSettings(), approval=ApprovalSettings(cli_approver(opts.approve),
                                                               settings.approval_timeout_s))
    return Agent(
        model or spec,
        tools=[*tools, *extra_tools],
        name=opts.name,
        max_steps=settings.max_steps,
        timeout_s=settings.timeout_s,
        tool_timeout_s=settings.tool_timeout_s,
        protocol=settings.protocol,
        prompt=builder,
        isolation=opts.isolation,  # type: ignore[arg-type]  # Agent checks the value
        guard=guard,
        store=store,
        memory=_memory(store, opts.tools) if memory else False,
        config=settings,
        judgement=Judgement.parse(settings.judgement, settings.model_pool),
    )


def _memory(store: Store | None, tools: str) -> Memory | bool:
    """The memory layers with a durable store; ``--tools none`` also means no memory tools."""
    if store is None:
        return False
    from thinkloop.memory.manager import Memory

    class ToollessMemory(Memory):
        def tools(self) -> list[Tool]:
            return []

    return ToollessMemory(store) if tools.strip() in ("", "none") else True


def _ask_on_stderr(prompt: str) -> str:
    sys.stderr.write(prompt)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError("no answer: standard input is closed")
    return line


NO_TERMINAL = ("{tool} needs approval and there is no terminal to ask on; run again with "
               "--approve auto to allow such calls (or --approve pause --session NAME to decide "
               "later with 'thinkloop approvals decide')")


class RefuseWithoutTerminal:
    """``--approve`` not given and stdin is not a terminal: refuse, naming the flag."""

    def __init__(self) -> None:
        self.told: set[str] = set()

    async def decide(self, request: ApprovalRequest) -> Decision:
        reason = NO_TERMINAL.format(tool=request.tool)
        if request.tool not in self.told:  # the person reads it too, once per tool
            self.told.add(request.tool)
            sys.stderr.write(f"thinkloop: {reason}\n")
        return Decision(False, reason, remember=False)


def cli_approver(mode: str | None) -> Approver:
    """``--approve``: ask|auto|deny|pause; not given: ask on a terminal, else refuse."""
    from thinkloop.guard.approval import ConsoleApprover, approver_for

    if mode is None:
        mode = "ask" if sys.stdin.isatty() else "refuse"
    if mode == "refuse":
        return RefuseWithoutTerminal()
    return ConsoleApprover(_ask_on_stderr) if mode == "ask" else approver_for(mode)


def all_builtin_tools() -> list[tuple[Tool, str]]:
    """Every built-in tool thinkloop ships, with what it needs before an agent gets it.

    The default set needs nothing; the others are built here against placeholder settings
    only to show their schemas (``thinkloop tools``): nothing is connected or loaded.
    """
    from pathlib import Path

    from thinkloop.memory.tools import memory_tools
    from thinkloop.models.embedding import MiniLMEmbedder
    from thinkloop.store.sqlite import SQLiteStore
    from thinkloop.tools.builtin import ToolSettings, builtin_tools
    from thinkloop.tools.builtin.toolsearch import ToolIndex, search_tools_tool
    from thinkloop.tools.builtin.websearch import SearxNG, web_search_tool
    from thinkloop.tools.builtin.workflows import Registry, run_workflow_tool
    from thinkloop.tools.workspace import Workspace

    # Only schemas are shown: no sandbox is needed (nor checked) to list them.
    settings = ToolSettings(sandbox="none")
    out = [(t, "") for t in builtin_tools(settings)]
    out.append((web_search_tool(SearxNG("http://search.invalid")),
                "THINKLOOP_TOOLS_SEARCH_BACKEND (searxng, brave or tavily)"))
    registry = Registry(Path("workflows.yaml"), (), "")
    out.append((search_tools_tool(ToolIndex([], MiniLMEmbedder())),
                "THINKLOOP_TOOLS_WORKFLOWS or THINKLOOP_TOOLS_SKILLS"))
    out.append((run_workflow_tool(registry, Workspace.of(settings), settings),
                "THINKLOOP_TOOLS_WORKFLOWS (a YAML registry)"))
    out += [(t, "a durable store (Agent(memory=True) or thinkloop run --session)")
            for t in memory_tools(SQLiteStore(Path("unused.db")))]
    return out
