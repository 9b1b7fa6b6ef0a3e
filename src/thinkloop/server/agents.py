"""Agents a gateway serves: defined in a YAML file or in the store, resolved by name through
a router that caches each built agent for a TTL and drops it when its definition changes
(GoClaw's agent router). With no definition anywhere there is one agent, ``default``, built
the way ``thinkloop run`` builds its agent."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from thinkloop.api import Agent, Approver, GatewayStore, RunRegistry, Store, validation_summary
from thinkloop.build import APPROVE_MODES, AgentSpec
from thinkloop.core.channel import Channel
from thinkloop.core.errors import ConfigError, NotFoundError, UnknownAgentError
from thinkloop.core.filestamp import Stamp, settled, stamp_of
from thinkloop.core.settings import GATEWAY_APPROVAL_TIMEOUT_S, Settings
from thinkloop.core.spec import BOOTSTRAP_FILES, TeamMember

AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
DEFAULT_AGENT = "default"


def parse_definition(name: str, data: Any) -> AgentSpec:
    if not AGENT_NAME.fullmatch(name):
        raise ConfigError(f"invalid agent name {name!r}: letters, digits and ._- (at most 64)")
    try:
        spec = AgentSpec.model_validate(data or {})
    except ValidationError as exc:
        raise ConfigError(f"agent {name!r}: {validation_summary(exc, root=name)}") from None
    if spec.approve is not None and spec.approve not in APPROVE_MODES:
        raise ConfigError(f"agent {name!r}: approve must be one of {', '.join(APPROVE_MODES)} "
                          f"(got {spec.approve!r})")
    return spec


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
        # The file's definitions as last read, with the file's stamp then and whether it had
        # settled (core/filestamp.py). Every run asks for its agent, and parsing the YAML
        # each time was a thread hop per run.
        self._read: tuple[Stamp, bool, dict[str, AgentSpec]] | None = None

    async def _from_file(self) -> dict[str, AgentSpec]:
        if self.file is None:
            return {}
        try:
            stamp = stamp_of(self.file.stat())
        except OSError:
            stamp = (-1, -1, -1)  # unreadable: load_agents_file says why
        if self._read is None or self._read[0] != stamp or not self._read[1]:
            self._read = (stamp, settled(stamp),
                          await asyncio.to_thread(load_agents_file, self.file))
        return dict(self._read[2])

    async def all(self) -> dict[str, AgentSpec]:
        found = await self._from_file()
        for d in await self.store.agent_definitions():
            found[d.name] = parse_definition(d.name, _json(d.definition))
        return found or {DEFAULT_AGENT: AgentSpec()}

    async def get(self, name: str) -> AgentSpec | None:
        """The definition with the agent's bootstrap files from the store (managed mode) in
        ``files``: an edit changes its fingerprint, so the router builds it again."""
        every = await self.all()
        spec = every.get(name)
        if spec is None:
            return None
        stored = await self.store.agent_files(name)
        if stored:
            spec = spec.model_copy(update={"files": {**spec.files, **stored}})
        return _with_team(name, spec, every) if spec.team else spec

    async def exists(self, name: str) -> bool:
        """Whether ``name`` is defined (its team checked, as :meth:`get` does), without its
        bootstrap files: what a gateway that queues the run needs to know."""
        every = await self.all()
        spec = every.get(name)
        if spec is not None and spec.team:
            _with_team(name, spec, every)
        return spec is not None


def _with_team(name: str, spec: AgentSpec, every: dict[str, AgentSpec]) -> AgentSpec:
    """The team's members named in full: a bare name gets its definition's description."""
    members = []
    for m in spec.team_members():
        other = every.get(m.name)
        if other is None or m.name == name:
            raise ConfigError(f"agent {name!r}: its team names {m.name!r}, which is not "
                              f"another agent; agents: {', '.join(sorted(every))}")
        # Its definition comes along: spawn_agent runs it as a sub-agent (a teammate's own
        # team is not followed: delegation goes one level down the team at a time).
        members.append(TeamMember(name=m.name, description=m.description or other.description,
                                  spec=m.spec or other.model_copy(update={"team": []})))
    return spec.model_copy(update={"team": members})


def file_view(settings: Settings, name: str, spec: AgentSpec, file: str) -> dict[str, Any]:
    """One bootstrap file of an agent as the gateway shows it: its text and where it comes
    from (``store``, ``disk`` under THINKLOOP_HOME, the built-in ``template``, or ``none``)."""
    from thinkloop.build import bootstrap_file

    if file not in BOOTSTRAP_FILES:
        raise NotFoundError(f"no bootstrap file {file!r}; one of {', '.join(BOOTSTRAP_FILES)}")
    text, source = bootstrap_file(settings, name, spec, file)
    return {"agent": name, "name": file, "content": text, "source": source}


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
        self._known: dict[str, float] = {}  # name -> until when it is known to exist

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

    async def exists(self, name: str) -> bool:
        """Whether ``name`` is defined, an answer yes kept ``ttl_s`` as a built agent is (a
        gateway that queues runs asked the store at every run)."""
        if self._known.get(name, 0.0) > self.clock():
            return True
        if not await self.definitions.exists(name):
            return False
        self._known[name] = self.clock() + self.ttl_s
        return True

    def invalidate(self, name: str) -> None:
        """Forget ``name``: the next run reads its definition again."""
        self._cache.pop(name, None)
        self._known.pop(name, None)

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


def build_agent(name: str, spec: AgentSpec, wiring: Wiring) -> Agent:
    """An agent from ``spec`` (``thinkloop.build``, the one recipe): with defaults it is the
    agent ``thinkloop run`` builds, except that people answer (approvals, ask_human) through
    the gateway, not a terminal."""
    from thinkloop import build

    return build.build_agent(spec.model_copy(update={"name": name}), wiring.settings,
                             approver=wiring.approver,
                             approval_timeout_s=wiring.approval_timeout_s,
                             channels=[wiring.channel], extra_tools=wiring.extra,
                             store=wiring.store, registry=wiring.runs)
