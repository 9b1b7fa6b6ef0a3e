"""The run registry: every run in progress, by id and by session, and a way to stop them.

GoClaw keeps ``activeRuns`` with ``RegisterRun`` / ``AbortRun`` (which checks the caller's
session) / ``AbortRunsForSession``; :class:`RunRegistry` is that, for the runs of one process.
An agent registers every run it starts (``Agent(registry=...)``, one per agent by default);
a finished run leaves the registry by itself. Aborting cancels the run: it ends ``cancelled``
and, like every cancelled run, saves nothing to its session, which stays as it was.

A run in another process is reached through the store instead (``thinkloop runs abort``):
see :mod:`thinkloop.runlog`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from thinkloop.core.errors import RunAccessError


class ActiveRun(Protocol):
    """What the registry needs of a run (a :class:`~thinkloop.loop.handle.RunHandle`)."""

    @property
    def run_id(self) -> str: ...

    @property
    def session_id(self) -> str | None: ...

    @property
    def done(self) -> bool: ...

    def cancel(self) -> None: ...

    def on_done(self, callback: Callable[[], None]) -> None: ...


class RunRegistry:
    """The runs in progress in this process. Share one between agents to see them all."""

    def __init__(self) -> None:
        self._runs: dict[str, ActiveRun] = {}

    def add(self, handle: ActiveRun) -> None:
        """Track ``handle`` until it ends (a run id is registered once)."""
        if handle.done:
            return
        if handle.run_id in self._runs:
            raise RunAccessError(f"run {handle.run_id} is registered already")
        self._runs[handle.run_id] = handle
        handle.on_done(lambda: self._drop(handle))

    def _drop(self, handle: ActiveRun) -> None:
        if self._runs.get(handle.run_id) is handle:
            del self._runs[handle.run_id]

    def get(self, run_id: str) -> ActiveRun | None:
        return self._runs.get(run_id)

    def active(self, session: str | None = None) -> list[ActiveRun]:
        """Runs in progress, oldest first; only ``session``'s when it is given."""
        return [h for h in self._runs.values() if session is None or h.session_id == session]

    def __len__(self) -> int:
        return len(self._runs)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs

    def abort(self, run_id: str, session: str | None = None) -> bool:
        """Cancel one run; ``False`` if it is not running here.

        With ``session`` the caller speaks for that session only: a run of another session is
        refused with :class:`RunAccessError` and keeps running.
        """
        handle = self._runs.get(run_id)
        if handle is None:
            return False
        if session is not None and handle.session_id != session:
            raise RunAccessError(f"run {run_id} belongs to another session; not aborted")
        handle.cancel()
        return True

    def abort_session(self, session: str) -> int:
        """Cancel every run of ``session``; how many were."""
        return self._abort(self.active(session))

    def abort_all(self) -> int:
        """Cancel every run in progress; how many were."""
        return self._abort(self.active())

    @staticmethod
    def _abort(handles: list[ActiveRun]) -> int:
        for h in handles:
            h.cancel()
        return len(handles)
