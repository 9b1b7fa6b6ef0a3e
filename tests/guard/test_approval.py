from __future__ import annotations

import asyncio
import re
from dataclasses import replace

import pytest

from thinkloop import Agent
from thinkloop.errors import ConfigError
from thinkloop.guard import (
    ApprovalGate,
    ApprovalRequest,
    ApprovalSettings,
    ArgRule,
    AutoApprove,
    AutoDeny,
    CallbackApprover,
    ConsoleApprover,
    Decision,
    GuardSettings,
    ToolGate,
    ToolPolicy,
    approver_for,
)
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.tools.base import tool

from .helpers import run_agent

SENT: list[str] = []


@tool(needs_approval=True)
def send_money(to: str, amount: int) -> str:
    """Send money."""
    SENT.append(to)
    return f"sent {amount} to {to}"


def gated(approver: object, **kw: object) -> GuardSettings:
    return replace(GuardSettings.off(), approval=ApprovalSettings(approver, **kw))  # type: ignore[arg-type]


async def test_approved_call_runs_with_exact_events() -> None:
    SENT.clear()
    asked: list[ApprovalRequest] = []

    def decide(req: ApprovalRequest) -> Decision:
        asked.append(req)
        return Decision(True, "looks fine")

    c = call("send_money", to="bob", amount=5)
    run = await run_agent([reply("", c), "Sent 5 to bob."], tools=[send_money],
                          guard=gated(CallbackApprover(decide)), user_id="u1")
    assert SENT == ["bob"]
    assert asked == [ApprovalRequest(run.result.run_id, None, "u1", "send_money",
                                     {"to": "bob", "amount": 5}, c.id,
                                     "send_money requires approval")]
    assert run.guard_events == [
        ("approval.requested", {"tool": "send_money", "id": c.id,
                                "arguments": {"to": "bob", "amount": 5},
                                "reason": "send_money requires approval"}),
        ("approval.decided", {"tool": "send_money", "id": c.id, "approved": True,
                              "reason": "looks fine", "source": "approver"}),
    ]


async def test_denied_call_is_an_observation() -> None:
    SENT.clear()
    run = await run_agent([reply("", call("send_money", to="eve", amount=9)),
                           "The transfer was not approved."], tools=[send_money],
                          guard=gated(AutoDeny()))
    res = run.result.steps[0].results[0]
    assert SENT == [] and res.is_error
    assert res.content == "Not approved: auto-denied. The call was not run; do not retry it as is."


async def test_no_approver_means_deny() -> None:
    SENT.clear()
    run = await run_agent([reply("", call("send_money", to="x", amount=1)), "not approved"],
                          tools=[send_money], guard=gated(None))
    assert SENT == []
    assert run.of("approval.decided")[0].payload["source"] == "none"


async def test_timeout_means_deny() -> None:
    SENT.clear()

    async def slow(req: ApprovalRequest) -> bool:
        await asyncio.sleep(5)
        return True

    run = await run_agent([reply("", call("send_money", to="x", amount=1)), "timed out, sorry"],
                          tools=[send_money], guard=gated(CallbackApprover(slow), timeout_s=0.05))
    assert SENT == []
    decided = run.of("approval.decided")[0].payload
    assert decided["approved"] is False and decided["source"] == "timeout"
    assert decided["reason"] == "no decision within 0.05s"


async def test_decisions_cached_per_session_until_ttl() -> None:
    SENT.clear()
    now = [0.0]
    asked: list[str] = []

    def decide(req: ApprovalRequest) -> bool:
        asked.append(req.tool)
        return True

    gate = ApprovalGate(ApprovalSettings(CallbackApprover(decide), cache_ttl_s=60),
                        clock=lambda: now[0])
    # One gate (one agent) serves several runs: the cache lives across them, keyed by session.
    hooks = ToolGate(approval=gate).hooks()

    async def one(session: str, amount: int = 1) -> None:
        model = ScriptedModel([reply("", call("send_money", to="bob", amount=amount)), "Sent."])
        agent = Agent(model, tools=[send_money], hooks=hooks, plugins=False, guard=False)
        await agent.run("pay bob", session=session)

    await one("s1")
    await one("s1")  # cached: not asked again
    await one("s2")  # another session asks
    await one("s1", amount=2)  # other arguments ask
    now[0] = 61.0
    await one("s1")  # expired
    assert asked == ["send_money"] * 4
    assert len(SENT) == 5


