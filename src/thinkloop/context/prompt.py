"""The system prompt builder: named sections in a fixed order, two modes, per-agent edits.

``full`` is for main runs; ``minimal`` (sub-agents, scheduled runs, memory flushes) keeps only
the sections marked for it. An agent owns a :class:`PromptBuilder`; ``add``, ``replace`` and
``remove`` change its sections, :class:`PromptOptions` feed the built-in ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import orjson
from pydantic import TypeAdapter

from thinkloop.context.bootstrap import FIRST_RUN, Bootstrap, BootstrapFiles, StoredFiles
from thinkloop.context.sections import (
    BOTH,
    DEFAULT_SECTIONS,
    ContextFile,
    Delegate,
    PromptContext,
    PromptMode,
    Section,
    SectionFn,
)
from thinkloop.core.errors import ConfigError
from thinkloop.core.model import Model
from thinkloop.core.protocol import ToolCallProtocol
from thinkloop.core.tool import READ_MORE
from thinkloop.core.types import Skill, ToolSpec


class DescribedTool(Protocol):
    """What the prompt reads of a tool (``tools.base.Tool`` is one)."""

    @property
    def spec(self) -> ToolSpec: ...
    @property
    def trusted_output(self) -> bool: ...
    @property
    def meta(self) -> dict[str, Any]: ...
    @property
    def guidance(self) -> str: ...


class PromptSource(Protocol):
    """What :func:`prompt_context` reads of an agent (``Agent`` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def instructions(self) -> str: ...
    @property
    def model(self) -> Model: ...
    @property
    def protocol(self) -> ToolCallProtocol: ...
    @property
    def prompt(self) -> PromptBuilder: ...
    @property
    def output_type(self) -> type[Any] | None: ...
    @property
    def tools(self) -> Mapping[str, DescribedTool]: ...

    def visible_tools(self, user_id: str | None = None) -> Mapping[str, DescribedTool]: ...

__all__ = [
    "PromptBuilder",
    "PromptOptions",
    "RenderedSection",
    "prompt_context",
]

LISTING_MAX = 30


@dataclass(frozen=True)
class PromptOptions:
    """What the built-in sections show for one agent; every field is optional."""

    bootstrap: Bootstrap | None = None
    workspace: str | Path | None = None
    sandbox: str = ""
    channel: str = ""
    extra_context: str = ""
    context_files: tuple[ContextFile, ...] = ()
    skills: tuple[Skill, ...] = ()
    delegates: tuple[Delegate, ...] = ()
    team: tuple[Delegate, ...] = ()
    silent_replies: bool = False
    heartbeat: str = ""
    subagents: bool = False
    user_names: Mapping[str, str] = field(default_factory=dict)
    show_time: bool = True
    clock: Callable[[], datetime] | None = None  # default: now, in UTC
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RenderedSection:
    name: str
    text: str


class PromptBuilder:
    """An ordered list of sections; each agent has its own copy to edit."""

    def __init__(
        self, sections: Sequence[Section] = DEFAULT_SECTIONS, options: PromptOptions | None = None
    ) -> None:
        self.sections: list[Section] = list(sections)
        self.options = options or PromptOptions()

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.sections]

    def _index(self, name: str) -> int:
        for i, s in enumerate(self.sections):
            if s.name == name:
                return i
        raise ConfigError(f"no prompt section {name!r}; sections: {', '.join(self.names)}")

    def add(
        self, name: str, render: SectionFn, *, before: str | None = None,
        after: str | None = None, modes: frozenset[PromptMode] = BOTH,
    ) -> PromptBuilder:
        """Insert a section (at the end unless ``before``/``after`` names another one)."""
        if name in self.names:
            raise ConfigError(f"prompt section {name!r} exists; use replace()")
        if before is not None and after is not None:
            raise ConfigError("give before= or after=, not both")
        section = Section(name, render, modes)
        if before is not None:
            self.sections.insert(self._index(before), section)
        elif after is not None:
            self.sections.insert(self._index(after) + 1, section)
        else:
            self.sections.append(section)
        return self

    def replace(self, name: str, render: SectionFn,
                modes: frozenset[PromptMode] | None = None) -> PromptBuilder:
        i = self._index(name)
        old = self.sections[i]
        self.sections[i] = Section(name, render, old.modes if modes is None else modes)
        return self

    def remove(self, *names: str) -> PromptBuilder:
        for name in names:
            del self.sections[self._index(name)]
        return self

    def copy(self) -> PromptBuilder:
        return PromptBuilder(self.sections, self.options)

    def render(self, ctx: PromptContext) -> list[RenderedSection]:
        """The sections that have text for ``ctx``, in order."""
        out = []
        for s in self.sections:
            if ctx.mode not in s.modes:
                continue
            text = s.render(ctx)
            if text and text.strip():
                out.append(RenderedSection(s.name, text.strip()))
        return out

    def build(self, ctx: PromptContext) -> str:
        return "\n\n".join(r.text for r in self.render(ctx))


