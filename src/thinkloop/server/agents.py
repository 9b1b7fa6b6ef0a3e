"""Agents a gateway serves: defined in a YAML file or in the store, resolved by name through
a router that caches each built agent for a TTL and drops it when its definition changes
(GoClaw's agent router). With no definition anywhere there is one agent, ``default``, built
the way ``thinkloop run`` builds its agent."""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from thinkloop.agent import DEFAULT_INSTRUCTIONS, Agent
from thinkloop.core.channel import Channel
from thinkloop.errors import ConfigError, UnknownAgentError
from thinkloop.guard.approval import Approver
from thinkloop.runs import RunRegistry
from thinkloop.settings import GATEWAY_APPROVAL_TIMEOUT_S, Settings
from thinkloop.store.base import Store
from thinkloop.store.gateway import GatewayStore
from thinkloop.text import validation_summary

AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
DEFAULT_AGENT = "default"


class AgentSpec(BaseModel):
    """One agent's definition (a YAML entry, or JSON in the store)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    model: str | None = None  # None: THINKLOOP_MODEL or the default model, as `thinkloop run`
    instructions: str = DEFAULT_INSTRUCTIONS
    tools: str | list[str] = "default"  # "default", "none", or built-in tool names
    protocol: str | None = None
    max_steps: int | None = Field(None, ge=1, le=200)
    timeout_s: float | None = Field(None, gt=0)
    tool_timeout_s: float | None = Field(None, gt=0)
    # "ask": a person answers through the gateway (POST /v1/runs/{id}/input).
    approve: Literal["ask", "auto", "deny"] = "ask"
    # Tools (names or globs) whose every call waits for approval, beyond those that need it.
    ask_before: list[str] = Field(default_factory=list)
    guards: bool = True
    memory: bool = True

    def tool_names(self) -> str:
        return self.tools if isinstance(self.tools, str) else ",".join(self.tools)

    def fingerprint(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


def parse_definition(name: str, data: Any) -> AgentSpec:
    if not AGENT_NAME.fullmatch(name):
        raise ConfigError(f"invalid agent name {name!r}: letters, digits and ._- (at most 64)")
    try:
        return AgentSpec.model_validate(data or {})
    except ValidationError as exc:
        raise ConfigError(f"agent {name!r}: {validation_summary(exc, root=name)}") from None


def load_agents_file(path: Path) -> dict[str, AgentSpec]:
    """``agents: {name: {model: ..., tools: [...], ...}}`` from a YAML file."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read agents file {path}: {exc}") from None
    agents = data.get("agents") if isinstance(data, dict) else None
    if not isinstance(agents, dict):
        raise ConfigError(f"{path}: expected a mapping 'agents: {{name: definition}}'")
    return {str(k): parse_definition(str(k), v) for k, v in agents.items()}


class Definitions:
    """Where definitions come from: the store (editable while serving) over the file."""

    def __init__(self, store: GatewayStore, file: Path | None = None) -> None:
        self.store = store
        self.file = file

    async def all(self) -> dict[str, AgentSpec]:
        found = await asyncio.to_thread(load_agents_file, self.file) if self.file else {}
        for d in await self.store.agent_definitions():
            found[d.name] = parse_definition(d.name, _json(d.definition))
        return found or {DEFAULT_AGENT: AgentSpec()}

    async def get(self, name: str) -> AgentSpec | None:
        return (await self.all()).get(name)


def _json(text: str) -> Any:
    import orjson

    return orjson.loads(text)


@dataclass
class _Cached:
    agent: Agent
    fingerprint: str
    expires: float


Builder = Callable[[str, AgentSpec], Agent]


