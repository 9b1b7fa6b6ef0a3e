"""Checkpoints: a run's progress in the store, so a run whose process died can go on.

Three kinds of rows, appended to the run's checkpoint log (OrcBot's step memories, CortexPrism's
checkpoints), each written before the loop moves on (on a store that queues its writes, the
``calls`` and ``result`` rows of a step are committed with its next ``step`` row, before the
next model call: see :meth:`Checkpointer._add`):

* ``step``   before each model call: the messages and steps added since the last one, the
             usage so far, the step limit (the first also holds the system prompt and task);
* ``calls``  before a step's tools run: the reply that holds the calls, and the usage;
* ``result`` after each tool call: its result.

:func:`load_recovery` folds the log back into the run's state: the turn up to the last
completed step, and the step that was running (its calls and the results already recorded),
which :func:`~thinkloop.loop.resume.continue_recovered` finishes without running a call that
has a result. Each row holds only what is new, so a step costs the same at step 50 as at 1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import orjson

from thinkloop.core.errors import RunAccessError
from thinkloop.core.types import Message, Step, ToolCall, ToolResult, Usage
from thinkloop.hooks import Recovered, RunState
from thinkloop.store.base import (
    CheckpointStore,
    QueuedCheckpoints,
    RunRecord,
    RunRecords,
    Store,
    StoreError,
)
from thinkloop.store.serialize import message_from_dict, message_to_dict


def _usage(u: Usage) -> list[Any]:
    return [u.requests, u.input_tokens, u.output_tokens, u.cost_usd]


def _result(r: ToolResult) -> dict[str, Any]:
    return {"id": r.call.id, "name": r.call.name, "arguments": r.call.arguments,
            "content": r.content, "is_error": r.is_error}


def _result_from(d: dict[str, Any]) -> ToolResult:
    return ToolResult(ToolCall(d["id"], d["name"], d.get("arguments", {})), d["content"],
                      d["is_error"])


def _is_reply(m: Message, s: Step) -> bool:
    """Whether ``m`` is the reply ``s`` holds (what ``Message.assistant`` makes of it)."""
    return (m.role == "assistant" and m.content == s.text and m.thought == s.thought
            and (m.tool_calls is s.tool_calls or m.tool_calls == s.tool_calls)
            and m.tool_call_id is None and m.name is None and not m.parts)


def _step(s: Step, replies: Sequence[tuple[Message, dict[str, Any]]] = ()) -> dict[str, Any]:
    """A step's record; its reply's dict taken from ``replies`` (the same message's, made
    for the row already) when there."""
    calls = next((d for m, d in replies if _is_reply(m, s)), None)
    if calls is None:
        calls = message_to_dict(Message.assistant(s.text, s.tool_calls, s.thought))
    return {"index": s.index, "reply": calls, "results": [_result(r) for r in s.results],
            "usage": _usage(s.usage)}


def _step_from(d: dict[str, Any]) -> Step:
    m = message_from_dict(d["reply"])
    return Step(d["index"], m.thought, m.content, m.tool_calls,
                tuple(_result_from(r) for r in d["results"]), Usage(*d["usage"]))


@dataclass
class Checkpointer:
    """Writes one run's checkpoints; remembers how much of the run is saved already."""

    store: CheckpointStore
    run_id: str
    messages: int = 0  # of the run's new messages
    steps: int = 0
    calls_step: int = -1  # the step whose calls are saved
    # Whether the store queues its writes; None: ask it here. A runtime protocol check costs
    # 20-60 µs, so the run book asks once per store and says.
    queued: bool | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _last: Awaitable[None] | None = None  # the last row queued (a queueing store)
    # The reply whose ``calls`` row was made last, and its dict: the step's row holds the
    # same reply twice more (a new message, the step's reply), serialised once (issue 38).
    _reply: tuple[Message, dict[str, Any]] | None = None
    _queued: bool = field(init=False)

    def __post_init__(self) -> None:
        self._queued = (isinstance(self.store, QueuedCheckpoints) if self.queued is None
                        else self.queued)

    def _blob(self, data: dict[str, Any]) -> bytes:
        try:
            return orjson.dumps(data, default=str)
        except TypeError as exc:
            raise StoreError(f"cannot checkpoint run {self.run_id}: {exc}") from None

    def queues_now(self) -> bool:
        """Whether a ``calls`` or ``result`` row can be queued at once (:meth:`queue_calls`,
        :meth:`queue_result`): the store queues its rows and no write holds the lock."""
        return self._queued and not self._lock.locked()

    def queue_calls(self, state: RunState) -> None:
        """:meth:`calls`, without awaiting (see :meth:`queues_now`)."""
        if self.calls_step == state.step:
            return
        reply = next((m for m in reversed(state.messages) if m.role == "assistant"), None)
        if reply is None or not reply.tool_calls:
            return
        self._reply = (reply, message_to_dict(reply))
        self._queue("calls", {"reply": self._reply[1], "usage": _usage(state.usage)})
        self.calls_step = state.step

    def queue_result(self, result: ToolResult) -> None:
        """:meth:`result`, without awaiting (see :meth:`queues_now`)."""
        self._queue("result", _result(result))

    def _queue(self, kind: str, data: dict[str, Any]) -> None:
        self._last = cast(QueuedCheckpoints, self.store).queue_checkpoint(
            self.run_id, kind, self._blob(data))

    async def _add(self, kind: str, data: dict[str, Any]) -> None:
        """A ``calls`` or ``result`` row. A store that queues its writes (SQLite's group
        commit) takes it without the run waiting: writes commit in the order they were
        queued, so the row is committed with or before the run's next write that is waited
        for (the ``step`` row before the next model call, or the run's end); a step's rows
        go in one commit instead of one each (issue 38)."""
        if self._queued:
            self._queue(kind, data)
        else:
            await self.store.add_checkpoint(self.run_id, kind, self._blob(data))

    async def durable(self) -> None:
        """Every row written so far committed (a queueing store commits them later): before
        the run is handed to another process."""
        last, self._last = self._last, None
        if last is not None:
            await asyncio.shield(last)  # a cancel here must not cancel the store's write

    def saved(self, state: RunState) -> None:
        """A recovered run: what its checkpoints hold already."""
        self.messages, self.steps = len(state.new_messages), state.step

    def step_row(self, state: RunState) -> bytes | None:
        """The ``step`` row for what the run added since the last checkpoint (None: nothing);
        :meth:`saved` once it is written. Hold :attr:`lock` from here to there."""
        new = state.new_messages
        if len(new) == self.messages and state.step == self.steps:
            return None
        known, self._reply = self._reply, None
        messages, replies = [], []
        for m in new[self.messages:]:
            d = known[1] if known is not None and m is known[0] else message_to_dict(m)
            messages.append(d)
            if m.role == "assistant":
                replies.append((m, d))
        data: dict[str, Any] = {
            "messages": messages,
            "steps": [_step(s, replies) for s in state.steps[self.steps:]],
            "usage": _usage(state.usage), "max_steps": state.max_steps,
            "retries": state.output_retries_used}
        if self.messages == 0 and self.steps == 0:
            data["system"] = state.messages[0].content if state.messages else ""
            data["task"] = state.task
        return self._blob(data)

    @property
    def lock(self) -> asyncio.Lock:
        return self._lock

    async def step(self, state: RunState) -> None:
        """Before a model call: what the run added since the last checkpoint."""
        async with self._lock:
            blob = self.step_row(state)
            if blob is not None:
                await self.store.add_checkpoint(self.run_id, "step", blob)
                self.saved(state)

    async def calls(self, state: RunState) -> None:
        """Before the step's first tool runs: the reply that holds its calls."""
        async with self._lock:
            if self._queued:
                self.queue_calls(state)
                return
            if self.calls_step == state.step:
                return
            reply = next((m for m in reversed(state.messages) if m.role == "assistant"), None)
            if reply is None or not reply.tool_calls:
                return
            await self._add("calls", {"reply": message_to_dict(reply),
                                      "usage": _usage(state.usage)})
            self.calls_step = state.step

    async def result(self, result: ToolResult) -> None:
        """After a tool call: its result."""
        async with self._lock:
            await self._add("result", _result(result))


