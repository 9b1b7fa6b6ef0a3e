"""``thinkloop host``: one confined ``thinkloop run --stdio`` process per run, retried.

The host writes the payload (secrets included: they travel nowhere else) on the child's stdin,
forwards the person's follow-up messages as further lines, and hands every output block the
child writes to ``on_block`` as it comes. A run whose process exits non-zero (a failed run, a
crash, a kill, a timeout) is started again after an exponential backoff, as the seed's host
does: 5 s, 10 s, 20 s... After ``retries`` retries the host gives up and tells the person (a
``notification`` block and ``notify``). A block saying ``"retry": false`` (a payload that can
never work) is not retried. The follow-ups a failed attempt was given are given again to the
retry, after its payload and in their order, once each (an answer without its question's id:
the retry asks its own question again).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from thinkloop.core.errors import ChannelError
from thinkloop.workers.blocks import BlockReader
from thinkloop.workers.confine import Confinement
from thinkloop.workers.retry import RetryPolicy

ATTEMPT_TIMEOUT_S = 1800.0
STDERR_TAIL = 2000

OnBlock = Callable[[dict[str, Any]], Awaitable[None]]
Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
# Follow-up messages for the running child; None: the person's input ended.
FollowUps = asyncio.Queue[dict[str, Any] | None]


@dataclass(frozen=True)
class Attempt:
    number: int
    code: int | None
    final: dict[str, Any] | None  # the last block the child wrote
    error: str

    @property
    def ok(self) -> bool:
        return self.code == 0 and self.final is not None and self.final.get("status") != "error"

    @property
    def retryable(self) -> bool:
        return self.final is None or self.final.get("retry", True) is not False


@dataclass(frozen=True)
class HostResult:
    status: str  # success | gave_up
    attempts: tuple[Attempt, ...]

    @property
    def final(self) -> dict[str, Any] | None:
        return self.attempts[-1].final if self.attempts else None


def group_of(payload: dict[str, Any]) -> str:
    """Whose data folder a run uses: the seed's group, else the user, else ``default``."""
    for key in ("groupFolder", "group", "user"):
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return "default"


@dataclass
class HostRunner:
    confinement: Confinement
    on_block: OnBlock
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    notify: Notify | None = None
    attempt_timeout_s: float = ATTEMPT_TIMEOUT_S
    on_stderr: Callable[[str], None] | None = None
    _input_done: bool = field(default=False, init=False)

    async def run(self, payload: dict[str, Any], follow_ups: FollowUps | None = None
                  ) -> HostResult:
        """Run ``payload`` until it succeeds or the retries are spent."""
        attempts: list[Attempt] = []
        given: list[dict[str, Any]] = []  # the follow-ups the attempts were given, in order
        while True:
            attempt = await self._attempt(payload, len(attempts) + 1, follow_ups, given)
            attempts.append(attempt)
            if attempt.ok:
                return HostResult("success", tuple(attempts))
            if not attempt.retryable or len(attempts) > self.retry.retries:
                await self._give_up(payload, attempts)
                return HostResult("gave_up", tuple(attempts))
            delay = self.retry.delay(len(attempts))
            await self.on_block({"status": "running", "type": "retry", "result": None,
                                 "attempt": attempt.number, "delay_s": delay,
                                 "error": attempt.error})
            await asyncio.sleep(delay)

    async def _give_up(self, payload: dict[str, Any], attempts: list[Attempt]) -> None:
        last = attempts[-1].error
        text = (f"Sorry, I could not finish this: the run failed {len(attempts)} time(s) "
                f"(last error: {last}). Send a new message to try again.")
        doc = {"status": "error", "type": "notification", "result": None, "error": text,
               "attempts": len(attempts)}
        await self.on_block(doc)
        if self.notify is None:
            return
        where = {"group": group_of(payload), "chat": payload.get("chatJid"),
                 "session": payload.get("sessionId") or payload.get("session"),
                 "attempts": len(attempts)}
        try:
            await self.notify(text, where)
        except (ChannelError, OSError) as exc:  # the block above already told the person
            await self.on_block({"status": "error", "type": "error", "result": None,
                                 "error": f"the notification could not be sent: {exc}"})

    async def _attempt(self, payload: dict[str, Any], number: int,
                       follow_ups: FollowUps | None, given: list[dict[str, Any]]) -> Attempt:
        argv, env = self.confinement.command(group_of(payload))
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env, limit=8 * 1024 * 1024)
        await self.on_block({"status": "running", "type": "attempt", "result": None,
                             "attempt": number, "pid": proc.pid})
        assert proc.stdin is not None
        proc.stdin.write(orjson.dumps(payload) + b"\n")
        for item in given:  # what the failed attempts were told, told again
            proc.stdin.write(orjson.dumps(_replayed(item)) + b"\n")
        forward = asyncio.create_task(self._forward(proc, follow_ups, given))
        tail: list[str] = []
        last: dict[str, Any] | None = None
        code: int | None = None
        error = ""
        try:
            async with asyncio.timeout(self.attempt_timeout_s):
                last, _ = await asyncio.gather(self._read(proc), self._stderr(proc, tail))
                code = await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            error = f"no answer within {self.attempt_timeout_s:g}s"
        finally:
            forward.cancel()
        if not error:
            error = _why(code, last, "".join(tail))
        return Attempt(number, code, last, error)

    async def _read(self, proc: asyncio.subprocess.Process) -> dict[str, Any] | None:
        assert proc.stdout is not None
        reader, last = BlockReader(), None
        async for raw in proc.stdout:
            for block in reader.feed(raw.decode(errors="replace")):
                last = block
                await self.on_block(block)
        return last

    async def _stderr(self, proc: asyncio.subprocess.Process, tail: list[str]) -> None:
        assert proc.stderr is not None
        async for raw in proc.stderr:
            line = raw.decode(errors="replace")
            tail.append(line)
            while sum(map(len, tail)) > STDERR_TAIL and len(tail) > 1:
                tail.pop(0)
            if self.on_stderr is not None:
                self.on_stderr(line)

    async def _forward(self, proc: asyncio.subprocess.Process,
                       follow_ups: FollowUps | None, given: list[dict[str, Any]]) -> None:
        """The person's follow-ups to the child's stdin (each kept in ``given``, for a retry);
        closed when their input ends."""
        assert proc.stdin is not None
        with contextlib.suppress(ConnectionError, BrokenPipeError):
            await proc.stdin.drain()
            while follow_ups is not None and not self._input_done:
                item = await follow_ups.get()
                if item is None:
                    self._input_done = True
                    break
                given.append(item)  # before the write: a dead child's missed line is replayed
                proc.stdin.write(orjson.dumps(item) + b"\n")
                await proc.stdin.drain()
            proc.stdin.close()


def _replayed(item: dict[str, Any]) -> dict[str, Any]:
    """A follow-up as a retry gets it: an answer loses its question's id (the retry asks its
    question anew, under a new id, and this answers it)."""
    if item.get("type") == "answer":
        return {k: v for k, v in item.items() if k != "id"}
    return item


def _why(code: int | None, last: dict[str, Any] | None, stderr: str) -> str:
    if code is not None and code < 0:
        return f"the run's process was killed (signal {-code})"
    if last is not None and last.get("status") == "error" and last.get("error"):
        return str(last["error"])
    if code == 0 and last is None:
        return "the run's process ended without an answer"
    lines = stderr.strip().splitlines()
    detail = f": {lines[-1][:300]}" if lines else ""
    return f"the run's process exited with code {code}{detail}"