class AgentRouter:
    """Built agents by name, each kept ``ttl_s`` and rebuilt only if its definition changed."""

    def __init__(self, definitions: Definitions, build: Builder, ttl_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.definitions = definitions
        self.build = build
        self.ttl_s = ttl_s
        self.clock = clock
        self._cache: dict[str, _Cached] = {}
        self._lock = asyncio.Lock()
        self._built: list[Agent] = []  # closed at shutdown, replaced ones included

    async def get(self, name: str) -> Agent:
        hit = self._cache.get(name)
        if hit is not None and hit.expires > self.clock():
            return hit.agent
        async with self._lock:
            spec = await self.definitions.get(name)
            if spec is None:
                self._cache.pop(name, None)
                raise UnknownAgentError(f"no agent named {name!r}")
            fp = spec.fingerprint()
            hit = self._cache.get(name)
            if hit is None or hit.fingerprint != fp:
                hit = _Cached(self.build(name, spec), fp, 0.0)
                self._built.append(hit.agent)
            hit.expires = self.clock() + self.ttl_s
            self._cache[name] = hit
            return hit.agent

    def invalidate(self, name: str) -> None:
        """Forget ``name``: the next run reads its definition again."""
        self._cache.pop(name, None)

    async def aclose(self) -> None:
        """Close what the agents hold open (model HTTP clients, ...)."""
        for agent in self._built:
            close = getattr(agent, "aclose", None) or getattr(agent.model, "aclose", None)
            if close is not None:
                await close()
        self._built.clear()
        self._cache.clear()

    async def names(self) -> list[tuple[str, AgentSpec]]:
        return sorted((await self.definitions.all()).items())


@dataclass(frozen=True)
class Wiring:
    """What the gateway plugs into every agent it builds."""

    settings: Settings
    store: Store
    approver: Approver
    channel: Channel
    approval_timeout_s: float = GATEWAY_APPROVAL_TIMEOUT_S
    extra: Sequence[Any] = ()
    runs: RunRegistry | None = None  # the gateway's one registry of runs in progress
    # Adjusts the guards of every agent built (a chat channel's message cap and nudge).
    guards: Callable[[Any], Any] | None = None


def build_agent(name: str, spec: AgentSpec, wiring: Wiring) -> Agent:
    """An agent from ``spec``: with defaults it is the agent ``thinkloop run`` builds, except
    that people answer (approvals, ask_human) through the gateway, not a terminal."""
    from thinkloop.context.bootstrap import Bootstrap
    from thinkloop.context.prompt import PromptBuilder, PromptOptions
    from thinkloop.guard import GuardSettings
    from thinkloop.guard.approval import ApprovalSettings, approver_for
    from thinkloop.tools.defaults import default_tools

    s = wiring.settings
    model = spec.model or s.model_spec()
    tools, guidance = default_tools(spec.tool_names(), settings=s.tools, worker_model=model,
                                    channels=[wiring.channel])
    builder = PromptBuilder(options=PromptOptions(bootstrap=Bootstrap(s.home)))
    if guidance:
        text = "\n\n".join(guidance)
        builder.add("tool_guidance", lambda ctx: text, after="tooling")
    approver = wiring.approver if spec.approve == "ask" else approver_for(spec.approve)
    base = GuardSettings() if spec.guards else GuardSettings.off()
    if wiring.guards is not None and spec.guards:
        base = wiring.guards(base)
    guard = replace(base, approval=ApprovalSettings(approver, wiring.approval_timeout_s),
                    policy=replace(base.policy, rules=(*base.policy.rules,
                                                       *_ask_rules(spec.ask_before, tools))))
    return Agent(
        model, tools=[*tools, *wiring.extra], instructions=spec.instructions, name=name,
        max_steps=spec.max_steps or s.max_steps, timeout_s=spec.timeout_s or s.timeout_s,
        tool_timeout_s=spec.tool_timeout_s or s.tool_timeout_s,
        protocol=spec.protocol or s.protocol, prompt=builder, guard=guard,
        store=wiring.store, memory=spec.memory, registry=wiring.runs, config=s,
    )


def _ask_rules(globs: Sequence[str], tools: Sequence[Any]) -> list[Any]:
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