@dataclass
class Recovery:
    """A run's state folded back from its checkpoints."""

    record: RunRecord
    system: str = ""
    task: str = ""
    turn: list[Message] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    max_steps: int | None = None
    retries: int = 0
    interrupted: Recovered | None = None

    def apply(self, state: RunState, history: Sequence[Message], system: str) -> None:
        state.messages = [Message.system(self.system or system), *history, *self.turn]
        state.new_from = len(history) + 1
        state.steps = list(self.steps)
        state.usage = self.usage
        state.max_steps = self.max_steps
        state.output_retries_used = self.retries
        state.recovered = self.interrupted or Recovered()


def fold(record: RunRecord, rows: Sequence[tuple[str, bytes]]) -> Recovery:
    rec = Recovery(record, task=record.task)
    reply: Message | None = None
    results: dict[str, ToolResult] = {}
    usage = Usage()
    for kind, blob in rows:
        d = orjson.loads(blob)
        if kind == "step":
            rec.system = d.get("system", rec.system)
            rec.task = d.get("task", rec.task)
            rec.turn += [message_from_dict(m) for m in d["messages"]]
            rec.steps += [_step_from(s) for s in d["steps"]]
            rec.usage, rec.max_steps, rec.retries = Usage(*d["usage"]), d["max_steps"], d["retries"]
            reply, results = None, {}
        elif kind == "calls":
            again = message_from_dict(d["reply"])
            if reply is None or reply.tool_calls != again.tool_calls:
                results = {}  # a new step; the same one again (resumed) keeps its results
            reply, usage = again, Usage(*d["usage"])
        elif kind == "result" and reply is not None:
            results[d["id"]] = _result_from(d)
    if reply is not None:
        # The reply is added again by the step that finishes it, with its usage.
        if rec.turn and rec.turn[-1] == reply:
            rec.turn.pop()
        step_usage = Usage(*(a - b for a, b in zip(_usage(usage), _usage(rec.usage),
                                                      strict=True)))
        rec.usage = usage
        rec.interrupted = Recovered(reply, results, step_usage)
    return rec


async def load_recovery(store: Store, run_id: str) -> Recovery:
    """The state to continue ``run_id`` from; :class:`RunAccessError` if it cannot be."""
    if not isinstance(store, RunRecords) or not isinstance(store, CheckpointStore):
        raise RunAccessError(f"{type(store).__name__} keeps no runs to resume")
    record = await store.get_run(run_id)
    if record is None:
        raise RunAccessError(f"no run {run_id!r} in this store")
    if record.ended_at is not None:
        raise RunAccessError(f"run {run_id} ended ({record.status}): nothing to resume; "
                             "'thinkloop runs replay' shows it")
    rows = await store.checkpoints(run_id)
    if not rows:
        raise RunAccessError(f"run {run_id} has no checkpoint to continue from")
    return fold(record, rows)


def zeroed(record: RunRecord) -> RunRecord:
    """The record a resumed run goes on from: its start, not its counters (the checkpoints
    carry the usage so far)."""
    return replace(record, steps=0, input_tokens=0, output_tokens=0, cost_usd=0.0)
