"""What every sandbox shares: its limits, the environment a command gets, and the protocol.

A sandbox turns a shell command into the argument vector that runs it confined. The process
itself (pipes, timeout, killing) belongs to :mod:`thinkloop.tools.builtin.process`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
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
