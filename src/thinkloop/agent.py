"""Agent: the public face. ``Agent(model=..., tools=[...]).run_sync("task")``."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from thinkloop.checkpoints import load_recovery, zeroed
from thinkloop.context.bootstrap import StoredFiles
from thinkloop.context.focus import is_small
from thinkloop.context.inputs import ContextArg, parse_context
from thinkloop.context.pipeline import run_pipeline, settings_for
from thinkloop.context.prompt import PromptBuilder, prompt_context
from thinkloop.context.sections import PromptMode
from thinkloop.core.errors import ConfigError, RunAccessError
from thinkloop.core.events import Event
from thinkloop.core.model import Model, ModelSettings
from thinkloop.core.settings import RUN_TIMEOUT_S, TOOL_TIMEOUT_S, Settings, load_settings
from thinkloop.core.spec import AgentSpec, child_options
from thinkloop.core.tool import READ_MORE, Tool, as_tool
from thinkloop.core.types import PendingApproval
from thinkloop.guard import GuardSettings, default_hooks
from thinkloop.guard.approval import Decision
from thinkloop.guard.focus import focus_hook, recap_hook
from thinkloop.hooks import (
    Hook,
    HookFn,
    Hooks,
    HookSpec,
    Limits,
    ReasonContext,
    Resumption,
    RunConfig,
    RunState,
    Stage,
    ToolHookContext,
    entry_point_hooks,
    normalise,
)
from thinkloop.judgement import Judgement
from thinkloop.judgement import build as build_judgement
from thinkloop.loop.admit import admit
from thinkloop.loop.handle import RunHandle, Scope, Subscriber
from thinkloop.loop.result import RunResult
from thinkloop.memory.manager import Memory
from thinkloop.models.catalog import facts_of
from thinkloop.models.registry import ModelRegistry, resolve_model
from thinkloop.offload import OFF_LOOP_CHARS
from thinkloop.protocols import ToolCallProtocol, get_protocol
from thinkloop.runbook import RunBook
from thinkloop.runs import RunRegistry
from thinkloop.session import Sessions
from thinkloop.store.base import MemoryBackend, RunRecord, RunRecords, Store
from thinkloop.store.inprocess import MemoryStore
from thinkloop.tools.paging import Pager
from thinkloop.tracing import Tracing, default_tracing

DEFAULT_INSTRUCTIONS = "You are a helpful assistant. Use the tools when they help."


@dataclass(frozen=True)
class AgentOptions:
    """The options an agent needs less often than its keywords, by section.

    Limits: ``timeout_s``, ``tool_timeout_s``, ``output_retries``. Model: ``protocol``,
    ``settings`` (per-call ModelSettings), ``output_type``, ``model_registry``. Prompt and
    tools: ``prompt``, ``deps``. Judgement and guards: ``judgement``, ``isolation``. Records:
    ``registry``, ``tracing``, ``checkpoints``. Settings: ``config`` (thinkloop's Settings).
    """

    # limits
    timeout_s: float | None = RUN_TIMEOUT_S
    tool_timeout_s: float | None = TOOL_TIMEOUT_S
    output_retries: int = 2
    # the model
    protocol: str | ToolCallProtocol = "auto"
    settings: ModelSettings | None = None
    output_type: type[Any] | None = None
    model_registry: ModelRegistry | None = None
    # the prompt and what tools receive
    prompt: PromptBuilder | None = None
    deps: Any = None
    # judgement and isolation
    judgement: Judgement | bool | None = None
    isolation: Literal["off", "plan"] = "off"
    # records: the run registry, tracing, checkpoints
    registry: RunRegistry | None = None
    tracing: Tracing | bool | None = None
    checkpoints: bool = True
    # memory that keeps enough (docs/seeds.md); None: the settings' value
    history_turns: int | None = None  # each request keeps the last N user turns
    observation_max_tokens: int | None = None  # a longer tool result is paged (0: no cap)
    # thinkloop's Settings (default: load_settings(), read when the agent is built)
    config: Settings | None = None


class Agent:
    """A model, tools and instructions, ready to run tasks.

    ``run`` returns a :class:`RunResult`; ``stream`` yields events as they happen; ``start``
    returns a :class:`RunHandle` that can be iterated, awaited or cancelled.

    Sessions are durable by default: ``session=`` without ``store=`` keeps them in the
    default store (SQLite under ``THINKLOOP_HOME``, or ``THINKLOOP_DATABASE_URL``), opened on
    first use; ``store="memory"`` keeps them in this process only. The agent owns what it
    opened (that store, a model it resolved from a name) and closes it in :meth:`aclose`
    (``async with Agent(...) as agent:``), after the post-turn jobs in flight have finished.
    Nothing leaks without it: whatever is still open closes when the event loop ends.

    ``config``: the :class:`~thinkloop.settings.Settings` the default model, the providers'
    keys, the default store and tracing come from (default: ``load_settings()``, read here).
    """

    def __init__(
        self,
        model: str | Model | Sequence[str | Model] | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        instructions: str = DEFAULT_INSTRUCTIONS,
        *,
        name: str = "thinkloop",
        max_steps: int | None = None,
        store: Store | str | None = None,
        memory: Memory | bool = False,
        guard: GuardSettings | bool | None = None,
        hooks: Mapping[str, Sequence[HookSpec]] | Sequence[Hook] | None = None,
        plugins: bool = True,
        on_event: Subscriber | None = None,
        options: AgentOptions | None = None,
    ) -> None:
        if max_steps is not None and max_steps < 1:
            raise ConfigError("max_steps must be at least 1")
        o = options if options is not None else AgentOptions()
        if not isinstance(o, AgentOptions):
            raise ConfigError(f"options= takes AgentOptions, got {type(o).__name__}")
        guard = _guard_arg(guard)
        config, settings, judgement, isolation = o.config, o.settings, o.judgement, o.isolation
        tracing, registry = o.tracing, o.registry
        _check_settings(settings, config)
        self.name = name
        # Read once here (environment, thinkloop.toml) unless given; passed down from here.
        self.config = config if config is not None else load_settings()
        # model_registry: the provider prefixes model strings may name (register your own).
        providers = self.config.models

        def resolve(spec: str | Model | Sequence[str | Model]) -> Model:  # with its settings
            return resolve_model(spec, providers, registry=o.model_registry)

        self.model: Model = resolve(model if model is not None else self.config.model_spec())
        self._owns_model = not isinstance(model, Model)
        self.store: Store = _open(store, self.config)
        self._owns_store = not isinstance(store, Store)
        if memory is True and not isinstance(self.store, MemoryBackend):
            raise ConfigError(f"memory=True needs a store that keeps memories; "
                              f"{type(self.store).__name__} does not (use the default store, "
                              "store='memory', or a SQLite/PostgreSQL URL)")
        # The last N user turns each request keeps (None: the settings' history_turns).
        self.history_turns = o.history_turns if o.history_turns is not None else (
            self.config.history_turns)
        if self.history_turns is not None and self.history_turns < 1:
            raise ConfigError("history_turns must be at least 1")
        self.memory = (Memory(self.store, history_turns=self.history_turns) if memory is True
                       else (memory or None))
        if self.memory is not None and self.memory.history_turns is None:
            self.memory.history_turns = self.history_turns
        # A tool result over this many tokens goes into history truncated, read_more pages on
        # (None: the settings' observation_max_tokens; 0: no cap).
        cap = (self.config.observation_max_tokens if o.observation_max_tokens is None
               else o.observation_max_tokens)
        self.pager = Pager(cap) if cap > 0 else None
        self.tools = _tool_map([*tools, *(self.memory.tools() if self.memory else ()),
                                *([self.pager.tool()] if self.pager else ())])
        if plugins:
            _add_plugin_tools(self.tools)
        gs = self._judged_guards(guard, isolation, judgement, resolve)
        self.instructions = instructions
        # Without an explicit max_steps a guard's step budget may size each run (issue 6).
        self.limits = Limits(max_steps or 12, o.timeout_s, o.tool_timeout_s, o.output_retries)
        self.output_type = o.output_type
        self.protocol = get_protocol(o.protocol)
        self.settings = settings or ModelSettings()
        self.subscribers: list[Subscriber] = [on_event] if on_event else []
        self.deps = o.deps
        # Runs in progress (abort by run, session or all); a shared registry sees every
        # agent's. Runs are recorded (row, checkpoints, audit log) in every durable store, the
        # default one too, so a process killed mid-turn loses nothing and the run resumes.
        self.registry = registry if registry is not None else RunRegistry()
        self.runbook = (RunBook(self.store, name, self.registry.abort,
                                checkpoints=o.checkpoints,
                                keep_checkpoints=self.config.keep_checkpoints)
                        if store != "memory" and isinstance(self.store, RunRecords) else None)
        # Traced by default when runs are stored or OTEL_EXPORTER_OTLP_ENDPOINT is set, or
        # when started inside a traced run's tool (a sub-agent); tracing=False: never.
        self.tracing = (None if tracing is False else tracing if isinstance(tracing, Tracing)
                        else default_tracing(stored=tracing or self.runbook is not None,
                                             settings=self.config))
        self.sessions = Sessions(self.store, agent=name, registry=self.registry,
                                 runbook=self.runbook, tracing=self.tracing)
        self._policy = None if guard is False else gs.policy
        if guard is not False:
            _check_cost_cap(gs.limits.max_cost_usd, self.model)
        self.hooks = self._stage_hooks(None if guard is False else gs, max_steps is not None,
                                       normalise(hooks), plugins)
        self.prompt = o.prompt if o.prompt is not None else PromptBuilder()

    def _judged_guards(self, guard: GuardSettings | Literal[False] | None,
                       isolation: Literal["off", "plan"], judgement: Judgement | bool | None,
                       resolve: Callable[[Any], Model]) -> GuardSettings:
        """The guards' settings, with judgement (judgement/: off unless asked for; True is
        every part with its defaults) built, its supervisor in front of the approver."""
        j = Judgement() if judgement is True else (judgement or None)
        if guard is False and isolation != "off":
            raise ConfigError("isolation='plan' works through the guards; guard=False "
                              "turns them off")
        gs = _isolated(guard or GuardSettings(), isolation)
        self.judgement = build_judgement(j, store=self.store, approval=gs.approval,
                                         tool_names=list(self.tools),
                                         resolve=resolve) if j is not None else None
        if self.judgement is not None:
            gs = replace(gs, approval=self.judgement.approval)
            self.tools = _tool_map([*self.tools.values(), *self.judgement.tools])
        return gs

    def _stage_hooks(self, guards: GuardSettings | None, fixed_steps: bool, own: list[Hook],
                     plugins: bool) -> Hooks:
        """Judgement's early hooks, the guards (on by default, as the seeds have them; None:
        off), memory or the plain history pipeline, judgement's others, plugin hooks (entry
        point group ``thinkloop.hooks``), the agent's ``own``, then run records and tracing."""
        guard_hooks = [] if guards is None else default_hooks(guards, fixed_steps=fixed_steps,
                                                              store=self.store)
        context = self.memory.hooks() if self.memory else [pipeline_hook(self.history_turns)]
        if is_small(self.model):  # a small model sees only the tools that match the task,
            context += [focus_hook(), recap_hook()]  # and earlier turns as a recap
        early, judged = self.judgement.hooks() if self.judgement is not None else ([], [])
        # The cap comes first, so that the guards mark the page history keeps as outside
        # content, whole, rather than a block cut in half.
        capped = pager_hooks(self.pager) if self.pager else []
        return Hooks([*capped, *early, *guard_hooks, *context, *judged,
                      *(entry_point_hooks() if plugins else ()), *own,
                      *(self.runbook.hooks() if self.runbook else ()),
                      *(self.tracing.hooks() if self.tracing else ())])

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Wait for the runs in flight and their post-turn jobs, then close what the agent
        opened (its store, its model's connections). The agent stays usable: both reopen
        on next use."""
        if self.memory is not None:  # the jobs waited for start no embedding model's load
            self.memory.closing = True
        try:
            await self.sessions.drain()
        finally:
            if self.memory is not None:
                self.memory.closing = False
        if self._owns_store:
            close = getattr(self.store, "aclose", None)
            if close is not None:
                await close()
        if self._owns_model:
            close = getattr(self.model, "aclose", None)
            if close is not None:
                await close()
        if self.judgement is not None:  # the pool's models are built from names: its own
            await self.judgement.aclose()

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

    def visible_tools(self, user_id: str | None = None) -> Mapping[str, Tool]:
        """The tools a run for ``user_id`` may see: the tool policy's denied ones are left out
        of the prompt, the tool list and the decode constraint (and refused if called)."""
        policy = self._policy
        if policy is None or (policy.allow is None and not policy.deny and not policy.roles):
            return self.tools
        return {n: t for n, t in self.tools.items() if policy.permits(n, user_id) is None}

    def _config(
        self, session: str | None, stream_model: bool, user_id: str | None,
        mode: PromptMode = "full", untrusted_input: bool = False,
        parent_run_id: str | None = None,
    ) -> RunConfig:
        pctx = prompt_context(self, mode, user_id=user_id, session_id=session,
                              untrusted_input=untrusted_input, seed=True)
        return RunConfig(
            model=self.tracing.wrap(self.model) if self.tracing else self.model,
            tools=self.visible_tools(user_id),
            protocol=self.protocol,
            system_prompt=self.prompt.build(pctx),
            limits=self.limits,
            settings=self.settings,
            output_type=self.output_type,
            stream_model=stream_model,
            session_id=session,
            user_id=user_id,
            deps=self.deps,
            hooks=self.hooks,
            config=self.config,
            spawn=spawn_child,
            agent_id=self.name,
            parent_run_id=parent_run_id,
            reprompt=functools.partial(self._reprompt, mode, user_id, session, untrusted_input),
        )

    def _reprompt(self, mode: PromptMode, user_id: str | None, session: str | None,
                  untrusted_input: bool, files: Mapping[str, str], first_run: bool) -> str:
        """The run's system prompt with the user's own bootstrap files (RunConfig.reprompt)."""
        return self.prompt.build(prompt_context(
            self, mode, user_id=user_id, session_id=session, untrusted_input=untrusted_input,
            seed=False, stored=StoredFiles(files, first_run)))

    def start(
        self,
        task: str,
        *,
        session: str | None = None,
        user_id: str | None = None,
        stream_model: bool = True,
        context: ContextArg = None,
        prompt_mode: PromptMode | None = None,
        events: bool = True,
        run_id: str | None = None,
        parent_run_id: str | None = None,
    ) -> RunHandle:
        """Start a run in the background (call from a running event loop).

        ``run_id``: the id the run is known by already (a run queued for a worker); default
        a new one. ``parent_run_id``: the run this one works for (a sub-agent's); its tools
        see it, and its record names it.

        ``prompt_mode`` defaults to ``minimal`` for models with a context window under 8K
        tokens (the local model), ``full`` otherwise.

        ``events=False`` when nobody will iterate the handle: subscribers still get every
        event, and without subscribers no event is built at all.
        """
        inputs = parse_context(context)
        mode: PromptMode = prompt_mode or ("minimal" if is_small(self.model) else "full")
        cfg = self._config(session, stream_model, user_id, mode, inputs is not None,
                           parent_run_id)
        run_id = run_id or uuid.uuid4().hex
        scope: Scope = (self.sessions.turn if inputs is None
                        else functools.partial(self.sessions.turn, context=inputs))
        # Secrets in the task never reach the model or events; a long task is searched for
        # them in a worker thread, first thing in the run (see offload.py).
        if self.judgement is not None and len(task) >= OFF_LOOP_CHARS:
            scope = self.judgement.hiding_first(scope, run_id, task)
            task = ""
        elif self.judgement is not None:
            task = self.judgement.hide_task(run_id, task)
        state = RunState(run_id, task, [], None)
        return self._launch(cfg, state, scope, events)

    async def start_many(self, tasks: Iterable[str], *, slice_ms: float = 8.0,
                         freeze: bool = True, **options: Any) -> list[RunHandle]:
        """:meth:`start` a run per task (with ``options``, start's keywords), in slices that
        yield to the event loop so that it never stalls for much more than ``slice_ms``
        (10,000 runs started in one go hold it for seconds). The handles, in task order.

        ``freeze``: keep the started runs out of the garbage collector's full passes until
        they are all done (``thinkloop.loop.admit.FreezeHold``); else each pass walks every
        waiting run and stalls the loop (200 ms at 10,000 runs)."""
        return await admit(functools.partial(self.start, **options), tasks, slice_ms=slice_ms,
                           freeze=freeze)

    def _launch(self, cfg: RunConfig, state: RunState, scope: Scope, events: bool,
                base: RunRecord | None = None, recovering: bool = False) -> RunHandle:
        """The run's whole lifetime is the session's (session.py)."""
        return self.sessions.launch(cfg, state, scope, self.subscribers, events=events,
                                    base=base, recovering=recovering)

    async def pending_approvals(self, session: str) -> list[PendingApproval]:
        """The calls a paused run on ``session`` waits on (empty: nothing is paused)."""
        return await self.sessions.pending(session)

    async def start_resume(
        self, session: str, decision: Decision | bool, *, user_id: str | None = None,
        stream_model: bool = True, events: bool = True,
    ) -> RunHandle:
        """Continue the run paused on ``session``: ``decision`` approves or denies every call
        it waits on; then the loop goes on. Raises :class:`PendingApprovalError` if none is."""
        d = decision if isinstance(decision, Decision) else Decision(bool(decision))
        pending = await self.sessions.expect_pending(session)
        resume = Resumption(tuple(pending), d.approved, d.reason)
        cfg = self._config(session, stream_model, user_id)
        state = RunState(pending[0].run_id, pending[0].task, [], None)
        scope = functools.partial(self.sessions.resumed, resume)
        base = await self.runbook.store.get_run(state.run_id) if self.runbook else None
        return self._launch(cfg, state, scope, events, base)

    async def resume(
        self, session: str, decision: Decision | bool, *, user_id: str | None = None
    ) -> RunResult:
        """``start_resume`` run to its end: the RunResult of the continued run."""
        handle = await self.start_resume(session, decision, user_id=user_id,
                                         stream_model=False, events=False)
        return await handle.result()

    async def start_resume_run(
        self, run_id: str, *, stream_model: bool = True, events: bool = True
    ) -> RunHandle:
        """Continue a run whose process died, from its last checkpoint in this agent's store.

        A tool call that has a recorded result is never run again. Raises
        :class:`RunAccessError` if the run ended, is unknown, or is still running somewhere.
        """
        if self.runbook is None:
            raise ConfigError("resuming a run needs the durable store it was recorded in "
                              "(the default store, or Agent(store=...)), not store='memory'")
        if run_id in self.registry:
            raise RunAccessError(f"run {run_id} is running in this process")
        recovery = await load_recovery(self.store, run_id)
        rec = recovery.record
        cfg = self._config(rec.session_id, stream_model, rec.user_id)
        state = RunState(run_id, recovery.task, [], None)
        scope = functools.partial(self.sessions.recovered, recovery)
        return self._launch(cfg, state, scope, events, zeroed(rec), recovering=True)

    async def finish_owed_jobs(self, limit: int = 20) -> int:
        """Run the post-turn jobs (memory, summaries, lessons) that a stopped process left
        owed in this agent's store, oldest first; how many turns' jobs ran. ``thinkloop run``
        calls it after each answer."""
        return await self.sessions.finish_owed(
            lambda session, user: self._config(session, False, user), limit)

    def hand_back(self, run_id: str, on_stop: Callable[[], None] | None = None,
                  ) -> asyncio.Future[bool] | None:
        """Stop a run here without recording its end, so that another process resumes it from
        its last checkpoint (a worker that is shutting down). It stops at once, or, if tool
        calls are in flight, once they have finished and their results are durably
        checkpointed (no new call begins meanwhile): a finished call never runs again.

        The future is True once it stopped (``on_stop`` runs just before), False if it ended
        on its own first; None: it is not running here. Its session keeps nothing of it, as
        for any run that did not finish."""
        return self.runbook.hand_back(run_id, on_stop) if self.runbook is not None else None

    def waiting_for_person(self, run_id: str) -> contextlib.AbstractContextManager[None]:
        """Around a tool call's wait for a person's answer (``ask_human``): a hand-back
        need not wait for that call (the run asks again where it resumes)."""
        if self.runbook is None:
            return contextlib.nullcontext()
        return self.runbook.waiting_for_person(run_id)

    async def resume_run(self, run_id: str) -> RunResult:
        """``start_resume_run`` run to its end."""
        handle = await self.start_resume_run(run_id, stream_model=False, events=False)
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
        """``run`` for plain scripts; not for use inside a running event loop.

        Returns after the post-turn jobs have finished and what the agent opened is closed
        (it reopens on the next call)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("run_sync() called inside an event loop; use 'await agent.run()'")

        async def run_then_close() -> RunResult:
            try:
                return await self.run(task, session=session, user_id=user_id, context=context)
            finally:
                await self.aclose()

        return asyncio.run(run_then_close())


def spawn_child(spec: AgentSpec, run: Any, model: str | Model | None = None) -> Agent:
    """A sub-agent of ``spec`` (``thinkloop.core.spec.Spawn``): started inside the run ``run``
    (a ``RunConfig``) it may do at most what its parent may; outside a run (None) the
    default guards apply."""
    return Agent(**with_options(child_options(spec, run, model)))


def with_options(keywords: Mapping[str, Any]) -> dict[str, Any]:
    """``Agent`` keywords held flat (a dict, a helper's ``**kw``): those that are
    :class:`AgentOptions` fields gathered into ``options=``."""
    sections = {f.name for f in fields(AgentOptions)}
    kw = {k: v for k, v in keywords.items() if k not in sections}
    given = {k: v for k, v in keywords.items() if k in sections}
    if given:
        if kw.get("options") is not None:
            given = {**vars(kw["options"]), **given}
        kw["options"] = AgentOptions(**given)
    return kw


def _check_cost_cap(cap: float | None, model: Model) -> None:
    """A cost cap needs a price: on a model with none it would never trip (issue 28)."""
    if cap is None:
        return
    facts = facts_of(model)
    if not facts.priced:
        raise ConfigError(f"a cost cap (max_cost_usd={cap:g}) needs the model's price, and "
                          f"{facts.name} has no known price; add it to the price table "
                          "(thinkloop.models.catalog.HAND_PRICES) or cap tokens instead")


def _check_settings(settings: object, config: object) -> None:
    """The two kinds of settings, each where it belongs: mixed up, a run failed at its first
    model call with an AttributeError instead of here with a clear error."""
    if settings is not None and not isinstance(settings, ModelSettings):
        raise ConfigError(f"settings= takes ModelSettings (temperature, max_tokens, ...), got "
                          f"{type(settings).__name__}; thinkloop's Settings go in config=")
    if config is not None and not isinstance(config, Settings):
        raise ConfigError(f"config= takes thinkloop's Settings (load_settings()), got "
                          f"{type(config).__name__}; per-call ModelSettings go in settings=")


def _guard_arg(guard: object) -> GuardSettings | Literal[False] | None:
    """``guard=``: True is the defaults (as None is), False turns the guards off."""
    if guard is True or guard is None:
        return None
    if guard is False or isinstance(guard, GuardSettings):
        return guard
    raise ConfigError(f"guard= takes GuardSettings, True or False, got {type(guard).__name__}")


def _isolated(guard: GuardSettings, isolation: str) -> GuardSettings:
    """``isolation="plan"``: plan-then-execute with quarantined reading (guard/isolation.py)."""
    if isolation not in ("off", "plan"):
        raise ConfigError(f"isolation must be 'off' or 'plan' (got {isolation!r})")
    if isolation == "off":
        return guard
    from thinkloop.guard import IsolationSettings

    return replace(guard, isolation=IsolationSettings(enabled=True))


def _open(store: Store | str | None, config: Settings) -> Store:
    """A Store as given, ``"memory"`` for an in-process one, a durable one from a URL or a
    path, or (None) the default durable store: it connects on first use, so runs without a
    session never touch it."""
    if store == "memory":
        return MemoryStore()
    if store is None or isinstance(store, str):
        from thinkloop.store.open import open_store

        return open_store(store, settings=config)
    return store


def _add_plugin_tools(tools: dict[str, Tool]) -> None:
    """Tools installed packages register (entry point group ``thinkloop.tools``); the agent's
    own tool of the same name wins. A plugin that cannot load is logged and skipped."""
    from thinkloop.tools.plugins import load_plugin_tools

    for t in load_plugin_tools()[0]:
        tools.setdefault(t.name, t)


def _tool_map(tools: Sequence[Tool | Callable[..., Any]]) -> dict[str, Tool]:
    out: dict[str, Tool] = {}
    for t in tools:
        tool = as_tool(t)
        if tool.name in out:
            raise ConfigError(f"two tools are named {tool.name!r}")
        out[tool.name] = tool
    return out


def pager_hooks(pager: Pager) -> list[Hook]:
    """Tool results over the cap go into history as their first page and a note; read_more is
    offered once there is something to read on."""

    def cap(ctx: ToolHookContext) -> None:
        if ctx.result is not None:
            outside = ctx.tool is None or not ctx.tool.trusted_output
            ctx.result = pager.shorten(ctx.result, ctx.cfg.session_id, ctx.state.run_id,
                                       outside)

    def offer(ctx: ReasonContext) -> None:
        if not pager.holds(ctx.cfg.session_id, ctx.state.run_id):
            ctx.tools = [t for t in ctx.tools if t.name != READ_MORE]

    return [Hook("post_tool", cap, name="context.observation_cap"),
            Hook("pre_reason", offer, name="context.read_more")]


def pipeline_hook(history_turns: int | None = None) -> Hook:
    """The history pipeline (limit, prune, sanitize) before every model call."""

    def run(ctx: ReasonContext) -> None:
        model = ctx.cfg.model
        settings = (settings_for(model) if history_turns is None
                    else settings_for(model, history_turns=history_turns))
        ctx.messages = run_pipeline(ctx.messages, settings)

    return Hook("pre_reason", run, name="context.pipeline")

