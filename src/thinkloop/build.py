"""The one recipe: :class:`Settings` + an :class:`AgentSpec` -> :class:`Agent`.

Every shell builds its agents here (the CLI, the gateway, workers, channels, the TUI), and so
do sub-agents and the memory flush: a shell holds no recipe of its own, only what it plugs in
(who answers approvals and questions, extra tools, the store, the run registry).

:func:`build_agent` is the agent ``thinkloop run`` runs (the default tools, the guards, the
bootstrap prompt, memory with a durable store); :func:`build_child` is a sub-agent's, which
inherits what its parent run allows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from thinkloop.agent import spawn_child
from thinkloop.core.model import Model
from thinkloop.core.settings import Settings
from thinkloop.core.spec import (
    APPROVE_MODES,
    CHILD_MAX_STEPS,
    CHILD_TIMEOUT_S,
    MINIMAL_INSTRUCTIONS,
    AgentSpec,
    ToolChoice,
    inherited,
    own_tools,
)
from thinkloop.core.tool import Tool
from thinkloop.store.sqlmanaged import UserFiles

if TYPE_CHECKING:
    from thinkloop.agent import Agent
    from thinkloop.context.prompt import PromptBuilder
    from thinkloop.core.channel import Channel
    from thinkloop.guard.approval import Approver
    from thinkloop.memory.manager import Memory
    from thinkloop.runs import RunRegistry
    from thinkloop.store.base import Store

@dataclass(frozen=True)
class Plugs:
    """What a shell plugs into the agents it builds (none of it is a recipe)."""

    approver: Approver | None = None  # who answers "ask" (None: the console)
    approval_timeout_s: float | None = None  # None: the setting
    channels: Sequence[Channel] = ()  # where send_message / ask_human reach a person
    extra_tools: Sequence[Tool] = ()
    store: Store | None = None  # None: no memory, runs kept in the default store
    registry: RunRegistry | None = None
    model: Model | None = None  # replaces the resolved model (previews)
    # A chat channel's own message discipline (None: the guards' defaults, 10 and 5).
    max_messages: int | None = None  # messages a run may send (the message guard's cap)
    transparency_after: int | None = None  # silent steps before the transparency nudge


def build_agent(
    spec: AgentSpec | None = None,
    settings: Settings | None = None,
    *,
    approver: Approver | None = None,
    approval_timeout_s: float | None = None,
    channels: Sequence[Channel] = (),
    extra_tools: Sequence[Tool] = (),
    store: Store | None = None,
    registry: RunRegistry | None = None,
    model: Model | None = None,
    max_messages: int | None = None,
    transparency_after: int | None = None,
) -> Agent:
    """The agent ``thinkloop run`` runs, from ``spec`` over ``settings`` (default: loaded
    now), with what the shell plugs in (:class:`Plugs`: who answers approvals and questions,
    extra tools, the store, the run registry, a model replacing the resolved one, a chat
    channel's message cap and transparency nudge)."""
    from thinkloop.core.settings import load_settings

    return assemble(spec or AgentSpec(), settings if settings is not None else load_settings(),
                    Plugs(approver, approval_timeout_s, channels, extra_tools, store, registry,
                          model, max_messages, transparency_after))


def assemble(spec: AgentSpec, settings: Settings, p: Plugs) -> Agent:
    """:func:`build_agent`: the chosen built-in tools, the guards (approvals by
    ``p.approver`` unless the spec says otherwise), the bootstrap prompt, judgement as set,
    and memory when ``p.store`` keeps memories."""
    from thinkloop.agent import DEFAULT_INSTRUCTIONS, Agent, AgentOptions
    from thinkloop.judgement import Judgement
    from thinkloop.tools.defaults import default_tools

    # The spec's settings join the loaded ones as arguments (``agent.config.origin`` says so).
    settings = settings.with_arguments(spec.settings_args())
    model_spec = settings.model_spec()
    tools = default_tools(spec.tool_names(), settings=settings.tools,
                          worker_model=model_spec, channels=list(p.channels),
                          team=spec.team_members())
    # Managed mode: an open agent's per-user files live in the store (context/userfiles.py).
    users = p.store if spec.type == "open" and isinstance(p.store, UserFiles) else None
    builder = prompt_builder(settings, spec, users_in_store=users is not None)
    return Agent(
        p.model or _models(spec, model_spec, settings.fallbacks),
        tools=[*tools, *own_tools(spec), *_team_tools(spec, p), *p.extra_tools],
        instructions=spec.instructions or DEFAULT_INSTRUCTIONS,
        name=spec.name or "thinkloop",
        max_steps=settings.max_steps,
        guard=_guards(spec, settings, p, tools),
        store=p.store,
        memory=_memory(p.store, spec) if spec.memory else False,
        plugins=spec.plugins,
        hooks=_user_files(users, builder),
        options=AgentOptions(
            timeout_s=settings.timeout_s,
            tool_timeout_s=settings.tool_timeout_s,
            protocol=settings.protocol,
            prompt=builder,
            isolation=spec.isolation,  # type: ignore[arg-type]  # Agent checks the value
            registry=p.registry,
            config=settings,
            judgement=Judgement.parse(settings.judgement, settings.model_pool),
        ),
    )


def _models(spec: AgentSpec, model_spec: str,
            fallbacks: Sequence[str]) -> Model | str | list[str | Model]:
    """The spec's model, then the fallbacks in order (one list: ``FallbackModel``): the
    spec's own, else the setting's (``--fallback``, THINKLOOP_FALLBACKS)."""
    primary = spec.model if isinstance(spec.model, Model) else model_spec
    return [primary, *fallbacks] if fallbacks else primary


# A sub-agent: the agent builds its children (``Agent`` runs give ``spawn`` to lower parts).
build_child = spawn_child


def prompt_builder(settings: Settings, spec: AgentSpec | None = None, *,
                   users_in_store: bool = False) -> PromptBuilder:
    """The prompt of the agents shells run: bootstrap files under ``THINKLOOP_HOME``, the
    spec's own (the store's, in managed mode) over them; an open agent's per user (in the
    store with ``users_in_store``, else on disk)."""
    from thinkloop.context.bootstrap import Bootstrap
    from thinkloop.context.prompt import PromptBuilder, PromptOptions
    from thinkloop.context.sections import Delegate

    spec = spec or AgentSpec()
    boot = Bootstrap(settings.home, files=dict(spec.files), open=spec.type == "open",
                     users_in_store=users_in_store)
    team = tuple(Delegate(m.name, m.description) for m in spec.team_members())
    return PromptBuilder(options=PromptOptions(bootstrap=boot, team=team))


def _user_files(store: UserFiles | None, builder: PromptBuilder) -> list[Any]:
    """The hook that reads (and seeds) an open agent's per-user files in the store."""
    boot = builder.options.bootstrap
    if store is None or boot is None:
        return []
    from thinkloop.context.userfiles import StoredUserFiles

    return StoredUserFiles(store, boot).hooks()


def bootstrap_file(settings: Settings, name: str, spec: AgentSpec, file: str) -> tuple[str, str]:
    """An agent's bootstrap file as its prompt reads it, and where it comes from: ``store``
    (the spec's ``files``), ``disk`` (under ``THINKLOOP_HOME``), ``template`` or ``none``."""
    from thinkloop.context.bootstrap import Bootstrap

    return Bootstrap(settings.home, files=dict(spec.files)).agent_text(name, file)


def _team_tools(spec: AgentSpec, p: Plugs) -> list[Tool]:
    """``handoff`` for an agent with a team, when its store keeps session handoffs."""
    record = getattr(p.store, "set_handoff", None)
    if not spec.team or record is None:
        return []
    from thinkloop.tools.handoff import handoff_tool

    return [handoff_tool(spec.name or "thinkloop", [m.name for m in spec.team_members()],
                         record)]


def _guards(spec: AgentSpec, settings: Settings, p: Plugs, tools: Sequence[Tool]) -> Any:
    from thinkloop.guard import GuardSettings
    from thinkloop.guard.approval import ApprovalSettings, ConsoleApprover, approver_for

    mode = spec.approve or "ask"
    if mode == "ask":
        approver = p.approver if p.approver is not None else ConsoleApprover()
    else:
        approver = approver_for(mode)
    timeout = p.approval_timeout_s or settings.approval_timeout_s
    base = _discipline(GuardSettings(), p) if spec.guards else GuardSettings.off()
    rules = _ask_rules(spec.ask_before, tools)
    policy = replace(base.policy, rules=(*base.policy.rules, *rules)) if rules else base.policy
    return replace(base, approval=ApprovalSettings(approver, timeout), policy=policy)


def _discipline(base: Any, p: Plugs) -> Any:
    """The message guard's cap and the transparency nudge as the shell sets them: a channel's
    ``max_messages`` is THE cap (also in time-capsule mode), not one under the guard's 10."""
    if p.max_messages is not None:
        base = replace(base, messages=replace(base.messages, max_per_run=p.max_messages,
                                              time_capsule_max=p.max_messages))
    if p.transparency_after is not None:
        base = replace(base, nudges=replace(base.nudges,
                                            transparency_after=p.transparency_after))
    return base


def _memory(store: Store | None, spec: AgentSpec) -> Memory | bool:
    """The memory layers with a durable store; ``tools: none`` also means no memory tools."""
    if store is None:
        return False
    from thinkloop.memory.manager import Memory

    class ToollessMemory(Memory):
        def tools(self) -> list[Tool]:
            return []

    return ToollessMemory(store) if spec.tool_names().strip() in ("", "none") else True


def _ask_rules(globs: Sequence[str], tools: Sequence[Tool]) -> list[Any]:
    """One approval rule per tool ``globs`` name: any value of its first argument matches."""
    from fnmatch import fnmatchcase

    from thinkloop.guard.policy import ArgRule

    rules = []
    for t in tools:
        first = next(iter(t.parameters.get("properties", {})), None)
        if first is not None and any(fnmatchcase(t.name, g) for g in globs):
            rules.append(ArgRule(t.name, first, re.compile(r"(?s)"), reason="asks before "
                                 f"each {t.name} call", action="approve"))
    return rules


__all__ = ["APPROVE_MODES", "CHILD_MAX_STEPS", "CHILD_TIMEOUT_S", "MINIMAL_INSTRUCTIONS",
           "AgentSpec", "Plugs", "ToolChoice", "assemble", "bootstrap_file", "build_agent",
           "build_child", "inherited", "prompt_builder"]


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