def prompt_context(
    agent: PromptSource,
    mode: PromptMode = "full",
    *,
    user_id: str | None = None,
    session_id: str | None = None,
    untrusted_input: bool = False,
    now: datetime | None = None,
    seed: bool = True,
    stored: StoredFiles | None = None,
) -> PromptContext:
    """Gather what the sections read for one run of ``agent``.

    With ``seed=True`` this is the user's first contact if USER.md did not exist yet, and the
    bootstrap files are created; ``seed=False`` previews without writing anything.
    """
    opts = agent.prompt.options
    # Only the tools this user may use: a denied tool is neither described nor offered.
    visible = agent.visible_tools(user_id)
    specs = tuple(t.spec for n, t in visible.items() if n != READ_MORE)
    files = (opts.bootstrap.load(agent.name, user_id, seed=seed, stored=stored)
             if opts.bootstrap
             else BootstrapFiles())
    schema = ""
    if agent.output_type is not None and agent.output_type is not str:
        schema = output_instructions(agent.output_type)
    ws = str(opts.workspace) if opts.workspace else ""
    return PromptContext(
        agent_id=agent.name,
        instructions=agent.instructions,
        mode=mode,
        tools=specs,
        tooling=agent.protocol.prompt_section(specs),
        guidance=_guidance(visible.values()),
        output_schema=schema,
        identity=files.identity,
        soul=files.soul,
        missions=files.missions,
        rules=files.rules,
        user_profile=files.user,
        first_run=FIRST_RUN if files.first_run else "",
        untrusted_input=untrusted_input or any(not t.trusted_output for t in agent.tools.values()),
        skills=opts.skills,
        workspace=ws,
        workspace_listing=_listing(Path(ws)) if ws else (),
        sandbox=opts.sandbox or next(
            (t.meta["sandbox"] for t in agent.tools.values() if t.meta.get("sandbox")), ""),
        user_id=user_id,
        user_name=opts.user_names.get(user_id) if user_id else None,
        now=(now or (opts.clock or _utcnow)()) if opts.show_time else None,
        channel=opts.channel,
        extra_context=opts.extra_context,
        context_files=opts.context_files,
        silent_replies=opts.silent_replies,
        heartbeat=opts.heartbeat,
        subagents=opts.subagents,
        delegates=opts.delegates,
        team=opts.team,
        session_id=session_id,
        model=agent.model.name,
        extra=opts.extra,
    )


def _guidance(tools: Iterable[DescribedTool]) -> tuple[str, ...]:
    """Each tool's guidance once, in tool order (several tools may share one text)."""
    return tuple(dict.fromkeys(t.guidance for t in tools if t.guidance))


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _listing(root: Path) -> tuple[str, ...]:
    try:
        entries = sorted(root.iterdir(), key=lambda p: p.name)
    except OSError:
        return ()
    shown = [p.name + ("/" if p.is_dir() else "") for p in entries if not p.name.startswith(".")]
    if len(shown) > LISTING_MAX:
        shown = [*shown[:LISTING_MAX], f"... and {len(shown) - LISTING_MAX} more"]
    return tuple(shown)


def output_instructions(output_type: type[Any]) -> str:
    schema = orjson.dumps(TypeAdapter(output_type).json_schema()).decode()
    return (
        "When you give your final answer, reply with only a JSON value (no prose, no code "
        f"fence) that matches this JSON schema:\n{schema}"
    )
