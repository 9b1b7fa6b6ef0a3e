"""An agent's definition (:class:`AgentSpec`) and :data:`Spawn`, by which a part below the
agent (a tool, the memory flush, judgement) starts a child agent without importing it: it
finds ``spawn`` in its context (``ctx.run.spawn``, ``RunConfig.spawn``).

The recipe that turns a spec into an agent is ``thinkloop.build``."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, InstanceOf, field_validator

from thinkloop.core.model import Model
from thinkloop.core.tool import Tool, as_tool
from thinkloop.core.types import Usage

MINIMAL_INSTRUCTIONS = (
    "You are a focused sub-agent working for another agent. Do exactly the task you are given, "
    "using your tools when they help, and reply with a short, complete, self-contained result. "
    "Do not ask questions; state any assumption you had to make."
)
# A sub-agent's limits when its spec names none.
CHILD_MAX_STEPS = 8
CHILD_TIMEOUT_S = 300.0
APPROVE_MODES = ("ask", "auto", "deny", "pause")

# The bootstrap files an agent's definition may hold (managed mode: kept in the store, edited
# through the gateway), over the files on disk; context/bootstrap.py reads them.
BOOTSTRAP_FILES = ("IDENTITY.md", "SOUL.md", "AGENTS.md", "TOOLS.md", "USER.md", "MISSION.md")
BOOTSTRAP_FILE_MAX = 64_000
# An "open" agent keeps these per user, seeded from the agent's own on first contact.
USER_FILES = ("IDENTITY.md", "SOUL.md", "AGENTS.md", "TOOLS.md", "USER.md")



class TeamMember(BaseModel):
    """An agent another may hand a conversation to; a bare name in a definition gets its
    description from that agent's own definition (the gateway fills it in)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64)
    description: str = Field("", max_length=500)
    # The teammate's own definition (the gateway fills it in): what it runs as when this
    # agent delegates to it with ``spawn_agent`` (None: a worker with its description).
    spec: AgentSpec | None = None


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
    # Models tried in order when ``model`` fails after its own retries (GoClaw's provider
    # fallback); each answer's ``model.fallback`` event names the ones that failed.
    fallbacks: list[str] = Field(default_factory=list, max_length=8)
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
    # GoClaw's agent types: "predefined" (one identity for everyone, a USER.md per user) or
    # "open" (every bootstrap file per user, seeded from the agent's on first contact).
    type: Literal["predefined", "open"] = "predefined"
    # Agents this one may hand a conversation to (``handoff``): named in its TEAM section.
    team: list[str | TeamMember] = Field(default_factory=list, max_length=50)
    # Bootstrap files by name (BOOTSTRAP_FILES) over those on disk: the gateway fills it from
    # the store, so an edit changes the fingerprint and the next run's prompt.
    files: dict[str, str] = Field(default_factory=dict)
    # The tools work in this directory itself, whoever the user is (``--workspace``).
    workspace: Path | None = None

    def __init__(self, name: str | None = None, description: str | None = None, /,
                 **data: Any) -> None:
        if name is not None:
            data["name"] = name
        if description is not None:
            data["description"] = description
        super().__init__(**data)

    @field_validator("files")
    @classmethod
    def _known_files(cls, files: dict[str, str]) -> dict[str, str]:
        for name, text in files.items():
            if name not in BOOTSTRAP_FILES:
                raise ValueError(f"unknown bootstrap file {name!r}; one of "
                                 f"{', '.join(BOOTSTRAP_FILES)}")
            if len(text) > BOOTSTRAP_FILE_MAX:
                raise ValueError(f"{name} is longer than {BOOTSTRAP_FILE_MAX} characters")
        return files

    def team_members(self) -> list[TeamMember]:
        return [m if isinstance(m, TeamMember) else TeamMember(name=m) for m in self.team]

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
                "fallbacks": list(self.fallbacks) or None,
                "max_steps": self.max_steps, "timeout_s": self.timeout_s,
                "tool_timeout_s": self.tool_timeout_s,
                "protocol": self.protocol, "judgement": self.judgement,
                "model_pool": self.model_pool, "tools.workspace": self.workspace,
                "tools.workspace_per_user": False if own else None}


TeamMember.model_rebuild()


class ChildOutcome(Protocol):
    """How a child run ended (a ``RunResult``)."""

    @property
    def run_id(self) -> str: ...
    @property
    def status(self) -> Any: ...
    @property
    def text(self) -> str: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def error(self) -> str | None: ...


class ChildHandle(Protocol):
    """A child run in progress (a ``RunHandle``)."""

    run_id: str

    def result(self) -> Awaitable[ChildOutcome]: ...

    def cancel(self) -> None: ...


class Child(Protocol):
    """A child agent (an ``Agent``): what a part that spawned it may do with it."""

    @property
    def model(self) -> Model: ...

    def start(self, task: str, *, user_id: str | None = None, stream_model: bool = True,
              prompt_mode: Any = None, parent_run_id: str | None = None) -> ChildHandle: ...


# (spec, the parent run's RunConfig or None outside a run, the default model) -> a child
# agent. The agent provides it (``thinkloop.agent.spawn_child``) to every run it starts.
Spawn = Callable[[AgentSpec, Any, "str | Model | None"], Child]


def own_tools(spec: AgentSpec) -> list[Tool | Callable[..., Any]]:
    """The tools the spec gives as objects (a sub-agent's), not by name."""
    if spec.tools is None or isinstance(spec.tools, str):
        return []
    return [t for t in spec.tools if not isinstance(t, str)]


def child_options(spec: AgentSpec, run: Any, model: str | Model | None) -> dict[str, Any]:
    """The ``Agent(...)`` keywords of a child of ``spec`` started inside the run ``run`` (a
    ``RunConfig``; None: outside a run, the default guards apply): at most what its parent
    may do (:func:`inherited`)."""
    base = {"model": spec.model if spec.model is not None else model,
            "instructions": spec.instructions or MINIMAL_INSTRUCTIONS,
            "name": spec.name or "worker"}
    if run is None:
        return {**base, "tools": own_tools(spec), "plugins": spec.plugins,
                "max_steps": spec.max_steps or CHILD_MAX_STEPS,
                "timeout_s": spec.timeout_s or CHILD_TIMEOUT_S}
    return {**base, "deps": run.deps, **inherited(spec, run)}


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
        # Part of the parent's run, recorded there (the spawn call's result): no store, run
        # record or trace of its own.
        "store": "memory",
    }


# The parent's own conversation and records (history, memory, trace, run log) and its step
# budget (the child's steps are already no more than the parent's): not inherited.
_PARENTS_OWN = ("context.", "memory.", "tracing.", "runs.", "guard.steps")