async def test_policy_flagged_call_needs_approval() -> None:
    SENT.clear()

    @tool
    def pay(to: str, amount: int) -> str:
        """Pay."""
        SENT.append(to)
        return "paid"

    big = ArgRule("pay", "amount", check=lambda v: "over 100" if v > 100 else None,
                  action="approve")
    guard = replace(gated(AutoDeny()), policy=ToolPolicy(rules=(big,)))
    small, large = call("pay", to="a", amount=5), call("pay", to="b", amount=500)
    run = await run_agent([reply("", small, large), "paid a; b was not approved"],
                          tools=[pay], guard=guard)
    assert SENT == ["a"]
    assert [(e.payload["id"], e.payload["reason"]) for e in run.of("approval.requested")] == [
        (large.id, "amount: over 100")]


async def test_console_approver_and_cli_modes() -> None:
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return "y"

    req = ApprovalRequest("r", None, None, "shell", {"command": "ls"}, "c1", "needs approval")
    assert (await ConsoleApprover(ask).decide(req)).approved is True
    assert prompts == ['\nApprove tool call shell({"command":"ls"})? Reason: needs approval [y/N] ']
    assert (await ConsoleApprover(lambda p: "").decide(req)).approved is False
    assert isinstance(approver_for("auto"), AutoApprove)
    assert isinstance(approver_for("deny"), AutoDeny)
    assert isinstance(approver_for("ask"), ConsoleApprover)
    with pytest.raises(ConfigError, match=re.escape("--approve must be one of")):
        approver_for("maybe")


async def test_broken_approver_fails_closed() -> None:
    SENT.clear()

    def broken(req: ApprovalRequest) -> bool:
        raise EOFError("no terminal")

    run = await run_agent([reply("", call("send_money", to="x", amount=1)), "not approved"],
                          tools=[send_money], guard=gated(ConsoleApprover(broken)))
    assert SENT == []
    decided = run.of("approval.decided")[0].payload
    assert (decided["approved"], decided["source"]) == (False, "error")
    assert decided["reason"] == "approver failed: EOFError: no terminal"


async def test_plain_function_is_an_approver_with_every_default_on() -> None:
    SENT.clear()
    asked: list[str] = []

    def decide(req: ApprovalRequest) -> bool:  # no CallbackApprover around it
        asked.append(str(req.arguments["to"]))
        return bool(req.arguments["amount"] < 10)

    async def decide_async(req: ApprovalRequest) -> Decision:
        return Decision(False, "async says no")

    guard = replace(GuardSettings(), approval=ApprovalSettings(decide))
    run = await run_agent([reply("", call("send_money", to="ann", amount=5)),
                           reply("", call("send_money", to="bo", amount=50)),
                           "Sent 5 to ann. The transfer of 50 to bo failed: it was not approved."],
                          tools=[send_money], guard=guard)
    assert (SENT, asked) == (["ann"], ["ann", "bo"])
    assert [e.payload["approved"] for e in run.of("approval.decided")] == [True, False]
    assert run.result.status == "completed"
    assert isinstance(ApprovalSettings(decide_async).approver, CallbackApprover)
    approver = AutoDeny()
    assert ApprovalSettings(approver).approver is approver  # an Approver is kept as it is
    with pytest.raises(ConfigError, match="approver must have an async decide"):
        ApprovalSettings("yes")  # type: ignore[arg-type]


async def test_console_prompt_that_never_returns_times_out_without_blocking() -> None:
    import threading

    SENT.clear()
    release = threading.Event()

    def stuck(prompt: str) -> str:
        release.wait(5)
        return "y"

    try:
        run = await run_agent([reply("", call("send_money", to="x", amount=1)), "timed out"],
                              tools=[send_money],
                              guard=gated(ConsoleApprover(stuck), timeout_s=0.05))
    finally:
        release.set()
    assert SENT == [] and run.of("approval.decided")[0].payload["source"] == "timeout"
