"""Channels: where an agent's messages go and where a human's answers come from.

``send_message``, ``ask_human`` (Stingyclaw's ask_boss) and approval prompts all talk to people
through a :class:`Channel`. Built in: :class:`ConsoleChannel` (a terminal), :class:`WebhookChannel`
(an HTTP endpoint, answers inline or later through :meth:`WebhookChannel.answer`) and
:class:`CallbackChannel` (plain async functions, for apps embedding thinkloop).
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO, runtime_checkable

from thinkloop.core.errors import ChannelError


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message to a human."""

    text: str
    recipient: str | None = None
    run_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Channel(Protocol):
    name: str

    async def send(self, message: Outgoing) -> None: ...

    async def ask(self, question: Outgoing, timeout_s: float | None = None) -> str: ...


@dataclass
class ConsoleChannel:
    """A terminal: messages are written to ``out``, answers read as one line from ``inp``."""

    name: str = "console"
    inp: TextIO = field(default_factory=lambda: sys.stdin)
    out: TextIO = field(default_factory=lambda: sys.stdout)
    prefix: str = "[agent] "
    # True when the terminal is the requester's own (``thinkloop run``): sending then needs no
    # approval, as it says no more than the answer would (tools/builtin/messaging.py).
    reaches_requester_only: bool = False

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    async def send(self, message: Outgoing) -> None:
        to = f"(to {message.recipient}) " if message.recipient else ""
        await asyncio.to_thread(self._write, f"{self.prefix}{to}{message.text}\n")

    async def ask(self, question: Outgoing, timeout_s: float | None = None) -> str:
        await asyncio.to_thread(self._write, f"{self.prefix}{question.text}\n> ")
        try:
            async with asyncio.timeout(timeout_s):
                line = await asyncio.to_thread(self.inp.readline)
        except TimeoutError:
            raise ChannelError(f"no answer on the console within {timeout_s:g}s") from None
        if not line:
            raise ChannelError("the console closed before an answer was given")
        return line.rstrip("\r\n")


@dataclass
class WebhookChannel:
    """POSTs JSON to ``url``. An answer comes back inline (``{"answer": ...}`` in the response)
    or later, when the receiving system calls :meth:`answer` with the question's id."""

    url: str
    name: str = "webhook"
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0
    _pending: dict[str, asyncio.Future[str]] = field(default_factory=dict)

    async def _post(self, payload: dict[str, Any]) -> Any:
        import httpx  # only webhook channels need it; importing it costs ~100 ms

        try:
            async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                r = await client.post(self.url, json=payload, headers=dict(self.headers))
        except httpx.HTTPError as exc:
            raise ChannelError(f"webhook {self.url} unreachable: {exc}") from None
        if r.status_code >= 300:
            raise ChannelError(f"webhook {self.url} answered HTTP {r.status_code}")
        try:
            return r.json() if r.content else None
        except ValueError:
            return None

    @staticmethod
    def _payload(kind: str, m: Outgoing) -> dict[str, Any]:
        return {"type": kind, "text": m.text, "recipient": m.recipient, "run_id": m.run_id,
                "user_id": m.user_id, "session_id": m.session_id, "meta": dict(m.meta)}

    async def send(self, message: Outgoing) -> None:
        await self._post(self._payload("message", message))

    async def ask(self, question: Outgoing, timeout_s: float | None = None) -> str:
        qid = uuid.uuid4().hex
        waiter: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._pending[qid] = waiter
        try:
            body = await self._post({**self._payload("question", question), "id": qid})
            if isinstance(body, dict) and isinstance(body.get("answer"), str):
                return str(body["answer"])
            async with asyncio.timeout(timeout_s):
                return await waiter
        except TimeoutError:
            raise ChannelError(f"no answer to question {qid} within {timeout_s:g}s") from None
        finally:
            self._pending.pop(qid, None)

    def answer(self, question_id: str, text: str) -> bool:
        """Deliver a late answer; False when no question with that id is waiting."""
        waiter = self._pending.get(question_id)
        if waiter is None or waiter.done():
            return False
        waiter.set_result(text)
        return True


@dataclass
class CallbackChannel:
    """Messages and questions handed to async functions supplied by the host application."""

    on_send: Callable[[Outgoing], Awaitable[None]]
    on_ask: Callable[[Outgoing], Awaitable[str]] | None = None
    name: str = "callback"

    async def send(self, message: Outgoing) -> None:
        await self.on_send(message)

    async def ask(self, question: Outgoing, timeout_s: float | None = None) -> str:
        if self.on_ask is None:
            raise ChannelError(f"channel {self.name!r} cannot ask questions")
        try:
            async with asyncio.timeout(timeout_s):
                return await self.on_ask(question)
        except TimeoutError:
            raise ChannelError(f"no answer within {timeout_s:g}s") from None
