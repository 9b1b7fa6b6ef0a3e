"""What each stage's hooks see: the run (read-mostly), their stage's mutable fields, and a
way to stop the run."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec

from thinkloop.core.errors import ConfigError
from thinkloop.core.events import (
    Event,
    LlmRequest,
    LlmResponse,
    ModelFallback,
    ModelInputCut,
)
from thinkloop.core.model import Model, ModelSettings
from thinkloop.core.registry import Stage
from thinkloop.core.run import RunConfig, RunState
from thinkloop.core.tool import Tool
from thinkloop.core.types import (
    Message,
    ModelResponse,
    PendingApproval,
    RunStatus,
    ToolCall,
    ToolResult,
    ToolSpec,
)

P = ParamSpec("P")


@dataclass
class HookContext:
    """What every stage sees: the run (read-mostly) and a way to stop it."""

    stage: Stage
    cfg: RunConfig
    state: RunState
    stop_reason: str | None = field(default=None, init=False)
    stop_status: RunStatus = field(default="blocked", init=False)
    # The answer a stop ends the run with (sanitized by the loop's ``finish``); None: none.
    stop_answer: str | None = field(default=None, init=False)

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def step(self) -> int:
        return self.state.step

    def stop(self, reason: str, status: RunStatus = "blocked", *,
             answer: str | None = None) -> None:
        """End the run after this stage with ``status`` and ``reason``; ``answer`` (if any)
        becomes the run's final text through the same sanitizing path as a model's answer."""
        self.stop_reason = reason
        self.stop_status = status
        self.stop_answer = answer

    def set_step_budget(self, max_steps: int, *, lean: bool | None = None) -> None:
        """Size this run: at most ``max_steps`` steps (a step budget); ``lean``: a trivial
        task, answered with a lean prompt. The one way a hook changes the run's limits."""
        self.state.max_steps = max_steps
        if lean is not None:
            self.state.lean = lean

    def emit(self, kind: Callable[Concatenate[str, int, P], Event], /,
             *args: P.args, **fields: P.kwargs) -> None:
        """Emit an event into the run (built only when someone listens)."""
        self.state.emit(kind, *args, **fields)

    async def ask_model(self, messages: Sequence[Message], *, purpose: str,
                        settings: ModelSettings | None = None,
                        model: Model | None = None) -> ModelResponse:
        """A side model call made on the run's behalf (a plan, a classification), by the
        run's model unless ``model`` is given: it goes out as the run's ``llm.request`` /
        ``llm.response`` events (with ``purpose``) and its usage counts in the run's, where
        the usage limits see it. Every side call in a run comes through here."""
        state = self.state
        state.emit(LlmRequest.of, messages, (), purpose)
        response = await (model or self.cfg.model).complete(
            messages, [], settings or self.cfg.settings)
        state.charge(response.usage)
        state.emit(LlmResponse.of, response, purpose)
        if response.fallbacks:
            state.emit(ModelFallback.of, response)
        if response.cut_chars:
            state.emit(ModelInputCut.of, response)
        return response


@dataclass
class AssessContext(HookContext):
    task: str = ""
    system_prompt: str = ""


@dataclass
class ReasonContext(HookContext):
    messages: list[Message] = field(default_factory=list)
    tools: list[ToolSpec] = field(default_factory=list)
    settings: ModelSettings | None = None
    response: ModelResponse | None = None
    # pre_reason: the model for this one call (None: the run's own; judgement/select.py).
    model: Model | None = None


@dataclass
class ToolHookContext(HookContext):
    call: ToolCall | None = None
    tool: Tool | None = None
    # pre_tool: set a result to answer the call without running the tool (deny, dedup, cache).
    result: ToolResult | None = None
    # Set by ``withhold_tools``: the notice for a next reply that gets no tools.
    answer_now: str | None = None

    def defer(self, call: ToolCall, reason: str) -> None:
        """Park ``call`` until a person decides (``thinkloop approvals decide``): the run
        pauses after this step. Only a run with a session can pause."""
        state, session = self.state, self.cfg.session_id
        if session is None:
            raise ConfigError("a run without a session cannot pause: deny the call instead")
        state.pending.append(PendingApproval(
            state.run_id, session, call.id, call.name, dict(call.arguments), reason,
            time.time(), state.task, state.max_steps or self.cfg.limits.max_steps))

    def withhold_tools(self, notice: str) -> None:
        """Give the model no tools for its next reply, with ``notice``, so that it answers."""
        self.answer_now = notice


@dataclass
class ReflectContext(HookContext):
    text: str = ""
    output: Any = None
    feedback: str | None = None

    def reject(self, feedback: str) -> None:
        """Refuse this final answer: the model reads ``feedback`` and the loop goes on."""
        self.feedback = feedback


@dataclass
class OutputContext(HookContext):
    text: str = ""
    output: Any = None
    silent: bool = False
    status: RunStatus | None = None
