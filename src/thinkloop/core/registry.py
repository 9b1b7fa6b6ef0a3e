"""Hook stages, hooks, and an agent's hooks grouped by stage (with the plugins' hooks)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from thinkloop.core.errors import HookFailed
from thinkloop.core.events import HookErrored

if TYPE_CHECKING:
    from thinkloop.core.contexts import HookContext
    from thinkloop.core.plugins import PluginFailure

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
        from thinkloop.core.errors import ConfigError

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
    from thinkloop.core.plugins import load_plugins

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
                # Most hooks are plain functions returning None: skip the (slow) awaitable test.
                if value is not None and inspect.isawaitable(value):
                    await value
            except Exception as exc:
                ctx.emit(HookErrored, stage=ctx.stage, hook=hook.label,
                         error=f"{type(exc).__name__}: {exc}")
                if hook.critical:
                    raise HookFailed(f"critical hook {hook.label} failed: {exc}") from exc
            if ctx.stop_reason is not None:
                return
