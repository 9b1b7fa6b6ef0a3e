"""Paused runs: the approval gate defers, the turn is stored, a later Agent resumes it.

Runs on SQLite and PostgreSQL (the tests/store backends, loaded by path) and, where noted,
on the in-process MemoryStore.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from thinkloop import Agent
from thinkloop.agent import AgentOptions
from thinkloop.errors import PendingApprovalError
from thinkloop.events import Event
from thinkloop.guard import ApprovalSettings, CallbackApprover, Decision, GuardSettings
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.store import PostgresStore, SQLiteStore, open_store
from thinkloop.store.inprocess import MemoryStore
from thinkloop.tools.base import tool
from thinkloop.types import Message, PendingApproval, ToolCall

_path = Path(__file__).resolve().parent.parent / "store" / "conftest.py"
_spec = importlib.util.spec_from_file_location("_thinkloop_store_backends", _path)
assert _spec is not None and _spec.loader is not None
_backends = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_backends)
backend = _backends.backend
store_url = _backends.store_url

Backend = SQLiteStore | PostgresStore
SENT: list[tuple[str, int]] = []
LOOKED: list[str] = []


@tool(needs_approval=True)
def send_money(to: str, amount: int) -> str:
    """Send money."""
    SENT.append((to, amount))
    return f"sent {amount} to {to}"


@tool
def lookup(who: str) -> str:
    """Look a person up."""
    LOOKED.append(who)
    return f"{who} is a friend"


@pytest.fixture(autouse=True)
def _clear() -> None:
    SENT.clear()
    LOOKED.clear()


def pausing(approver: Any = None, **kw: Any) -> GuardSettings:
    return replace(GuardSettings.off(),
                   approval=ApprovalSettings(approver, on_timeout="pause", **kw))


def agent(store: Any, script: list[Any], events: list[Event] | None = None,
          guard: GuardSettings | None = None) -> Agent:
    return Agent(ScriptedModel(script), tools=[send_money, lookup], store=store,
                 guard=guard or pausing(), max_steps=5,
                 on_event=events.append if events is not None else None)


def model_of(a: Agent) -> ScriptedModel:
    assert isinstance(a.model, ScriptedModel)
    return a.model


async def pause(store: Any, session: str = "s1") -> tuple[ToolCall, Any]:
    pay = call("send_money", to="bob", amount=5)
    result = await agent(store, [reply("", pay)]).run("pay bob 5", session=session)
    return pay, result


async def test_pause_stores_the_turn_and_the_pending_call(store_url: str) -> None:
    store = open_store(store_url)
    try:
        before = time.time()
        pay, result = await pause(store)
        assert result.status == "paused"
        assert result.error == f"waiting for approval of send_money (call {pay.id})"
        assert result.text == "" and SENT == []
        (p,) = result.pending
        assert (p.run_id, p.session_id, p.call_id, p.tool, p.arguments, p.reason) == (
            result.run_id, "s1", pay.id, "send_money", {"to": "bob", "amount": 5},
            "send_money requires approval")
        assert before <= p.requested_at <= time.time()
        assert await store.load("s1") == [Message.user("pay bob 5"),
                                          Message.assistant("", (pay,))]
        assert await store.pending_approvals("s1") == [PendingApproval(
            result.run_id, "s1", pay.id, "send_money", {"to": "bob", "amount": 5},
            "send_money requires approval", p.requested_at, "pay bob 5", 5, 2)]
    finally:
        await store.aclose()


async def test_a_new_agent_resumes_with_approve(store_url: str) -> None:
    first = open_store(store_url)
    pay, paused = await pause(first)
    await first.aclose()  # as after a restart: a new store object and a new Agent
    store = open_store(store_url)
    try:
        events: list[Event] = []
        a = agent(store, ["Sent."], events)
        assert [p.call_id for p in await a.pending_approvals("s1")] == [pay.id]
        result = await a.resume("s1", Decision(True, "ok by alice"))
        assert SENT == [("bob", 5)]
        assert (result.status, result.text, result.run_id) == ("completed", "Sent.",
                                                                  paused.run_id)
        assert [s.index for s in result.steps] == [1, 2]  # the count went on from step 1
        assert result.pending == ()
        tool_msg = Message.tool(pay.id, "send_money", "sent 5 to bob")
        assert await store.load("s1") == [
            Message.user("pay bob 5"), Message.assistant("", (pay,)), tool_msg,
            Message.assistant("Sent.")]
        assert list(result.messages) == [tool_msg, Message.assistant("Sent.")]
        assert await store.pending_approvals("s1") == []
        assert [(e.type, e.payload.get("source")) for e in events
                if e.type.startswith(("approval.", "tool.", "run."))] == [
            ("run.started", None), ("approval.decided", "resume"), ("tool.call", None),
            ("tool.result", None), ("run.completed", None)]
        decided = next(e for e in events if e.type == "approval.decided").payload
        assert decided == {"tool": "send_money", "id": pay.id, "approved": True,
                           "reason": "ok by alice", "source": "resume"}
        # The model saw the whole turn, the tool's result last.
        seen = model_of(a).calls[0].messages
        assert [m.role for m in seen] == ["system", "user", "assistant", "tool"]
        assert seen[-1].content == "sent 5 to bob"
    finally:
        await store.aclose()


async def test_resume_with_deny_shows_the_model_the_denial(store_url: str) -> None:
    store = open_store(store_url)
    try:
        pay, _ = await pause(store)
        a = agent(store, ["Not sent."])
        result = await a.resume("s1", Decision(False, "too much"))
        assert SENT == []
        assert (result.status, result.text) == ("completed", "Not sent.")
        denial = Message.tool(pay.id, "send_money", "denied: too much")
        assert model_of(a).calls[0].messages[-1] == denial
        assert (await store.load("s1"))[2:] == [denial, Message.assistant("Not sent.")]
    finally:
        await store.aclose()


async def test_resuming_twice_or_with_nothing_pending_is_one_clear_error(
    store_url: str,
) -> None:
    store = open_store(store_url)
    try:
        await pause(store)
        a = agent(store, ["Sent.", "again?"])
        await a.resume("s1", True)
        with pytest.raises(PendingApprovalError, match="'s1' has no paused run waiting"):
            await a.resume("s1", True)
        with pytest.raises(PendingApprovalError, match="'other' has no paused run waiting"):
            await a.resume("other", False)
        assert SENT == [("bob", 5)] and len(await store.load("s1")) == 4
    finally:
        await store.aclose()


async def test_two_racing_resumes_run_the_tool_once(store_url: str) -> None:
    store = open_store(store_url)
    try:
        await pause(store)
        outcomes = await asyncio.gather(
            agent(store, ["Sent."]).resume("s1", True),
            agent(store, ["Sent."]).resume("s1", True), return_exceptions=True)
        assert sorted(type(o).__name__ for o in outcomes) == ["PendingApprovalError",
                                                             "RunResult"]
        assert SENT == [("bob", 5)] and len(await store.load("s1")) == 4
    finally:
        await store.aclose()


async def test_a_new_run_on_a_paused_session_is_refused(store_url: str) -> None:
    store = open_store(store_url)
    try:
        pay, paused = await pause(store)
        with pytest.raises(PendingApprovalError) as err:
            await agent(store, ["hello"]).run("something else", session="s1")
        assert str(err.value) == (
            f"session 's1' has a paused run waiting for approval of send_money (call "
            f"{pay.id}, run {paused.run_id}); resume it first with agent.resume() or "
            "'thinkloop approvals decide --session s1'")
        assert len(await store.load("s1")) == 2  # nothing was added
        assert len(await store.pending_approvals("s1")) == 1
    finally:
        await store.aclose()


async def test_calls_of_the_same_step_that_ran_are_kept(store_url: str) -> None:
    store = open_store(store_url)
    try:
        look, pay = call("lookup", who="bob"), call("send_money", to="bob", amount=5)
        result = await agent(store, [reply("", look, pay)]).run("pay bob", session="s1")
        assert result.status == "paused" and LOOKED == ["bob"]
        assert [len(s.results) for s in result.steps] == [1]
        looked = Message.tool(look.id, "lookup", "bob is a friend")
        assert await store.load("s1") == [Message.user("pay bob"),
                                          Message.assistant("", (look, pay)), looked]
        done = await agent(store, ["Paid."]).resume("s1", True)
        assert (done.status, LOOKED, SENT) == ("completed", ["bob"], [("bob", 5)])
        assert [len(s.results) for s in done.steps] == [2, 0]
        assert (await store.load("s1"))[3:] == [
            Message.tool(pay.id, "send_money", "sent 5 to bob"), Message.assistant("Paid.")]
    finally:
        await store.aclose()


async def test_a_resumed_run_can_pause_again_and_keeps_its_step_limit(
    store_url: str,
) -> None:
    store = open_store(store_url)
    try:
        await pause(store)
        again = call("send_money", to="eve", amount=7)
        second = await agent(store, [reply("", again)]).resume("s1", True)
        assert second.status == "paused" and [p.call_id for p in second.pending] == [again.id]
        (p,) = await store.pending_approvals("s1")
        assert (p.turn_messages, p.max_steps, p.task) == (4, 5, "pay bob 5")
        a = agent(store, ["Both sent."])
        done = await a.resume("s1", True)
        assert done.status == "completed" and SENT == [("bob", 5), ("eve", 7)]
        assert [s.index for s in done.steps] == [1, 2, 3]
        assert [m.role for m in await store.load("s1")] == [
            "user", "assistant", "tool", "assistant", "tool", "assistant"]
    finally:
        await store.aclose()


async def test_an_approver_may_defer_and_a_timeout_may_pause() -> None:
    store = MemoryStore()
    deferring = CallbackApprover(lambda req: Decision.defer("ask the boss"))
    events: list[Event] = []
    pay = call("send_money", to="bob", amount=5)
    result = await agent(store, [reply("", pay)], events, pausing(deferring)).run(
        "pay", session="m1")
    assert result.status == "paused"
    assert [(e.type, e.payload.get("reason")) for e in events
            if e.type.startswith("approval.")] == [
        ("approval.requested", "send_money requires approval"),
        ("approval.deferred", "ask the boss")]
    assert (await agent(store, ["ok"]).resume("m1", True)).text == "ok"

    async def slow(req: Any) -> bool:
        await asyncio.sleep(5)
        return True

    timed = pausing(CallbackApprover(slow), timeout_s=0.05)
    result = await agent(store, [reply("", call("send_money", to="x", amount=1))],
                         guard=timed).run("pay x", session="m2")
    assert result.status == "paused" and SENT == [("bob", 5)]
    assert store.pending["m2"][0].tool == "send_money"


async def test_without_a_session_a_deferred_call_is_denied() -> None:
    pay = call("send_money", to="bob", amount=5)
    a = agent(MemoryStore(), [reply("", pay), "ok"])
    result = await a.run("pay")
    assert result.status == "completed" and SENT == []
    assert model_of(a).calls[1].messages[-1].content.startswith(
        "Not approved: no approver is configured; a run without a session cannot pause")


async def test_a_failed_resume_keeps_the_pending_call(store_url: str) -> None:
    store = open_store(store_url)
    try:
        await pause(store)
        failed = await agent(store, [RuntimeError("model down")]).resume("s1", True)
        assert failed.status == "failed" and SENT == [("bob", 5)]
        assert len(await store.load("s1")) == 2
        assert len(await store.pending_approvals("s1")) == 1  # it can be resumed again
    finally:
        await store.aclose()


async def test_a_text_protocol_run_pauses_and_resumes_with_all_guards_on() -> None:
    store = MemoryStore()
    guard = replace(GuardSettings(), approval=ApprovalSettings(on_timeout="pause"))
    asked = '{"tool": "send_money", "arguments": {"to": "bob", "amount": 5}}'
    first = Agent(ScriptedModel([asked]), tools=[send_money], store=store, guard=guard,
                  options=AgentOptions(protocol="json"))
    assert (await first.run("pay bob 5 dollars please", session="t")).status == "paused"
    second = Agent(ScriptedModel(["Sent 5 dollars to bob."]), tools=[send_money], store=store,
                   guard=guard, options=AgentOptions(protocol="json"))
    done = await second.resume("t", True)
    assert (done.status, done.text, SENT) == ("completed", "Sent 5 dollars to bob.",
                                              [("bob", 5)])
    assert [(m.role, m.content) for m in store.sessions["t"]] == [
        ("user", "pay bob 5 dollars please"), ("assistant", asked),
        ("user", "[Tool send_money]: sent 5 to bob"),
        ("assistant", "Sent 5 dollars to bob.")]


async def test_the_cli_pause_mode_defers_every_call() -> None:
    from thinkloop.guard import DeferAll, approver_for
    from thinkloop.guard.approval import ApprovalRequest

    approver = approver_for("pause")
    assert isinstance(approver, DeferAll)
    decision = await approver.decide(ApprovalRequest("r", "s", None, "t", {}, "c", "why"))
    assert (decision.approved, decision.deferred, decision.remember) == (False, True, False)
