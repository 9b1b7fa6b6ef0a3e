"""Hook stages around the loop (CortexPrism's ten).

A hook is a plain sync or async function of one argument, the typed context of its stage. It
may observe, modify the context's mutable fields, or stop the run with ``ctx.stop(reason)``.
Built-in guards, memory injection and post-turn jobs are hooks too, so the loop itself stays a
short list of phases.

==============  =====================================  ==========================================
stage           when                                   context (mutable fields)
==============  =====================================  ==========================================
pre_assess      before anything, once per run          AssessContext (task, system_prompt)
post_assess     after assessment, before step 1        AssessContext
pre_reason      before each model call                 ReasonContext (messages, tools, settings)
post_reason     after each model call                  ReasonContext (+ response)
pre_tool        before each tool call                  ToolHookContext (call; set result to skip)
post_tool       after each tool call                   ToolHookContext (result)
pre_reflect     before a final answer is accepted      ReflectContext (text; ``reject`` to go on)
post_reflect    after it was accepted                  ReflectContext
pre_output      before the result is delivered         OutputContext (text, output, silent)
post_output     after the run ended, off the hot path  OutputContext
==============  =====================================  ==========================================

A hook that raises is reported as a ``hook.failed`` event and skipped, unless registered with
``critical=True``, in which case the run fails. A stop at ``pre_output`` withholds the answer
(unless the hook wrote a replacement); ``post_output`` runs after delivery and cannot stop.

Installed packages register hooks for every agent through the entry point group
``thinkloop.hooks`` (see :func:`entry_point_hooks`); they run before the agent's own hooks.
``Agent(plugins=False)`` leaves them out.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, Literal, ParamSpec, get_args

from thinkloop.events import Event, HookErrored, LlmRequest, LlmResponse
from thinkloop.types import Message, ModelResponse, RunStatus, ToolCall, ToolResult, ToolSpec

if TYPE_CHECKING:
    from thinkloop.loop.state import RunConfig, RunState
    from thinkloop.models.base import Model, ModelSettings
    from thinkloop.plugins import PluginFailure
    from thinkloop.tools.base import Tool

P = ParamSpec("P")

Stage = Literal[
    "pre_assess",
    "post_assess",
    "pre_reason",
    "post_reason",
    "pre_tool",
    "post_tool",
    "pre_reflect",
    "post_reflect",
    "pre_output",
    "post_output",
]
STAGES: tuple[Stage, ...] = get_args(Stage)


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


HookFn = Callable[[Any], Awaitable[None] | None]


@dataclass(frozen=True)
class Hook:
    stage: Stage
    fn: HookFn
    critical: bool = False
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or getattr(self.fn, "__qualname__", repr(self.fn))


HookSpec = Hook | HookFn


def normalise(hooks: Mapping[str, Iterable[HookSpec]] | Iterable[Hook] | None) -> list[Hook]:
    """Accept ``{"pre_tool": [fn, ...]}`` or a list of :class:`Hook`; check stage names."""
    if hooks is None:
        return []
    out: list[Hook] = []
    if isinstance(hooks, Mapping):
        for stage, fns in hooks.items():
            for fn in fns:
                out.append(fn if isinstance(fn, Hook) else Hook(_stage(stage), fn))
    else:
        out.extend(hooks)
    for h in out:
        _stage(h.stage)
    return out


def _stage(name: str) -> Stage:
    if name not in STAGES:
        from thinkloop.errors import ConfigError

        raise ConfigError(f"unknown hook stage {name!r}; stages: {', '.join(STAGES)}")
    return name


ENTRY_POINT_GROUP = "thinkloop.hooks"


def entry_point_hooks(group: str = ENTRY_POINT_GROUP) -> list[Hook]:
    """Hooks that installed plugins register for every agent, through ``group``.

    An entry point named after a stage points at a hook function (or a list of them), e.g.
    ``pre_tool = "my_plugin:audit"``; any other name points at a :class:`Hook`, a list of
    them, or a ``{stage: [fn, ...]}`` mapping. A plugin that cannot load is logged and
    skipped, as plugin tools are (``thinkloop tools`` names it).
    """
    return load_plugin_hooks(group)[0]


def load_plugin_hooks(
    group: str = ENTRY_POINT_GROUP, *, strict: bool = False
) -> tuple[list[Hook], list[PluginFailure]]:
    """The plugin hooks and the plugins that failed (raised instead if ``strict``)."""
    from thinkloop.plugins import load_plugins

    return load_plugins(group, lambda ep, obj: _plugin_hooks(ep.name, ep.value, obj),
                        strict=strict)


def _plugin_hooks(name: str, value: str, obj: Any) -> list[Hook]:
    if isinstance(obj, Hook):
        return [obj]
    if isinstance(obj, Mapping):
        return normalise(obj)
    if name in STAGES:
        fns = obj if isinstance(obj, list | tuple) else [obj]
        return [f if isinstance(f, Hook) else Hook(_stage(name), _callable(f), name=value)
                for f in fns]
    if isinstance(obj, list | tuple) and all(isinstance(h, Hook) for h in obj):
        return normalise(obj)
    raise TypeError("expected a Hook, a list of Hooks or a {stage: [fn]} mapping, or an "
                    f"entry point named after a stage ({', '.join(STAGES)}); got {obj!r}")


def _callable(fn: Any) -> HookFn:
    if not callable(fn):
        raise TypeError(f"{fn!r} is not callable")
    return fn  # type: ignore[no-any-return]


class HookFailed(Exception):
    """A critical hook raised; the run fails with this error."""


class Hooks:
    """The hooks of one agent, grouped by stage, run in registration order."""

    def __init__(self, hooks: Iterable[Hook] = ()) -> None:
        self.by_stage: dict[str, list[Hook]] = {s: [] for s in STAGES}
        for h in hooks:
            self.add(h)

    def add(self, hook: Hook) -> None:
        self.by_stage[hook.stage].append(hook)

    def __contains__(self, stage: str) -> bool:
        return bool(self.by_stage.get(stage))

    async def run(self, ctx: HookContext) -> None:
        for hook in self.by_stage[ctx.stage]:
            try:
                value = hook.fn(ctx)
                if inspect.isawaitable(value):
                    await value
            except Exception as exc:
                ctx.emit(HookErrored, stage=ctx.stage, hook=hook.label,
                         error=f"{type(exc).__name__}: {exc}")
                if hook.critical:
                    raise HookFailed(f"critical hook {hook.label} failed: {exc}") from exc
            if ctx.stop_reason is not None:
                return
