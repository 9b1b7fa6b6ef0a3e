"""Running a command the way ``shell`` and ``run_workflow`` do: confined, timed, capped.

The command runs in its own process group (``start_new_session``) so a timeout or a cancelled
run kills everything it started, grandchildren included. Output is stdout and stderr merged,
kept up to a cap and drained beyond it so a chatty child never blocks on a full pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thinkloop.errors import ToolTimeoutError

_SECRET = re.compile(r"(_KEY|_TOKEN)$|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# After the main process exits, how long its leftovers may keep the pipe open.
_DRAIN_GRACE_S = 0.5


def scrubbed_env(
    extra: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a command sees: ours minus anything that looks like a credential."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not _SECRET.search(k)}
    env.update(extra or {})
    return env


@dataclass(frozen=True, slots=True)
class ProcessResult:
    exit_code: int
    output: bytes
    total_bytes: int
    timed_out: bool

    def render(self, cap: int) -> str:
        text = self.output.decode("utf-8", errors="replace")
        parts = [f"exit code: {self.exit_code}", text.rstrip("\n")]
        if self.total_bytes > len(self.output):
            parts.append(
                f"[output truncated: showed the first {len(self.output)} of "
                f"{self.total_bytes} bytes (cap {cap} bytes)]"
            )
        return "\n".join(p for p in parts if p)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _poll_exit(proc: asyncio.subprocess.Process) -> None:
    while proc.returncode is None:  # noqa: ASYNC110 - nothing to wait on but the poll
        await asyncio.sleep(0.02)


async def _exited(proc: asyncio.subprocess.Process, reader: asyncio.Future[int]) -> None:
    """Until the main process has exited.

    ``proc.wait()`` alone cannot tell: on Python 3.11 it also waits for every pipe to close,
    which a background grandchild can hold open for ever. So: the output closing (the usual
    case, no added latency) or a poll of the exit status, whichever comes first.
    """
    poll: asyncio.Future[Any] = asyncio.ensure_future(_poll_exit(proc))
    waiting: set[asyncio.Future[Any]] = {reader, poll}
    try:
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if reader.done():
            await proc.wait()
    finally:
        poll.cancel()
        await asyncio.gather(poll, return_exceptions=True)


async def _read_capped(stream: asyncio.StreamReader, cap: int, buf: bytearray) -> int:
    total = 0
    while chunk := await stream.read(65536):
        total += len(chunk)
        room = cap - len(buf)
        if room > 0:
            buf.extend(chunk[:room])
    return total


async def run_process(
    command: str,
    *,
    cwd: Path,
    timeout_s: float,
    cap: int,
    env: Mapping[str, str] | None = None,
) -> ProcessResult:
    """Run ``command`` through ``/bin/sh``; kill its whole process group on timeout or cancel."""
    proc = await asyncio.create_subprocess_shell(
        command,
        cwd=cwd,
        env=dict(env) if env is not None else scrubbed_env(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    buf = bytearray()
    reader = asyncio.ensure_future(_read_capped(proc.stdout, cap, buf))
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout_s):
                await _exited(proc, reader)
        except TimeoutError:
            timed_out = True
            _kill_group(proc)
        # Background children may hold the pipe open; give them a moment, then end them.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), _DRAIN_GRACE_S)
    finally:
        _kill_group(proc)
        await proc.wait()
        total = await reader
    return ProcessResult(proc.returncode or 0, bytes(buf), total, timed_out)


async def run_confined(
    name: str,
    command: str,
    *,
    cwd: Path,
    timeout_s: float,
    cap: int,
    env: Mapping[str, str] | None = None,
) -> str:
    """``run_process`` rendered as an observation; a timeout raises with the partial output."""
    result = await run_process(command, cwd=cwd, timeout_s=timeout_s, cap=cap, env=env)
    if result.timed_out:
        partial = result.output.decode("utf-8", errors="replace")[-4000:]
        raise ToolTimeoutError(
            f"{name} timed out after {timeout_s:g}s; its process group was killed. "
            f"Output so far:\n{partial}"
        )
    return result.render(cap)
