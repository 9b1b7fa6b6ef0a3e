"""Running a command the way ``shell`` and ``run_workflow`` do: sandboxed, timed, capped.

The command runs through a :class:`~thinkloop.sandbox.Sandbox` in its own process group
(``start_new_session``); a timeout or a cancelled run kills that group, and with bwrap the
sandbox's PID namespace ends with it, so nothing the command started survives (``setsid``
grandchildren included). Output is stdout and stderr merged into a pipe *we* own: it is kept
up to a cap, drained beyond it, and closed by us after a short grace, so a leftover that holds
the pipe open can never keep the call waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from thinkloop.core.errors import ToolTimeoutError
from thinkloop.core.settings import host_environment
from thinkloop.sandbox import DEFAULT_ENV_ALLOW, SYSTEM_PATH, NoSandbox, Sandbox, allowed_env
from thinkloop.text import valid_text

# After the main process exits, how long its leftovers may keep the pipe open.
_DRAIN_GRACE_S = 0.5


@dataclass(frozen=True, slots=True)
class Interpreter:
    """The Python environment this process runs in, as a sandbox shows it to commands."""

    dirs: tuple[Path, ...]  # mounted read-only (the system's own /usr is there already)
    bin: str  # first on PATH: `python`, `pip` and the tools installed with them (pytest)


def interpreter(hide: Sequence[Path]) -> Interpreter:
    """This process's Python environment; none of its folders that holds one of ``hide`` (the
    workspaces' base with other users' folders, the person's home with its dot files) is
    shown."""
    # A venv's prefix holds its scripts; its base prefix, the interpreter they point at.
    prefix = Path(sys.prefix).resolve()
    dirs = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix)}
    shown = tuple(sorted(d for d in dirs if not d.is_relative_to("/usr")
                         and not any(h.is_relative_to(d) for h in hide)))
    return Interpreter(shown, str(prefix / "bin"))


def command_env(allow: Sequence[str], sandbox: Sandbox, **extra: str) -> dict[str, str]:
    """The environment of a command: allow-listed host names, a PATH that exists, ``extra``."""
    host = host_environment()
    path = SYSTEM_PATH if sandbox.name != "none" else host.get("PATH", SYSTEM_PATH)
    return allowed_env(allow, {"PATH": path, "TMPDIR": "/tmp", **extra}, host)


@dataclass(frozen=True, slots=True)
class ProcessResult:
    exit_code: int
    output: bytes
    total_bytes: int
    timed_out: bool

    def render(self, cap: int) -> str:
        text = valid_text(self.output)
        parts = [f"exit code: {self.exit_code}", text.rstrip("\n")]
        if self.total_bytes > len(self.output):
            parts.append(
                f"[output truncated: showed the first {len(self.output)} of "
                f"{self.total_bytes} bytes (cap {cap} bytes)]"
            )
        return "\n".join(p for p in parts if p)


class _Capture:
    """Reads the pipe: keeps ``cap`` bytes, counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap, self.buf, self.total = cap, bytearray(), 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.total += len(chunk)
            room = self.cap - len(self.buf)
            if room > 0:
                self.buf.extend(chunk[:room])


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _open_pipe() -> tuple[int, asyncio.StreamReader, asyncio.ReadTransport]:
    read_fd, write_fd = os.pipe()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(read_fd, "rb", 0))
    return write_fd, reader, transport


async def run_process(
    command: str,
    *,
    cwd: Path,
    timeout_s: float,
    cap: int,
    env: Mapping[str, str] | None = None,
    sandbox: Sandbox | None = None,
    read_only: Sequence[Path] = (),
) -> ProcessResult:
    """Run ``command`` through ``/bin/sh`` in ``sandbox``; the call ends by ``timeout_s``."""
    box: Sandbox = sandbox or NoSandbox()
    capture = _Capture(cap)
    async with box.launch(command, cwd=cwd, read_only=read_only) as argv:
        write_fd, reader, transport = await _open_pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=cwd,
                env=dict(env) if env is not None else command_env(DEFAULT_ENV_ALLOW, box),
                stdin=asyncio.subprocess.DEVNULL, stdout=write_fd, stderr=write_fd,
                start_new_session=True)
        except BaseException:
            transport.close()
            raise
        finally:
            os.close(write_fd)
        timed_out = await _supervise(proc, capture, reader, transport, timeout_s)
    return ProcessResult(proc.returncode or 0, bytes(capture.buf), capture.total, timed_out)


async def _supervise(
    proc: asyncio.subprocess.Process, capture: _Capture, reader: asyncio.StreamReader,
    transport: asyncio.ReadTransport, timeout_s: float,
) -> bool:
    """Wait for ``proc`` up to ``timeout_s`` while reading; kill its group; True on timeout."""
    draining = asyncio.ensure_future(capture.drain(reader))
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout_s):
                await proc.wait()  # the process only: we own the pipe
        except TimeoutError:
            timed_out = True
            _kill_group(proc)
        # Leftovers may still write; give them a moment, then stop listening.
        await asyncio.wait({draining}, timeout=_DRAIN_GRACE_S)
    finally:
        _kill_group(proc)
        transport.close()
        draining.cancel()
        await asyncio.gather(draining, return_exceptions=True)
        await proc.wait()
    return timed_out


async def run_confined(
    name: str,
    command: str,
    *,
    cwd: Path,
    timeout_s: float,
    cap: int,
    env: Mapping[str, str] | None = None,
    sandbox: Sandbox | None = None,
    read_only: Sequence[Path] = (),
) -> str:
    """``run_process`` rendered as an observation; a timeout raises with the partial output."""
    result = await run_process(command, cwd=cwd, timeout_s=timeout_s, cap=cap, env=env,
                               sandbox=sandbox, read_only=read_only)
    if result.timed_out:
        partial = valid_text(result.output)[-4000:]
        raise ToolTimeoutError(
            f"{name} timed out after {timeout_s:g}s; every process it started was killed. "
            f"Output so far:\n{partial}"
        )
    return result.render(cap)
