"""What one run knows, as the loop and every hook see it: its fixed configuration and its
growing state (with how a paused or recovered run goes on)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec

from thinkloop.core.children import ChildRuns
from thinkloop.core.events import Event
from thinkloop.core.model import Model, ModelSettings
from thinkloop.core.protocol import ToolCallProtocol
from thinkloop.core.registry import Hooks
from thinkloop.core.settings import (
    MAX_PARALLEL_CALLS,
    RUN_TIMEOUT_S,
    TOOL_OUTPUT_CHARS,
    TOOL_TIMEOUT_S,
    Settings,
)
from thinkloop.core.spec import Spawn
from thinkloop.core.tool import Tool
from thinkloop.core.types import (
    Message,
    PendingApproval,
    RunStatus,
    Step,
    ToolResult,
    ToolSpec,
    Usage,
)

P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class Limits:
    max_steps: int = 12
    timeout_s: float | None = RUN_TIMEOUT_S
    tool_timeout_s: float | None = TOOL_TIMEOUT_S
    output_retries: int = 2
    parallel_calls: int = MAX_PARALLEL_CALLS  # a reply's calls past it are refused
    tool_output_chars: int = TOOL_OUTPUT_CHARS  # a tool's output is cut to it


@dataclass(frozen=True)
class RunConfig:
    """Everything fixed for the duration of a run."""

    model: Model
    tools: Mapping[str, Tool]
    protocol: ToolCallProtocol
    system_prompt: str
    limits: Limits
    settings: ModelSettings
    output_type: type[Any] | None = None
    stream_model: bool = False
    session_id: str | None = None
    user_id: str | None = None
    deps: Any = None
    hooks: Hooks = field(default_factory=Hooks)
    # The settings the agent was built with: a sub-agent started in this run uses them too.
    config: Settings | None = None
    # How a part of this run (a tool, judgement, the memory flush) starts a child agent.
    spawn: Spawn | None = None
    # The agent running it, and (a sub-agent's run) the run that started it.
    agent_id: str = ""
    parent_run_id: str | None = None
    # The system prompt again with one user's own bootstrap files (an open agent's, read from
    # the store in managed mode: context/userfiles.py) and whether this is their first run.
    reprompt: Callable[[Mapping[str, str], bool], str] | None = None

    @functools.cached_property
    def specs(self) -> tuple[ToolSpec, ...]:
        # Built once per run: every step sends the same tools, and the provider's encoder
        # recognises an unchanged tool list by identity instead of comparing schemas.
        return tuple(t.spec for t in self.tools.values())


@dataclass(frozen=True, slots=True)
class Resumption:
    """The decision for every call a paused run waits on."""

    pending: tuple[PendingApproval, ...]
    approved: bool
    reason: str = ""

    def approves(self, call_id: str) -> bool:
        return self.approved and any(p.call_id == call_id for p in self.pending)

    @property
    def turn_messages(self) -> int:
        return self.pending[0].turn_messages if self.pending else 0


@dataclass(frozen=True, slots=True)
class Recovered:
    """A run continued from its checkpoints: the step its process died in, if it died while
    that step's tools ran (the reply holding the calls, and the results already recorded)."""

    assistant: Message | None = None
    results: dict[str, ToolResult] | None = None
    usage: Usage = field(default_factory=Usage)


@dataclass(slots=True)  # one per run: slots keep a waiting run small (issue 19)
class RunState:
    run_id: str
    task: str
    messages: list[Message]
    emit_to: Callable[[Event], None] | None
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    status: RunStatus | None = None
    output: Any = None
    text: str = ""
    error: BaseException | None = None
    error_text: str | None = None
    cancel_after_step: bool = False
    output_retries_used: int = 0
    started: float = field(default_factory=time.perf_counter)
    new_from: int = 0  # messages before this index existed before the run started
    silent: bool = False
    # Set by the step-budget guard: this run's step limit (overrides limits.max_steps) and
    # lean mode (trivial task: memory recall may be skipped).
    max_steps: int | None = None
    lean: bool = False
    # Calls the approval gate deferred this step (the run pauses after it), and, when this
    # run continues a paused one, the decision to apply first (``loop/resume.py``).
    pending: list[PendingApproval] = field(default_factory=list)
    resume: Resumption | None = None
    # Set when this run goes on from its checkpoints after its process died (issue 15).
    recovered: Recovered | None = None
    # A rejected reply and the engine's note on it: shown on the next request only, never
    # part of the history, the stored turn or the result (``loop/notices.py``).
    scratch: tuple[Message, ...] = ()  # a tuple: no list per run or per step
    # Set when a guard withheld the tools for the next reply (``ctx.withhold_tools``): the
    # notice the model reads before it answers without tools.
    answer_now: str | None = None
    # Replies rejected as engine text, not an answer (``loop/engine_text.py``): one is asked
    # again without tools; a second ends the run ``no_answer``.
    rejected_answers: int = 0
    # Its sub-agent runs (spawn_agent), made when the first starts.
    children: ChildRuns | None = None

    def child_runs(self) -> ChildRuns:
        if self.children is None:
            self.children = ChildRuns()
        return self.children

    @property
    def step(self) -> int:
        return len(self.steps)

    def emit(self, kind: Callable[Concatenate[str, int, P], Event], /,
             *args: P.args, **fields: P.kwargs) -> None:
        """Emit ``kind(run_id, step, *args, **fields)`` (an event class or its ``of``)."""
        if self.emit_to is not None:  # None: nobody listens, so no event is even built
            self.emit_to(kind(self.run_id, len(self.steps), *args, **fields))

    def charge(self, usage: Usage) -> None:
        """Count usage spent on this run's behalf elsewhere (a sub-agent's model calls)."""
        self.usage = self.usage + usage

    def append(self, *messages: Message) -> None:
        self.messages.extend(messages)

    @property
    def new_messages(self) -> Sequence[Message]:
        return self.messages[self.new_from :]
