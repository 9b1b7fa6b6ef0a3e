"""People answering runs through the gateway: approvals and ``ask_human`` questions.

The approval gate emits ``approval.requested`` (with the call id) and waits on
:meth:`InputHub.approve`; ``ask_human`` reaches :meth:`InputHub.ask` through the gateway's
channel, which publishes ``input.requested`` (with a question id) into the run's events. Either
is answered by ``POST /v1/runs/{id}/input``; the gate's own timeout (deny) still applies.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from thinkloop.api import ApprovalRequest, CallbackApprover, Decision
from thinkloop.core.channel import CallbackChannel, Channel, Outgoing
from thinkloop.core.errors import ChannelError, NoOneToAskError
from thinkloop.core.events import Event, InputRequested, MessageSent

Publish = Callable[[str, Event], bool]  # (run id, event) -> whether the run is known


@dataclass(frozen=True, slots=True)
class Answer:
    approved: bool | None = None
    text: str | None = None
    reason: str = ""


# What a run whose caller cannot answer is told (the OpenAI-compatible API has no way to put a
# question or an approval to its client: the run would wait until it timed out).
NO_ONE_ASKS = ("No one can answer: this request came through the OpenAI-compatible API, which "
               "cannot ask its caller anything. Answer with what you know.")
NO_ONE_APPROVES = ("not approved: this request came through the OpenAI-compatible API, which "
                   "cannot ask its caller to approve a call (let the agent run the tool without "
                   "approval to use it there)")


class InputHub:
    def __init__(self, publish: Publish) -> None:
        self.publish = publish
        self._waiting: dict[tuple[str, str], tuple[str, asyncio.Future[Answer]]] = {}
        # Runs whose caller cannot answer a question or an approval: they are told at once.
        self.unattended: set[str] = set()

    def _register(self, run_id: str, input_id: str, kind: str) -> asyncio.Future[Answer]:
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._waiting[(run_id, input_id)] = (kind, future)
        return future

    async def _wait(self, run_id: str, input_id: str, future: asyncio.Future[Answer]) -> Answer:
        try:
            return await future
        finally:
            self._waiting.pop((run_id, input_id), None)

    async def approve(self, request: ApprovalRequest) -> Decision:
        if request.run_id in self.unattended:
            return Decision(False, NO_ONE_APPROVES, remember=False)
        future = self._register(request.run_id, request.call_id, "approval")
        answer = await self._wait(request.run_id, request.call_id, future)
        return Decision(bool(answer.approved), answer.reason or "answered through the gateway")

    async def ask(self, question: Outgoing) -> str:
        if question.run_id is None:
            raise ChannelError("a question outside a run cannot be answered")
        if question.run_id in self.unattended:
            raise NoOneToAskError(NO_ONE_ASKS)
        qid = uuid.uuid4().hex[:12]
        event = InputRequested(question.run_id, 0, qid, "question", question.text)
        future = self._register(question.run_id, qid, "question")  # before anyone sees it
        if not self.publish(question.run_id, event):
            self._waiting.pop((question.run_id, qid), None)
            raise ChannelError("this run is not served by the gateway")
        answer = await self._wait(question.run_id, qid, future)
        return answer.text or ""

    async def send(self, message: Outgoing) -> None:
        if message.run_id is not None:
            self.publish(message.run_id,
                         MessageSent(message.run_id, 0, message.text, message.recipient))

    def pending(self, run_id: str) -> list[tuple[str, str]]:
        """(input id, kind) of what ``run_id`` waits on."""
        return [(i, kind) for (r, i), (kind, _) in self._waiting.items() if r == run_id]

    def kind(self, run_id: str, input_id: str) -> str | None:
        """"approval" or "question" when ``run_id`` waits on ``input_id``, else None."""
        hit = self._waiting.get((run_id, input_id))
        return hit[0] if hit is not None and not hit[1].done() else None

    def answer(self, run_id: str, input_id: str, answer: Answer) -> str | None:
        """Deliver ``answer``; the kind that was waiting, or None if nothing was."""
        kind = self.kind(run_id, input_id)
        if kind is not None:
            self._waiting[(run_id, input_id)][1].set_result(answer)
        return kind

    @property
    def approver(self) -> CallbackApprover:
        return CallbackApprover(self.approve)

    def channel(self) -> Channel:
        return CallbackChannel(on_send=self.send, on_ask=self.ask, name="gateway")
