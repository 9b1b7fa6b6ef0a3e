"""What a guard is: one concern (a budget, a gate, a check) that adds hooks to the loop."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from thinkloop.hooks import Hook


@runtime_checkable
class Guard(Protocol):
    """A guard contributes its hooks, in the order they must run within each stage.

    Hooks are registered once per agent and shared by its runs, so a guard that remembers
    anything about one run keys it by the run (:class:`~thinkloop.guard.run_memory.RunMemory`).
    """

    def hooks(self) -> list[Hook]: ...
