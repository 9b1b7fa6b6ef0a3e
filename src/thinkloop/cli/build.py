"""How the CLI assembles an agent from its options; ``run`` and ``prompt`` share it."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from thinkloop.agent import Agent
from thinkloop.build import AgentSpec
from thinkloop.core.channel import Channel, ConsoleChannel
from thinkloop.core.model import Model
from thinkloop.core.settings import Settings, quiet_model_loaders
from thinkloop.core.tool import Tool
from thinkloop.guard.approval import ApprovalRequest, Approver, Decision
from thinkloop.store.base import Store

# The CLI's flags are an agent spec (``thinkloop.build``): the one recipe builds from it.
AgentOptions = AgentSpec


def build_agent(
    opts: AgentSpec,
    settings: Settings,
    *,
    model: Model | None = None,
    extra_tools: Sequence[Tool] = (),
    store: Store | None = None,
    memory: bool = True,
    channels: Sequence[Channel] | None = None,
) -> Agent:
    """The agent ``thinkloop run`` runs (``model`` replaces the resolved one, for previews).

    With a durable ``store`` the agent also gets the memory layers and the memory tools
    (unless ``memory=False``: the store then only records the runs). ``channels``: where
    ``send_message`` and ``ask_human`` reach the person (default: the terminal, on stderr).
    """
    from thinkloop import build

    # The CLI draws its own progress: model loaders' progress bars stay off the terminal
    # (here, where models load, rather than at start-up: pydantic is not for --help).
    quiet_model_loaders()
    spec = opts if memory else opts.model_copy(update={"memory": False})
    # The agent talks to the person on stderr: stdout carries the run's output (--json).
    return build.build_agent(spec, settings, approver=cli_approver(opts.approve),
                             channels=channels or [ConsoleChannel(out=sys.stderr)],
                             extra_tools=extra_tools, store=store, model=model)


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
