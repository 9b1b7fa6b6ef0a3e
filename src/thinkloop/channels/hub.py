"""The chat hub: a message from a person starts or continues a run on its chat's session, and
the run talks back through the hub: its answer, ``send_message``, ``ask_human`` and approval
prompts go to the chat the run serves, under the delivery rules of :mod:`.policy`.

The hub is the agents' one :class:`~thinkloop.core.channel.Channel` (named ``chat``) and their
:class:`~thinkloop.guard.approval.Approver`; runs are found by id, so one built agent serves
every chat of a platform.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from thinkloop.api import (
    Agent,
    ApprovalRequest,
    Decision,
    RunHandle,
    RunResult,
    Workspace,
    is_silent,
)
from thinkloop.channels.base import Address, Attachment, ChatAdapter, Inbound, split_text
from thinkloop.channels.config import ChannelSettings
from thinkloop.channels.policy import (
    NO_ORIGIN,
    ChatRun,
    refusal_for_sender,
    refusal_for_target,
    yes_no,
)
from thinkloop.core.channel import Outgoing
from thinkloop.errors import ChannelError
from thinkloop.events import Event, PolicyDenied

log = logging.getLogger("thinkloop.channels")
# The agent that answers in a chat (None: a scheduled run's, with no chat of its own).
AgentFor = Callable[[ChannelSettings, Address | None], Awaitable[Agent]]
SILENT = ("NO_REPLY", "NO_SEND")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class RunWatch(Protocol):
    """Someone else showing the hub's runs (the gateway's live runs, for the page and REST)."""

    def publish(self, event: Event) -> None: ...

    def finish(self, result: RunResult | None, error: str | None = None) -> None: ...


# ``Gateway.adopt``: (handle, user, agent, session) -> the watch the hub feeds.
Board = Callable[[RunHandle, str, str, str], RunWatch]


@dataclass
class _Waiting:
    kind: Literal["question", "approval"]
    token: str
    run: ChatRun
    future: asyncio.Future[str]


class ChatHub:
    name = "chat"

    def __init__(self, channels: Mapping[str, tuple[ChatAdapter, ChannelSettings]],
                 agents: AgentFor, workspace: Workspace | None = None,
                 board: Board | None = None) -> None:
        self.channels = dict(channels)
        self.board = board
        self.agents = agents
        self.workspace = workspace
        self.runs: dict[str, ChatRun] = {}
        self._waiting: dict[str, _Waiting] = {}  # by the chat's address key
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sent: dict[str, int] = {}  # messages each run has sent (max_messages)

    # --- people -> runs --------------------------------------------------------------------

    async def deliver(self, msg: Inbound) -> None:
        """Handle one message (never raises: a bad message must not stop the adapter)."""
        try:
            await self._deliver(msg)
        except Exception as exc:  # the details go to the log, not to whoever is in the chat
            log.exception("message from %s in %s failed", msg.sender, msg.where.key)
            await self._say(msg.where, "Sorry, that message could not be handled "
                                       f"({type(exc).__name__}).")

    async def _deliver(self, msg: Inbound) -> None:
        adapter, settings = self.channels[msg.where.platform]
        if not msg.addressed and msg.choice is None and msg.where.key not in self._waiting:
            return  # a group's chatter: not for the agent, and no refusal either
        refusal = refusal_for_sender(msg, settings)
        if refusal:
            log.info("refused %s in %s: %s", msg.user, msg.where.key, refusal)
            await self._say(msg.where, refusal)
            return
        if await self._answer(msg) or not msg.addressed or msg.choice is not None:
            return
        agent = await self.agents(settings, msg.where)
        task = self._task(msg)
        handle = agent.start(task, session=msg.where.key, user_id=msg.user)
        self._adopt(handle, ChatRun(adapter, settings, msg, (msg.where,)))

    async def start_scheduled(self, platform: str, task: str, deliver_to: Sequence[str],
                              user: str = "scheduler") -> RunHandle:
        """A run no person started (a schedule, an autonomous goal): it answers, and may send,
        only to ``deliver_to`` (``telegram:42`` or chat ids on ``platform``)."""
        adapter, settings = self.channels[platform]
        targets = tuple(Address.parse(t, platform) for t in deliver_to)
        if not targets:
            raise ChannelError("a scheduled run needs at least one chat to deliver to")
        agent = await self.agents(settings, None)
        handle = agent.start(task, session=f"{platform}:scheduled:{uuid.uuid4().hex[:8]}",
                             user_id=user)
        self._adopt(handle, ChatRun(adapter, settings, None, targets))
        return handle

    def _adopt(self, handle: RunHandle, run: ChatRun) -> None:
        """Follow ``handle`` for its chat (and show it on the board, when there is one)."""
        self.runs[handle.run_id] = run
        watch = None
        if self.board is not None:
            watch = self.board(handle, handle.user_id or "", run.settings.agent,
                               handle.session_id or "")
        self._spawn(self._follow(handle, run, watch))

    def _task(self, msg: Inbound) -> str:
        """The person's text, and where the files they attached were saved for the tools."""
        if not msg.attachments:
            return msg.text
        saved = [self._save(msg.user, a) for a in msg.attachments]
        listing = "; ".join(saved)
        return f"{msg.text}\n\n[Files the person attached, in your workspace: {listing}]".strip()

    def _save(self, user: str, a: Attachment) -> str:
        if self.workspace is None:
            return f"{a.name} ({a.mime}, {len(a.data)} bytes, not saved: no workspace)"
        stem, dot, ext = (_UNSAFE.sub("_", a.name).strip("._") or "file").rpartition(".")
        stem, ext = (stem, dot + ext) if stem else (ext, "")
        root = self.workspace.root(user) / "inbox"
        path, n = f"inbox/{stem}{ext}", 1
        while (root / path.removeprefix("inbox/")).exists():  # never overwrite an earlier file
            n += 1
            path = f"inbox/{stem}-{n}{ext}"
        self.workspace.write_bytes(user, path, a.data)
        return f"{path} ({a.mime}, {len(a.data)} bytes)"

    async def _answer(self, msg: Inbound) -> bool:
        """``msg`` answers a question or approval waiting in its chat: deliver it."""
        waiting = self._waiting.get(msg.where.key)
        if msg.choice is not None:
            token, _, value = msg.choice.removeprefix("ap:").partition(":")
            if waiting is None or waiting.token != token:
                await self._say(msg.where, "That question is no longer open.")
                return True
            text = value
        elif waiting is None:
            return False
        else:
            text = msg.text
        if not waiting.run.may_answer(msg.sender):
            if msg.choice is None:
                return False  # someone else talking in the chat: not an answer
            await self._say(msg.where, "Only the person who asked (or an admin) can answer.")
            return True
        if waiting.kind == "approval":
            verdict = yes_no(text)
            if verdict is None:
                await self._say(msg.where, "Please answer yes or no.")
                return True
            text = "y" if verdict else "n"
        if not waiting.future.done():
            waiting.future.set_result(text)
        return True

    # --- runs -> people --------------------------------------------------------------------

    async def _follow(self, handle: RunHandle, run: ChatRun, watch: RunWatch | None) -> None:
        typing = asyncio.get_running_loop().create_task(self._typing(handle, run))
        result: RunResult | None = None
        error: str | None = None
        try:
            async for event in handle:
                if watch is not None:
                    watch.publish(event)
                if isinstance(event, PolicyDenied) and event.guard == "max_messages":
                    await self._say(run.home, f"(Refused: {event.reason}.)")
            result = await handle.result()
        except Exception as exc:
            log.exception("run %s failed", handle.run_id)
            error = f"{type(exc).__name__}: {exc}"
            await self._say(run.home, f"Sorry, the run failed: {type(exc).__name__}")
        finally:
            typing.cancel()
            self.runs.pop(handle.run_id, None)
            self._sent.pop(handle.run_id, None)
            if watch is not None:
                watch.finish(result, error)
        if result is not None:
            await self._reply(run, result)

    async def _reply(self, run: ChatRun, result: RunResult) -> None:
        text = result.text.strip()
        if result.silent or is_silent(text) or text in SILENT:
            return  # NO_REPLY / NO_SEND: the run chose to say nothing
        if not result.ok:
            text = f"(The run ended {result.status}: {result.error or 'no answer'}.)"
        for target in (run.home,) if run.origin else run.deliver_to:
            await self._say(target, text)

    async def _typing(self, handle: RunHandle, run: ChatRun) -> None:
        while not handle.done:
            if run.home.key not in self._waiting:  # not while a person is being asked
                try:
                    await run.adapter.typing(run.home)
                except Exception as exc:  # a lost indicator is no reason to stop
                    log.warning("typing indicator in %s: %s", run.home.key, exc)
            await asyncio.sleep(run.settings.typing_every_s)

    async def send_to(self, target: str, text: str) -> None:
        """Send ``text`` to ``target`` (``platform:chat``) for a run executing elsewhere (a
        scheduled run on a worker, whose schedule named the target); a platform not served
        here is a ChannelError."""
        where = Address.parse(target, target.split(":", 1)[0])
        if where.platform not in self.channels:
            raise ChannelError(f"no channel {where.platform!r} here")
        await self._send(where, text)

    async def _say(self, where: Address, text: str) -> None:
        """Send ``text`` (split at the platform's limit); failures are logged, not raised."""
        try:
            await self._send(where, text)
        except Exception as exc:
            log.warning("could not send to %s: %s", where.key, exc)

    async def _send(self, where: Address, text: str) -> None:
        adapter = self.channels[where.platform][0]
        for piece in split_text(text, adapter.max_len):
            await adapter.send_text(where, piece)

    # --- the agents' Channel ---------------------------------------------------------------

    def _target(self, message: Outgoing) -> tuple[ChatRun, Address]:
        run = self.runs.get(message.run_id or "")
        if run is None:
            raise ChannelError(f"send refused: {NO_ORIGIN}")
        target = Address.parse(message.recipient, run.home.platform) if message.recipient \
            else run.home
        if target.platform not in self.channels:
            raise ChannelError(f"send refused: no channel {target.platform!r} here; "
                               f"available: {', '.join(self.channels)}")
        reason = refusal_for_target(run, target)
        if reason:
            raise ChannelError(f"send refused: {reason}")
        return run, target

    def count(self, run_id: str) -> None:
        """One more message of ``run_id``; past ``max_messages`` a ChannelError (not sent)."""
        run = self.runs.get(run_id)
        if run is None:
            return
        n = self._sent.get(run_id, 0) + 1
        if n > run.settings.max_messages:
            raise ChannelError(f"send refused: more than {run.settings.max_messages} messages "
                               "in one task; put the rest in your final answer")
        self._sent[run_id] = n

    async def send(self, message: Outgoing) -> None:
        try:
            _, target = self._target(message)
            self.count(message.run_id or "")
        except ChannelError as exc:
            origin = self.runs.get(message.run_id or "")
            if origin is not None:  # the person sees what their run was refused
                await self._say(origin.home, f"(Refused: {exc}.)")
            raise
        await self._send(target, message.text)

    async def ask(self, question: Outgoing, timeout_s: float | None = None) -> str:
        run = self.runs.get(question.run_id or "")
        if run is None:
            raise ChannelError("this run was not started from a chat: nobody to ask")
        waiting = self._register(run, "question")  # before the person can see the question
        return await self._wait(waiting, timeout_s, self._send(run.home, question.text))

    def _register(self, run: ChatRun, kind: Literal["question", "approval"]) -> _Waiting:
        key = run.home.key
        if key in self._waiting:
            raise ChannelError(f"{key} is already waiting for an answer")
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        waiting = _Waiting(kind, uuid.uuid4().hex[:8], run, future)
        self._waiting[key] = waiting
        return waiting

    async def _wait(self, waiting: _Waiting, timeout_s: float | None,
                    prompt: Awaitable[Any]) -> str:
        """Send ``prompt``, then wait for the answer ``waiting`` expects (or time out)."""
        key = waiting.run.home.key
        try:
            await prompt
            async with asyncio.timeout(timeout_s):
                return await waiting.future
        except TimeoutError:
            raise ChannelError(f"no answer in {key} within {timeout_s:g}s") from None
        finally:
            if self._waiting.get(key) is waiting:
                del self._waiting[key]

    # --- the agents' Approver --------------------------------------------------------------

    async def decide(self, request: ApprovalRequest) -> Decision:
        run = self.runs.get(request.run_id)
        if run is None:
            return Decision(False, "no chat to ask for approval in", remember=False)
        if request.tool == "send_message":  # where it may go is the delivery rules' call
            return Decision(True, "messages are checked by the channel's delivery rules")
        args = ", ".join(f"{k}={str(v)[:200]!r}" for k, v in request.arguments.items())
        text = f"May I run {request.tool}({args})?"
        waiting = self._register(run, "approval")
        try:
            answer = await self._wait(waiting, run.settings.approval_timeout_s,
                                      self._prompt(run, text, waiting.token))
        except ChannelError as exc:
            return Decision(False, str(exc), remember=False)
        approved = answer == "y"
        return Decision(approved, f"{'approved' if approved else 'denied'} in {run.home.key}")

    async def _prompt(self, run: ChatRun, text: str, token: str) -> None:
        choices = [("Approve", f"ap:{token}:y"), ("Deny", f"ap:{token}:n")]
        if not await run.adapter.send_choice(run.home, text, choices):
            await self._send(run.home, f"{text}\nReply yes or no.")

    # --- lifecycle -------------------------------------------------------------------------

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def idle(self) -> None:
        """Wait until every run the hub follows has answered (tests, shutdown)."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    async def aclose(self, timeout_s: float = 10.0) -> None:
        for waiting in self._waiting.values():
            waiting.future.cancel()
        if self._tasks:
            _, pending = await asyncio.wait(list(self._tasks), timeout=timeout_s)
            for task in pending:
                task.cancel()
