"""Per-run memory for guards whose hooks are shared by every run of an agent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from thinkloop.hooks import Hook, HookContext

T = TypeVar("T")


class RunMemory(Generic[T]):
    """A value per run, made on first use and dropped when the run delivers its result.

    Hooks are registered once per agent, so anything a guard remembers about one run must be
    keyed by that run; ``drop_hook`` (a ``pre_output`` hook, which every run reaches) frees it.
    """

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._data: dict[str, T] = {}

    def get(self, ctx: HookContext) -> T:
        value = self._data.get(ctx.run_id)
        if value is None:
            value = self._data[ctx.run_id] = self._factory()
        return value

    def drop(self, ctx: HookContext) -> None:
        self._data.pop(ctx.run_id, None)

    def __len__(self) -> int:
        return len(self._data)

    def drop_hook(self, name: str) -> Hook:
        return Hook("pre_output", self.drop, name=f"{name}.cleanup")
