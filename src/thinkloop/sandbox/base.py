"""What every sandbox shares: its limits, the environment a command gets, and the protocol.

A sandbox turns a shell command into the argument vector that runs it confined. The process
itself (pipes, timeout, killing) belongs to :mod:`thinkloop.tools.builtin.process`.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

MIB = 1024 * 1024

# Inside a sandbox the host's PATH may name folders that are not mounted.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Per-command limits (rlimits inside the sandbox; the wall-clock timeout is the caller's)."""

    memory_bytes: int = 4096 * MIB
    cpu_s: int = 300
    max_processes: int = 256
    file_bytes: int = 1024 * MIB
    network: bool = False

    def describe(self) -> str:
        net = "allowed" if self.network else "none (no network interface but loopback)"
        return (f"memory {self.memory_bytes // MIB} MiB of address space per process, "
                f"{self.cpu_s} s of CPU per process, at most {self.max_processes} processes, "
                f"files up to {self.file_bytes // MIB} MiB; network: {net}")


# Sandboxed commands running at once (issue 30: 150 parallel shell calls started 150 sandboxes,
# 600 processes): per run, and per process across every run and agent.
SANDBOXES_PER_RUN = 8
SANDBOXES_PER_PROCESS = 32
# Per event loop, which is per process in practice; the one state shared across agents, since
# a cap per agent would not bound a gateway serving many.
_PROCESS_SLOTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop,
                                          dict[int, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary())


def _process_slots(size: int) -> asyncio.Semaphore:
    by_size = _PROCESS_SLOTS.setdefault(asyncio.get_running_loop(), {})
    return by_size.setdefault(size, asyncio.Semaphore(size))


@dataclass
class CommandSlots:
    """Waits until a command may start: at most ``per_run`` at once in one run and
    ``per_process`` in the process; the others wait their turn (their timeout runs only once
    they start)."""

    per_run: int = SANDBOXES_PER_RUN
    per_process: int = SANDBOXES_PER_PROCESS
    _runs: dict[str, tuple[asyncio.Semaphore, list[int]]] = field(default_factory=dict)

    @contextlib.asynccontextmanager
    async def hold(self, run_id: str) -> AsyncIterator[None]:
        run, users = self._runs.setdefault(run_id, (asyncio.Semaphore(self.per_run), [0]))
        users[0] += 1
        try:
            async with run, _process_slots(self.per_process):
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                self._runs.pop(run_id, None)


def allowed_env(
    allow: Sequence[str],
    extra: Mapping[str, str] | None,
    base: Mapping[str, str],
) -> dict[str, str]:
    """The environment a command sees: only the ``allow``-listed host names, plus ``extra``.

    An allow list rather than a deny pattern: a credential under a name nobody thought of
    (``DATABASE_URL`` with a password, ``AWS_ACCESS_KEY_ID``, ``*_PAT``) never gets through.
    ``base`` is the host environment (``thinkloop.settings.host_environment()``).
    """
    env = {k: base[k] for k in allow if k in base}
    env.update(extra or {})
    return env


class Sandbox(Protocol):
    """Runs a shell command confined: ``launch`` yields the argv to execute."""

    @property
    def name(self) -> str: ...

    def describe(self) -> str:
        """What the confinement is, in words for the model's system prompt."""
        ...

    def launch(
        self, command: str, *, cwd: Path, read_only: Sequence[Path] = ()
    ) -> AbstractAsyncContextManager[list[str]]:
        """The argv running ``command`` with ``cwd`` writable; cleans up on exit."""
        ...


@dataclass(frozen=True)
class NoSandbox:
    """``sandbox="none"``: the command runs as this process's user, with the host's view."""

    name: str = "none"

    def describe(self) -> str:
        return ""

    @contextlib.asynccontextmanager
    async def launch(
        self, command: str, *, cwd: Path, read_only: Sequence[Path] = ()
    ) -> AsyncIterator[list[str]]:
        yield ["/bin/sh", "-c", command]
