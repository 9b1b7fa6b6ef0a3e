"""How the CLI assembles an agent from its options; ``run`` and ``prompt`` share it."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from thinkloop.api import Agent, ApprovalRequest, Approver, Decision, Store
from thinkloop.build import AgentSpec
from thinkloop.build import all_builtin_tools as all_builtin_tools  # moved; same name here
from thinkloop.core.channel import Channel, ConsoleChannel
from thinkloop.core.model import Model
from thinkloop.core.settings import Settings, quiet_model_loaders
from thinkloop.core.tool import Tool

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
    # The agent talks to the person on stderr: stdout carries the run's output (--json). That
    # person asked for the run: a message to them needs no approval (no more than the answer).
    console = ConsoleChannel(out=sys.stderr, reaches_requester_only=True)
    return build.build_agent(spec, settings, approver=cli_approver(opts.approve),
                             channels=channels or [console],
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
    from thinkloop.api import ConsoleApprover, approver_for

    if mode is None:
        mode = "ask" if sys.stdin.isatty() else "refuse"
    if mode == "refuse":
        return RefuseWithoutTerminal()
    return ConsoleApprover(_ask_on_stderr) if mode == "ask" else approver_for(mode)
