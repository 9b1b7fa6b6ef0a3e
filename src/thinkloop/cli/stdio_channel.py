"""Container mode's way to the person: output blocks out, follow-up lines in.

``send_message`` and ``send_voice`` write a block on stdout (and, with an IPC folder, the
seed's JSON file in ``messages/`` or ``voice/``); ``ask_human`` writes a ``question`` block and
waits for the next message from the host: a further JSON line on stdin or a JSON file in the
IPC folder's ``input/``. A message that answers no question is the next turn of the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from thinkloop.core.channel import Outgoing
from thinkloop.core.errors import ChannelError, ToolExecutionError
from thinkloop.core.tool import Tool, ToolContext, make_tool
from thinkloop.workers import blocks
from thinkloop.workers.blocks import Markers

IPC_POLL_S = 0.5  # the seed's host polls its IPC folders twice a second
# Where an input file goes once read: kept until the run succeeds, so that a retry of a run
# that died is given it again (as the host gives its stdin lines again).
TAKEN = ".taken"
MAX_VOICE_CHARS = 2000


class Redactor:
    """Cuts secret values out of text before it leaves the process."""

    def __init__(self, secrets: dict[str, str]) -> None:
        # Longest first, so a secret that contains another is cut whole.
        self.values = sorted((v for v in secrets.values() if len(v) >= 4), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, "[redacted]")
        return text


class Output:
    """Writes marker blocks to ``out`` (from any thread); each block is one JSON line."""

    def __init__(self, out: TextIO, redact: Redactor, markers: Markers = blocks.THINKLOOP,
                 extra: dict[str, Any] | None = None, seed: bool = False) -> None:
        self.out, self.redact, self.markers = out, redact, markers
        self.extra = extra or {}
        self.seed = seed
        self._lock = threading.Lock()

    def block(self, data: dict[str, Any]) -> None:
        if self.seed and data.get("status") == "running":
            data = {**data, "status": "success"}  # the seed's hosts know success and error
        text = self.redact(blocks.render({**data, **self.extra}, self.markers))
        with self._lock:
            self.out.write(text)
            self.out.flush()


class FollowUp(BaseModel):
    """One line (or IPC file) from the host after the payload."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["message", "answer", "close"] = "message"
    text: str | None = Field(None, max_length=100_000)
    prompt: str | None = Field(None, max_length=100_000)  # the payload's word for it
    id: str | None = None

    @property
    def body(self) -> str:
        return (self.text or self.prompt or "").strip()


@dataclass
class Inbox:
    """Follow-ups from stdin and the IPC folder, in arrival order, on the run's loop."""

    output: Output
    queue: asyncio.Queue[FollowUp] = field(default_factory=asyncio.Queue)
    closed: bool = False
    ipc: Path | None = None

    def start(self, inp: TextIO, ipc: Path | None) -> list[asyncio.Task[None]]:
        loop = asyncio.get_running_loop()
        self.ipc = ipc
        if ipc is not None:  # what an attempt that died had read, first and in order
            for item in self._taken(ipc / "input" / TAKEN):
                self.queue.put_nowait(item)
        put = functools.partial(_call_soon, loop, self.queue.put_nowait)
        threading.Thread(target=self._read_lines, args=(inp, put), daemon=True,
                         name="stdio-follow-ups").start()
        return [asyncio.create_task(self._poll(ipc / "input"))] if ipc is not None else []

    def _read_lines(self, inp: TextIO, put: Callable[[FollowUp], None]) -> None:
        for line in iter(inp.readline, ""):
            if line.strip():
                item = self._parse(line)
                if item is not None:
                    put(item)
        put(FollowUp(type="close"))

    def _parse(self, raw: str | bytes) -> FollowUp | None:
        try:
            item = FollowUp.model_validate(orjson.loads(raw))
        except (orjson.JSONDecodeError, ValidationError) as exc:
            self.output.block({"status": "running", "type": "error", "result": None,
                               "error": f"follow-up ignored, not a JSON message: {exc}"[:300]})
            return None
        return item if item.type == "close" or item.body else None

    async def _poll(self, folder: Path) -> None:
        while True:
            for item in await asyncio.to_thread(self._take_files, folder):
                self.queue.put_nowait(item)
            await asyncio.sleep(IPC_POLL_S)

    def _take_files(self, folder: Path) -> list[FollowUp]:
        out: list[FollowUp] = []
        with contextlib.suppress(FileNotFoundError):
            for path in sorted(folder.iterdir()):
                if path.name == "_close":  # the seed's sentinel: no more input
                    path.unlink(missing_ok=True)
                    out.append(FollowUp(type="close"))
                elif path.suffix == ".json":
                    raw = path.read_bytes()
                    (folder / TAKEN).mkdir(exist_ok=True)
                    os.replace(path, folder / TAKEN / path.name)
                    item = self._parse(raw)
                    if item is not None:
                        out.append(item)
        return out

    def _taken(self, folder: Path) -> list[FollowUp]:
        """The input files an earlier attempt read (an answer without its old question's id:
        this attempt asks its question anew)."""
        out: list[FollowUp] = []
        with contextlib.suppress(FileNotFoundError):
            for path in sorted(folder.glob("*.json")):
                item = self._parse(path.read_bytes())
                if item is not None:
                    out.append(item.model_copy(update={"id": None}) if item.type == "answer"
                               else item)
        return out

    def done(self) -> None:
        """The run succeeded: what it read is not given again."""
        if self.ipc is not None:
            taken = self.ipc / "input" / TAKEN
            with contextlib.suppress(FileNotFoundError):
                for path in taken.iterdir():
                    path.unlink(missing_ok=True)
                taken.rmdir()

    async def next(self, timeout_s: float | None) -> FollowUp | None:
        """The next follow-up, or None when none came in time or the host closed."""
        if self.closed:
            return None
        try:
            async with asyncio.timeout(timeout_s):
                item = await self.queue.get()
        except TimeoutError:
            return None
        if item.type == "close":
            self.closed = True
            return None
        return item

    def pending(self) -> FollowUp | None:
        """A follow-up already waiting, without waiting."""
        while not self.closed and not self.queue.empty():
            item = self.queue.get_nowait()
            if item.type == "close":
                self.closed = True
            else:
                return item
        return None


