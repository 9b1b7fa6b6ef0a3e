"""The one recipe: :class:`Settings` + an :class:`AgentSpec` -> :class:`Agent`.

Every shell builds its agents here (the CLI, the gateway, workers, channels, the TUI), and so
do sub-agents and the memory flush: a shell holds no recipe of its own, only what it plugs in
(who answers approvals and questions, extra tools, the store, the run registry).

:func:`build_agent` is the agent ``thinkloop run`` runs (the default tools, the guards, the
bootstrap prompt, memory with a durable store); :func:`build_child` is a sub-agent's, which
inherits what its parent run allows.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, InstanceOf

from thinkloop.models.base import Model
from thinkloop.settings import Settings
from thinkloop.tools.base import Tool

if TYPE_CHECKING:  # the agent loads when one is built: the spec is light (sub-agents name it)
    from thinkloop.agent import Agent
    from thinkloop.channels import Channel
    from thinkloop.context.prompt import PromptBuilder
    from thinkloop.guard.approval import Approver
    from thinkloop.memory.manager import Memory
    from thinkloop.runs import RunRegistry
    from thinkloop.store.base import Store

MINIMAL_INSTRUCTIONS = (
    "You are a focused sub-agent working for another agent. Do exactly the task you are given, "
    "using your tools when they help, and reply with a short, complete, self-contained result. "
    "Do not ask questions; state any assumption you had to make."
)
# A sub-agent's limits when its spec names none.
CHILD_MAX_STEPS = 8
CHILD_TIMEOUT_S = 300.0
APPROVE_MODES = ("ask", "auto", "deny", "pause")

ToolChoice = str | Sequence[str | InstanceOf[Tool] | Callable[..., Any]]


class AgentSpec(BaseModel):
    """One agent's definition: a gateway's YAML entry or stored JSON, the CLI's flags, a kind
    of sub-agent. ``None`` means "not given": the settings (or, for a sub-agent, its parent
    and the child defaults) decide. ``AgentSpec("worker", "reads code")`` names the first two.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: str | None = None  # None: "thinkloop" (the gateway: the definition's key)
    description: str = ""
    model: str | InstanceOf[Model] | None = None  # None: THINKLOOP_MODEL or the default model
    instructions: str | None = None  # None: the default (a sub-agent's: minimal)
    # "default", "none", built-in tool names (a list or comma-separated), or tools themselves
    # (a sub-agent's). None: "default" (a sub-agent: no tools).
    tools: ToolChoice | None = None
    protocol: str | None = None
    max_steps: int | None = Field(None, ge=1, le=200)
    timeout_s: float | None = Field(None, gt=0)
    tool_timeout_s: float | None = Field(None, gt=0)
    # ask (a person answers: on the terminal, through the gateway...), auto, deny, pause.
    # None: ask (the CLI: ask on a terminal, else refuse).
    approve: str | None = None
    # Tools (names or globs) whose every call waits for approval, beyond those that need it.
    ask_before: list[str] = Field(default_factory=list)
    guards: bool = True
    memory: bool = True
    plugins: bool = True  # the installed plugin tools and hooks
    judgement: str | None = None  # None: the setting (THINKLOOP_JUDGEMENT)
    model_pool: str | None = None  # None: the setting (THINKLOOP_MODEL_POOL)
    isolation: str = "off"  # "plan": plan-then-execute (guard/isolation.py)
    # The tools work in this directory itself, whoever the user is (``--workspace``).
    workspace: Path | None = None

    def __init__(self, name: str | None = None, description: str | None = None, /,
                 **data: Any) -> None:
        if name is not None:
            data["name"] = name
        if description is not None:
            data["description"] = description
        super().__init__(**data)

    def tool_names(self) -> str:
        """The built-in tools by name, as ``--tools`` takes them."""
        if self.tools is None:
            return "default"
        if isinstance(self.tools, str):
            return self.tools
        return ",".join(t for t in self.tools if isinstance(t, str))

    def fingerprint(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()

    def settings_args(self) -> dict[str, Any]:
        """The fields that are settings, by setting name (None: not given)."""
        own = self.workspace is not None
        return {"model": self.model if isinstance(self.model, str) else None,
                "max_steps": self.max_steps, "timeout_s": self.timeout_s,
                "tool_timeout_s": self.tool_timeout_s,
                "protocol": self.protocol, "judgement": self.judgement,
                "model_pool": self.model_pool, "tools.workspace": self.workspace,
                "tools.workspace_per_user": False if own else None}


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
) -> Agent:
    """The agent ``thinkloop run`` runs, from ``spec`` over ``settings`` (default: loaded
    now), with what the shell plugs in (:class:`Plugs`: who answers approvals and questions,
    extra tools, the store, the run registry, a model replacing the resolved one)."""
    from thinkloop.settings import load_settings

    return assemble(spec or AgentSpec(), settings if settings is not None else load_settings(),
                    Plugs(approver, approval_timeout_s, channels, extra_tools, store, registry,
                          model))


