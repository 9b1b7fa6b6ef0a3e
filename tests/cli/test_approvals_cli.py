"""``thinkloop approvals list|decide`` on a run paused by the library, resumed by the CLI."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from thinkloop import Agent
from thinkloop.cli.approvals import approvals_app
from thinkloop.guard import ApprovalSettings, GuardSettings
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.store import SQLiteStore
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion
from thinkloop.tools.base import tool
from thinkloop.types import Message

runner = CliRunner()


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@tool(name="calculator", needs_approval=True)
def gated_calculator(expression: str) -> str:
    """Evaluate arithmetic."""
    raise AssertionError("the paused run must not run the tool")


def pause(db: Path) -> str:
    async def main() -> str:
        store = SQLiteStore(db)
        try:
            guard = replace(GuardSettings.off(), approval=ApprovalSettings(on_timeout="pause"))
            ask = call("calculator", expression="12*7")
            agent = Agent(ScriptedModel([reply("", ask)]), tools=[gated_calculator],
                          store=store, guard=guard)
            result = await agent.run("What is 12*7?", session="s1")
            assert result.status == "paused"
            return ask.id
        finally:
            await store.aclose()

    return asyncio.run(main())


def stored(db: Path) -> tuple[list[Message], int]:
    async def main() -> tuple[list[Message], int]:
        store = SQLiteStore(db)
        try:
            return await store.load("s1"), len(await store.pending_approvals("s1"))
        finally:
            await store.aclose()

    return asyncio.run(main())


def test_list_then_approve_continues_the_run(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "t.db"
    call_id = pause(db)
    listed = runner.invoke(approvals_app, ["list", "--session", "s1", "--db", str(db), "--json"])
    assert listed.exit_code == 0, listed.output
    row = json.loads(listed.output)
    assert (row["call_id"], row["tool"], row["arguments"], row["session"]) == (
        call_id, "calculator", {"expression": "12*7"}, "s1")
    # A unique prefix of the session's id names it, as it does for runs.
    by_prefix = runner.invoke(approvals_app, ["list", "--session", "s", "--db", str(db),
                                              "--json"])
    assert json.loads(by_prefix.output) == row

    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    server.clear()
    server.enqueue(Reply(body=completion("12*7 = 84")))
    done = runner.invoke(approvals_app, [
        "decide", "--session", "s", "--approve", "--db", str(db), "--model", "openai:fake",
        "--tools", "calculator", "--json"])
    assert done.exit_code == 0, done.output
    # The memory layers may print a progress bar on stderr (mixed in here): find the JSON.
    out = json.loads(done.output[done.output.index('{"run_id"'):])
    assert (out["status"], out["output"]) == ("completed", "12*7 = 84")
    sent = server.requests[0]["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": call_id, "content": "84"}
    messages, pending = stored(db)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert (messages[2].content, pending) == ("84", 0)

    again = runner.invoke(approvals_app, ["decide", "--session", "s1", "--deny", "--db",
                                          str(db), "--model", "openai:fake"])
    assert again.exit_code == 2
    assert "'s1' has no paused run waiting for approval" in again.output


def test_decide_needs_exactly_one_of_approve_or_deny(tmp_path: Path) -> None:
    result = runner.invoke(approvals_app, ["decide", "--session", "s1", "--db",
                                           str(tmp_path / "t.db")])
    assert result.exit_code == 2
    assert "give exactly one of --approve or --deny" in result.output


def test_list_says_when_nothing_waits(tmp_path: Path) -> None:
    result = runner.invoke(approvals_app, ["list", "--session", "s9", "--db",
                                           str(tmp_path / "t.db")])
    assert result.exit_code == 0
    assert "nothing waits for approval in session s9" in result.output
