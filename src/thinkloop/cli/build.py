"""How the CLI assembles an agent from its options; ``run`` and ``prompt`` share it."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace

from thinkloop.agent import Agent
from thinkloop.channels import ConsoleChannel
from thinkloop.config import Settings, default_model_spec
from thinkloop.models.base import Model
from thinkloop.store.base import Store
from thinkloop.tools.base import Tool


@dataclass(frozen=True)
class AgentOptions:
    model: str | None = None
    tools: str = "default"
    max_steps: int | None = None
    timeout_s: float | None = None
    protocol: str | None = None
    approve: str = "ask"
    name: str = "thinkloop"
    judgement: str | None = None  # None: the setting (THINKLOOP_JUDGEMENT)
    model_pool: str | None = None  # None: the setting (THINKLOOP_MODEL_POOL)


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

    With a durable ``store`` the agent also gets the memory layers and the memory tools.
    """
    from thinkloop.cli.prompt import cli_prompt_builder
    from thinkloop.guard import GuardSettings
    from thinkloop.guard.approval import ApprovalSettings, ConsoleApprover, approver_for
    from thinkloop.judgement import Judgement
    from thinkloop.tools.defaults import default_tools

    spec = opts.model or settings.model or default_model_spec()
    # The agent talks to the person on stderr: stdout carries the run's output (--json).
    tools, guidance = default_tools(opts.tools, worker_model=spec,
                                    channels=[ConsoleChannel(out=sys.stderr)])
    builder = cli_prompt_builder(settings)
    if guidance:
        text = "\n\n".join(guidance)
        builder.add("tool_guidance", lambda ctx: text, after="tooling")
    approver = ConsoleApprover(_ask_on_stderr) if opts.approve == "ask" else approver_for(
        opts.approve)
    guard = replace(GuardSettings(), approval=ApprovalSettings(approver))
    return Agent(
        model or spec,
        tools=[*tools, *extra_tools],
        name=opts.name,
        max_steps=opts.max_steps or settings.max_steps,
        timeout_s=opts.timeout_s or settings.timeout_s,
        tool_timeout_s=settings.tool_timeout_s,
        protocol=opts.protocol or settings.protocol,
        prompt=builder,
        guard=guard,
        store=store,
        memory=memory and store is not None,
        judgement=Judgement.parse(
            opts.judgement if opts.judgement is not None else settings.judgement,
            opts.model_pool if opts.model_pool is not None else settings.model_pool),
    )


def _ask_on_stderr(prompt: str) -> str:
    sys.stderr.write(prompt)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError("no answer: standard input is closed")
    return line
