"""Agent: the public face. ``Agent(model=..., tools=[...]).run_sync("task")``."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, Literal

from thinkloop.config import default_model_spec
from thinkloop.context.inputs import ContextArg, RunContext, parse_context, user_message
from thinkloop.context.pipeline import run_pipeline, settings_for
from thinkloop.context.prompt import PromptBuilder, prompt_context
from thinkloop.context.sections import PromptMode
from thinkloop.errors import ConfigError
from thinkloop.guard import GuardSettings, default_hooks
from thinkloop.guard.approval import Decision
from thinkloop.guard.paused import (
    expect_pending,
    pending_approvals,
    refuse_if_pending,
    resume_scope,
    save_turn,
)
from thinkloop.hooks import (
    Hook,
    HookFn,
    Hooks,
    HookSpec,
    ReasonContext,
    Stage,
    entry_point_hooks,
    normalise,
)
from thinkloop.judgement import Judgement
from thinkloop.judgement import build as build_judgement
from thinkloop.loop.handle import RunHandle, Subscriber
from thinkloop.loop.result import RunResult
from thinkloop.loop.resume import Resumption
from thinkloop.loop.state import Limits, RunConfig, RunState
from thinkloop.memory.manager import Memory
from thinkloop.models.base import Model, ModelSettings
from thinkloop.models.registry import resolve_model
from thinkloop.protocols import ToolCallProtocol, get_protocol
from thinkloop.store.base import Store
from thinkloop.store.locks import session_lock
from thinkloop.store.memory import MemoryStore
from thinkloop.tools.base import Tool, as_tool
from thinkloop.types import Event, Message, PendingApproval

DEFAULT_INSTRUCTIONS = "You are a helpful assistant. Use the tools when they help."
# Runs that end in these states leave the session as it was before they started.
_UNSAVED = frozenset({"failed", "cancelled", "timeout"})


class Agent:
    """A model, tools and instructions, ready to run tasks.

    ``run`` returns a :class:`RunResult`; ``stream`` yields events as they happen; ``start``
    returns a :class:`RunHandle` that can be iterated, awaited or cancelled.
    """

    def __init__(
        self,
        model: str | Model | Sequence[str | Model] | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        instructions: str = DEFAULT_INSTRUCTIONS,
        *,
        name: str = "thinkloop",
        max_steps: int | None = None,
        timeout_s: float | None = 600.0,
        tool_timeout_s: float | None = 60.0,
        output_type: type[Any] | None = None,
        output_retries: int = 2,
        protocol: str | ToolCallProtocol = "auto",
        settings: ModelSettings | None = None,
        on_event: Subscriber | None = None,
        store: Store | str | None = None,
        memory: Memory | bool = False,
        deps: Any = None,
        hooks: Mapping[str, Sequence[HookSpec]] | Sequence[Hook] | None = None,
        prompt: PromptBuilder | None = None,
        plugins: bool = True,
        guard: GuardSettings | Literal[False] | None = None,
        judgement: Judgement | bool | None = None,
    ) -> None:
        if max_steps is not None and max_steps < 1:
            raise ConfigError("max_steps must be at least 1")
        self.name = name
        self.model: Model = resolve_model(model if model is not None else default_model_spec())
        self.store: Store = _open(store)
        self.memory = Memory(self.store) if memory is True else (memory or None)
        self.tools = _tool_map([*tools, *(self.memory.tools() if self.memory else ())])
        # Judgement (judgement/): off unless asked for; True is every part with its defaults.
        # Its supervisor stands in front of the guards' approver.
        j = Judgement() if judgement is True else (judgement or None)
        gs = guard or GuardSettings()
        self.judgement = build_judgement(j, store=self.store, approval=gs.approval,
                                         tool_names=list(self.tools)) if j is not None else None
        if self.judgement is not None:
            gs = replace(gs, approval=self.judgement.approval)
            self.tools = _tool_map([*self.tools.values(), *self.judgement.tools])
        self.instructions = instructions
        # Without an explicit max_steps a guard's step budget may size each run (issue 6).
        self.limits = Limits(max_steps or 12, timeout_s, tool_timeout_s, output_retries)
        self.output_type = output_type
        self.protocol = get_protocol(protocol)
        self.settings = settings or ModelSettings()
        self.subscribers: list[Subscriber] = [on_event] if on_event else []
        self.deps = deps
        # Guards first (on by default, as the seeds have them), then memory or the plain
        # history pipeline, then plugin hooks (entry point group ``thinkloop.hooks``), then
        # the agent's own.
        guards = [] if guard is False else default_hooks(gs, fixed_steps=max_steps is not None)
        context = self.memory.hooks() if self.memory else [pipeline_hook()]
        early, judged = self.judgement.hooks() if self.judgement is not None else ([], [])
        self.hooks = Hooks([*early, *guards, *context, *judged,
                            *(entry_point_hooks() if plugins else ()), *normalise(hooks)])
        self.prompt = prompt if prompt is not None else PromptBuilder()
        self._session_locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    def hook(self, stage: Stage, *, critical: bool = False) -> Callable[[HookFn], HookFn]:
        """Register a hook: ``@agent.hook("pre_tool")``."""

        def register(fn: HookFn) -> HookFn:
            self.hooks.add(Hook(stage, fn, critical))
            return fn

        return register

    def subscribe(self, callback: Subscriber) -> None:
        self.subscribers.append(callback)

    def system_prompt(
        self, mode: PromptMode = "full", *, user_id: str | None = None,
        session: str | None = None, untrusted_input: bool = False, seed: bool = False,
    ) -> str:
        """The assembled system prompt (``context/prompt.py``); ``seed=False`` writes nothing."""
        return self.prompt.build(prompt_context(
            self, mode, user_id=user_id, session_id=session, untrusted_input=untrusted_input,
            seed=seed))

    def _config(
        self, session: str | None, stream_model: bool, user_id: str | None,
        mode: PromptMode = "full", untrusted_input: bool = False,
    ) -> RunConfig:
        pctx = prompt_context(self, mode, user_id=user_id, session_id=session,
                              untrusted_input=untrusted_input, seed=True)
        return RunConfig(
            model=self.model,
            tools=self.tools,
            protocol=self.protocol,
            system_prompt=self.prompt.build(pctx),
            prompt_context=pctx,
            limits=self.limits,
            settings=self.settings,
            output_type=self.output_type,
            stream_model=stream_model,
            session_id=session,
            user_id=user_id,
            deps=self.deps,
            hooks=self.hooks,
        )

    def start(
        self,
        task: str,
        *,
        session: str | None = None,
        user_id: str | None = None,
        stream_model: bool = True,
        context: ContextArg = None,
        prompt_mode: PromptMode = "full",
        events: bool = True,
    ) -> RunHandle:
        """Start a run in the background (call from a running event loop).

        ``events=False`` when nobody will iterate the handle: subscribers still get every
        event, and without subscribers no event is built at all.
        """
        inputs = parse_context(context)
        cfg = self._config(session, stream_model, user_id, prompt_mode, inputs is not None)
        run_id = uuid.uuid4().hex
        if self.judgement is not None:  # secrets in the task never reach the model or events
            task = self.judgement.hide_task(run_id, task)
        state = RunState(run_id, task, [], None)
        scope = functools.partial(self._scope, context=inputs)
        return RunHandle(cfg, state, self.subscribers, scope, buffer_events=events)

    @asynccontextmanager
    async def _scope(
        self, cfg: RunConfig, state: RunState, context: RunContext | None = None
    ) -> AsyncIterator[None]:
        """Load the session before the run; save its whole turn after, or nothing."""
        session = cfg.session_id
        system = Message.system(cfg.system_prompt)
        # Reading files and PDFs blocks, so it happens off the event loop.
        first = (await asyncio.to_thread(user_message, state.task, context, cfg.model)
                 if context is not None else Message.user(state.task))
        if session is None:
            state.messages = [system, first]
            state.new_from = 1
            yield
            return
        async with self._session_locks[session], session_lock(self.store, session):
            history = await self.store.load(session)
            await refuse_if_pending(self.store, session)
            state.messages = [system, *history, first]
            state.new_from = len(history) + 1
            yield
            if state.status not in _UNSAVED:
                await save_turn(self.store, session, state)

    async def pending_approvals(self, session: str) -> list[PendingApproval]:
        """The calls a paused run on ``session`` waits on (empty: nothing is paused)."""
        return await pending_approvals(self.store, session)

    async def start_resume(
        self, session: str, decision: Decision | bool, *, user_id: str | None = None,
        stream_model: bool = True, events: bool = True,
    ) -> RunHandle:
        """Continue the run paused on ``session``: ``decision`` approves or denies every call
        it waits on; then the loop goes on. Raises :class:`PendingApprovalError` if none is."""
        d = decision if isinstance(decision, Decision) else Decision(bool(decision))
        pending = await expect_pending(self.store, session)
        resume = Resumption(tuple(pending), d.approved, d.reason)
        cfg = self._config(session, stream_model, user_id)
        state = RunState(pending[0].run_id, pending[0].task, [], None)
        scope = functools.partial(resume_scope, self.store, self._session_locks[session], resume)
        return RunHandle(cfg, state, self.subscribers, scope, buffer_events=events)

    async def resume(
        self, session: str, decision: Decision | bool, *, user_id: str | None = None
    ) -> RunResult:
        """``start_resume`` run to its end: the RunResult of the continued run."""
        handle = await self.start_resume(session, decision, user_id=user_id,
                                         stream_model=False, events=False)
        return await handle.result()

    async def run(
        self, task: str, *, session: str | None = None, user_id: str | None = None,
        context: ContextArg = None,
    ) -> RunResult:
        """Run ``task`` to its end and return the result.

        The same loop as :meth:`stream`; events go to subscribers only (none are queued).
        """
        handle = self.start(task, session=session, user_id=user_id, stream_model=False,
                            context=context, events=False)
        return await handle.result()

    async def stream(
        self, task: str, *, session: str | None = None, user_id: str | None = None,
        context: ContextArg = None,
    ) -> AsyncIterator[Event]:
        """Yield the run's events as they happen, model chunks included."""
        handle = self.start(task, session=session, user_id=user_id, stream_model=True,
                            context=context)
        async for event in handle:
            yield event

    def run_sync(
        self, task: str, *, session: str | None = None, user_id: str | None = None,
        context: ContextArg = None,
    ) -> RunResult:
        """``run`` for plain scripts; not for use inside a running event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(task, session=session, user_id=user_id, context=context))
        raise RuntimeError("run_sync() called inside an event loop; use 'await agent.run()'")


def _open(store: Store | str | None) -> Store:
    """A Store as given, a durable one from a URL or path, or an in-process one."""
    if store is None:
        return MemoryStore()
    if isinstance(store, str):
        from thinkloop.store.open import open_store

        return open_store(store)
    return store


def _tool_map(tools: Sequence[Tool | Callable[..., Any]]) -> dict[str, Tool]:
    out: dict[str, Tool] = {}
    for t in tools:
        tool = as_tool(t)
        if tool.name in out:
            raise ConfigError(f"two tools are named {tool.name!r}")
        out[tool.name] = tool
    return out


def pipeline_hook() -> Hook:
    """The history pipeline (limit, prune, sanitize) before every model call."""

    def run(ctx: ReasonContext) -> None:
        ctx.messages = run_pipeline(ctx.messages, settings_for(ctx.cfg.model.name))

    return Hook("pre_reason", run, name="context.pipeline")