def assemble(spec: AgentSpec, settings: Settings, p: Plugs) -> Agent:
    """:func:`build_agent`: the chosen built-in tools, the guards (approvals by
    ``p.approver`` unless the spec says otherwise), the bootstrap prompt, judgement as set,
    and memory when ``p.store`` keeps memories."""
    from thinkloop.agent import DEFAULT_INSTRUCTIONS, Agent
    from thinkloop.judgement import Judgement
    from thinkloop.tools.defaults import default_tools

    # The spec's settings join the loaded ones as arguments (``agent.config.origin`` says so).
    settings = settings.with_arguments(spec.settings_args())
    model_spec = settings.model_spec()
    tools, guidance = default_tools(spec.tool_names(), settings=settings.tools,
                                    worker_model=model_spec, channels=list(p.channels))
    builder = prompt_builder(settings)
    if guidance:
        text = "\n\n".join(guidance)
        builder.add("tool_guidance", lambda ctx: text, after="tooling")
    return Agent(
        p.model or (spec.model if isinstance(spec.model, Model) else model_spec),
        tools=[*tools, *_own_tools(spec), *p.extra_tools],
        instructions=spec.instructions or DEFAULT_INSTRUCTIONS,
        name=spec.name or "thinkloop",
        max_steps=settings.max_steps,
        timeout_s=settings.timeout_s,
        tool_timeout_s=settings.tool_timeout_s,
        protocol=settings.protocol,
        prompt=builder,
        isolation=spec.isolation,  # type: ignore[arg-type]  # Agent checks the value
        guard=_guards(spec, settings, p, tools),
        store=p.store,
        memory=_memory(p.store, spec) if spec.memory else False,
        plugins=spec.plugins,
        registry=p.registry,
        config=settings,
        judgement=Judgement.parse(settings.judgement, settings.model_pool),
    )


def build_child(spec: AgentSpec, run: Any, model: str | Model | None = None) -> Agent:
    """A sub-agent of ``spec``, started inside the run ``run`` (a ``RunConfig``; None: outside
    a run, the default guards apply): at most what its parent may do (:func:`inherited`)."""
    from thinkloop.agent import Agent

    chosen = spec.model if spec.model is not None else model
    instructions = spec.instructions or MINIMAL_INSTRUCTIONS
    name = spec.name or "worker"
    if run is None:
        return Agent(chosen, tools=_own_tools(spec), instructions=instructions, name=name,
                     max_steps=spec.max_steps or CHILD_MAX_STEPS,
                     timeout_s=spec.timeout_s or CHILD_TIMEOUT_S, plugins=spec.plugins)
    return Agent(chosen, instructions=instructions, name=name, deps=run.deps,
                 **inherited(spec, run))


def prompt_builder(settings: Settings) -> PromptBuilder:
    """The prompt of the agents shells run: bootstrap files under ``THINKLOOP_HOME``."""
    from thinkloop.context.bootstrap import Bootstrap
    from thinkloop.context.prompt import PromptBuilder, PromptOptions

    return PromptBuilder(options=PromptOptions(bootstrap=Bootstrap(settings.home)))


def _own_tools(spec: AgentSpec) -> list[Tool | Callable[..., Any]]:
    """The tools the spec gives as objects (a sub-agent's), not by name."""
    if spec.tools is None or isinstance(spec.tools, str):
        return []
    return [t for t in spec.tools if not isinstance(t, str)]


def _guards(spec: AgentSpec, settings: Settings, p: Plugs, tools: Sequence[Tool]) -> Any:
    from thinkloop.guard import GuardSettings
    from thinkloop.guard.approval import ApprovalSettings, ConsoleApprover, approver_for

    mode = spec.approve or "ask"
    if mode == "ask":
        approver = p.approver if p.approver is not None else ConsoleApprover()
    else:
        approver = approver_for(mode)
    timeout = p.approval_timeout_s or settings.approval_timeout_s
    base = GuardSettings() if spec.guards else GuardSettings.off()
    rules = _ask_rules(spec.ask_before, tools)
    policy = replace(base.policy, rules=(*base.policy.rules, *rules)) if rules else base.policy
    return replace(base, approval=ApprovalSettings(approver, timeout), policy=policy)


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


def _narrower(mine: float | None, parents: float | None) -> float | None:
    return parents if mine is None else mine if parents is None else min(mine, parents)


def inherited(spec: AgentSpec, run: Any) -> dict[str, Any]:
    """What a child of the run ``run`` (a ``RunConfig``) gets: at most what the parent has.

    Tools: the spec's (the developer chose them), each as the parent run has it when it has
    one of that name (a name alone: the parent's tool of that name). Hooks: every guard,
    plugin and user hook of the parent (policy, allow and deny lists, approvals,
    dangerous-command rules, rate limits), so whatever the parent may not call its children
    may not call either; without the parent's own context and memory hooks. Limits: the
    smaller of the spec's and the parent's. Workspace and user: the parent's (same tools,
    same user id). Settings: the parent's.
    """
    from thinkloop.tools.base import as_tool

    parent_tools: Mapping[str, Tool] = run.tools
    wanted = [] if spec.tools is None or isinstance(spec.tools, str) else spec.tools
    tools = [parent_tools[t] if isinstance(t, str) else
             parent_tools.get(as_tool(t).name, as_tool(t))
             for t in wanted if not isinstance(t, str) or t in parent_tools]
    hooks = [h for stage in run.hooks.by_stage.values() for h in stage
             if not h.name.startswith(_PARENTS_OWN)]
    limits = run.limits
    return {
        "tools": tools,
        "hooks": hooks,
        "guard": False,  # the parent's guards come in with its hooks, settings and state
        "plugins": False,  # plugin hooks too
        "max_steps": min(spec.max_steps or CHILD_MAX_STEPS, limits.max_steps),
        "timeout_s": _narrower(spec.timeout_s or CHILD_TIMEOUT_S, limits.timeout_s),
        "tool_timeout_s": limits.tool_timeout_s,
        "config": getattr(run, "config", None),  # the parent's settings, not read again
    }


# The parent's own conversation and records (history, memory, trace, run log) and its step
# budget (the child's steps are already no more than the parent's): not inherited.
_PARENTS_OWN = ("context.", "memory.", "tracing.", "runs.", "guard.steps")