@dataclass
class Ipc:
    """The seed's IPC folder: what the agent says becomes a JSON file for the host's watcher."""

    root: Path
    chat: str | None = None

    def write(self, kind: Literal["messages", "voice"], text: str) -> None:
        folder = self.root / kind
        folder.mkdir(parents=True, exist_ok=True)
        doc = {"type": "voice" if kind == "voice" else "message", "chatJid": self.chat,
               "text": text, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        name = f"{time.time_ns()}-{uuid.uuid4().hex[:8]}"
        tmp = folder / f".{name}.tmp"
        tmp.write_bytes(orjson.dumps(doc))
        os.replace(tmp, folder / f"{name}.json")  # the watcher never reads half a file


@dataclass
class HostChannel:
    """The person behind the host: the only one this channel reaches, so sending needs no
    approval (it is what the answer itself does)."""

    output: Output
    inbox: Inbox
    ipc: Ipc | None = None
    name: str = "host"
    reaches_requester_only: bool = True

    def _say(self, kind: Literal["messages", "voice"], m: Outgoing, **extra: Any) -> None:
        block_type = "voice" if kind == "voice" else extra.pop("type", "message")
        if self.ipc is not None:  # the file first: a host that sees the block finds it
            self.ipc.write(kind, m.text)
        self.output.block({"status": "running", "type": block_type, "result": m.text,
                           "recipient": m.recipient, "run_id": m.run_id, **extra})

    async def send(self, message: Outgoing) -> None:
        self._say("messages", message)

    async def voice(self, message: Outgoing) -> None:
        self._say("voice", message)

    async def ask(self, question: Outgoing, timeout_s: float | None = None) -> str:
        qid = uuid.uuid4().hex[:12]
        self._say("messages", question, type="question", id=qid)
        while True:
            item = await self.inbox.next(timeout_s)
            if item is None:
                why = "the host closed its input" if self.inbox.closed else \
                    f"no answer within {timeout_s:g}s"
                raise ChannelError(f"{why} (question {qid})")
            if item.type == "message" or item.id in (None, qid):
                return item.body


def send_voice_tool(channel: HostChannel) -> Tool:
    async def send_voice(ctx: ToolContext, text: str) -> str:
        """Say something to the person as a voice note (the host speaks it).

        Args:
            text: what to say (at most 2000 characters)
        """
        if len(text) > MAX_VOICE_CHARS:
            raise ToolExecutionError(f"send_voice: at most {MAX_VOICE_CHARS} characters")
        await channel.voice(Outgoing(text, None, ctx.run_id, ctx.user_id, ctx.session_id))
        return "voice note sent"

    return make_tool(send_voice, idempotent=False)


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[[FollowUp], None],
               item: FollowUp) -> None:
    with contextlib.suppress(RuntimeError):  # the run ended and its loop closed
        loop.call_soon_threadsafe(fn, item)
