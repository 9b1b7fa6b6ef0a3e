"""OrcBot's message discipline: which tools talk to people, and how much they may.

- Channel tools: ``send_message`` and any ``send_*`` tool of the run, unless configured.
  Their presence turns on the transparency nudge (guard/nudges.py) and, for channel tasks,
  the NO_SEND review code (guard/review.py).
- At most ``max_per_run`` (10) messages per run, ``time_capsule_max`` (20) in time-capsule
  mode; a call past the limit is answered with an error and not sent (``pre_tool``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from thinkloop.core.events import PolicyDenied
from thinkloop.core.types import ToolResult
from thinkloop.guard.budget import StepBudgetSettings, capsule_active
from thinkloop.guard.run_memory import RunMemory
from thinkloop.hooks import Hook, HookContext, ToolHookContext

CHANNEL_TOOL_GLOBS = ("send_message", "send_*")
LIMIT_REACHED = ("Message limit reached: at most {n} messages may be sent per task, and this "
                 "one was not sent. Put everything that is left into your final answer.")


def channel_tools(configured: tuple[str, ...] | None, tools: Iterable[str]) -> tuple[str, ...]:
    """The run's tools that send to people: ``configured`` (None: detect by name)."""
    if configured is not None:
        return configured
    return _detected(tuple(tools))


@functools.lru_cache(maxsize=64)
def _detected(tools: tuple[str, ...]) -> tuple[str, ...]:
    # Asked before every tool call; an agent's tool names do not change between calls.
    return tuple(t for t in tools if any(fnmatchcase(t, g) for g in CHANNEL_TOOL_GLOBS))


def run_channel_tools(configured: tuple[str, ...] | None, ctx: HookContext) -> tuple[str, ...]:
    return channel_tools(configured, ctx.cfg.tools)


class RunChannels:
    """:func:`run_channel_tools` for a guard asking before every call or tool call: worked
    out once per tool set (an agent's runs share one), not from a new tuple of the run's tool
    names each time (the cache's key, hashed name by name)."""

    def __init__(self, configured: tuple[str, ...] | None) -> None:
        self.configured = configured
        self._kept: tuple[object, int, tuple[str, ...]] | None = None

    def __call__(self, ctx: HookContext) -> tuple[str, ...]:
        tools = ctx.cfg.tools
        kept = self._kept
        # The same mapping, of the same size: a tool added to it in place is seen.
        if kept is not None and kept[0] is tools and kept[1] == len(tools):
            return kept[2]
        found = channel_tools(self.configured, tools)
        self._kept = (tools, len(tools), found)
        return found


@dataclass(frozen=True)
class MessageSettings:
    max_per_run: int = 10
    time_capsule_max: int = 20
    channel_tools: tuple[str, ...] | None = None  # None: send_message and send_* tools


class MessageLimit:
    def __init__(self, settings: MessageSettings | None = None,
                 steps: StepBudgetSettings | None = None) -> None:
        self.settings = settings or MessageSettings()
        self.steps = steps or StepBudgetSettings(enabled=False)
        self.sent: RunMemory[list[int]] = RunMemory(lambda: [0])
        self.channels = RunChannels(self.settings.channel_tools)

    def hooks(self) -> list[Hook]:
        return [Hook("pre_tool", self.check, name="guard.messages"),
                self.sent.drop_hook("guard.messages")]

    def limit(self, ctx: HookContext) -> int:
        s = self.settings
        return s.time_capsule_max if capsule_active(self.steps, ctx) else s.max_per_run

    def check(self, ctx: ToolHookContext) -> None:
        call = ctx.call
        if call is None or ctx.result is not None:
            return
        if call.name not in self.channels(ctx):
            return
        count = self.sent.get(ctx)
        limit = self.limit(ctx)
        if count[0] >= limit:
            ctx.emit(PolicyDenied, guard="max_messages", tool=call.name, id=call.id,
                     reason=f"more than {limit} messages in one task")
            ctx.result = ToolResult(call, LIMIT_REACHED.format(n=limit), is_error=True)
            return
        count[0] += 1
