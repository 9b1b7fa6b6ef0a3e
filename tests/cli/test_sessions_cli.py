"""``thinkloop sessions list|show|delete`` against a real SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from thinkloop.cli.sessions import sessions_app
from thinkloop.store import open_store
from thinkloop.types import Message, ToolCall

runner = CliRunner()


def _seed(db: str) -> None:
    async def main() -> None:
        store = open_store(db)
        try:
            await store.append("chat-1", [
                Message.user("add 2 and 3"),
                Message.assistant("", (ToolCall("c1", "add", {"a": 2, "b": 3}),)),
                Message.tool("c1", "add", "5"),
                Message.assistant("It is 5."),
            ])
            await store.append("chat-2", [Message.user("hi")])
        finally:
            await store.aclose()

    asyncio.run(main())


def test_list_show_delete(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    _seed(db)
    listed = runner.invoke(sessions_app, ["list", "--db", db, "--json"])
    assert listed.exit_code == 0, listed.output
    rows = [orjson.loads(line) for line in listed.output.splitlines()]
    assert [(r["id"], r["messages"]) for r in rows] == [("chat-2", 1), ("chat-1", 4)]
    table = runner.invoke(sessions_app, ["list", "--db", db])
    assert "chat-1" in table.output and "chat-2" in table.output

    shown = runner.invoke(sessions_app, ["show", "chat-1", "--db", db, "--json"])
    assert shown.exit_code == 0
    assert [orjson.loads(line) for line in shown.output.splitlines()] == [
        {"role": "user", "content": "add 2 and 3"},
        {"role": "assistant",
         "tool_calls": [{"id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}}]},
        {"role": "tool", "content": "5", "tool_call_id": "c1", "name": "add"},
        {"role": "assistant", "content": "It is 5."},
    ]
    text = runner.invoke(sessions_app, ["show", "chat-1", "--db", db])
    assert "-> add({\"a\":2,\"b\":3})" in text.output and "It is 5." in text.output

    missing = runner.invoke(sessions_app, ["show", "nope", "--db", db])
    assert missing.exit_code == 1 and "no session named 'nope'" in missing.output

    refused = runner.invoke(sessions_app, ["delete", "chat-1", "--db", db], input="n\n")
    assert refused.exit_code == 1
    deleted = runner.invoke(sessions_app, ["delete", "chat-1", "--db", db, "--yes"])
    assert deleted.exit_code == 0 and "deleted chat-1" in deleted.output
    again = runner.invoke(sessions_app, ["list", "--db", db, "--json"])
    assert [orjson.loads(x)["id"] for x in again.output.splitlines()] == ["chat-2"]


def test_the_database_comes_from_thinkloop_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("THINKLOOP_DATABASE_URL", raising=False)
    monkeypatch.setenv("THINKLOOP_HOME", str(tmp_path / "home"))
    _seed(str(tmp_path / "home" / "thinkloop.db"))
    listed = runner.invoke(sessions_app, ["list", "--json"])
    assert listed.exit_code == 0
    assert len(listed.output.splitlines()) == 2


def test_a_bad_database_url_is_one_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(sessions_app, ["list", "--db", "mysql://x/y"])
    assert result.exit_code == 2
    assert "unknown store URL scheme 'mysql'" in result.output


def test_deleting_a_missing_session_errors_before_asking(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    _seed(db)
    # No "y" on stdin: an error, not a question about a session that is not there.
    result = runner.invoke(sessions_app, ["delete", "chat-9", "--db", db])
    assert result.exit_code == 1
    assert "no session named 'chat-9'" in result.output and "Delete session" not in result.output
    listed = runner.invoke(sessions_app, ["list", "--db", db, "--json"])
    assert len(listed.output.splitlines()) == 2


def test_a_unique_prefix_names_a_session_and_a_shared_one_says_so(tmp_path: Path) -> None:
    from thinkloop.cli.app import app
    from thinkloop.store.base import RunRecord

    db = str(tmp_path / "t.db")
    _seed(db)  # chat-1 and chat-2

    async def more() -> None:
        store = open_store(db)
        try:
            await store.append("notes-2026", [Message.user("keep this")])
            await store.save_run(RunRecord("r-one", "a", "m", "p", "completed", 1.0,
                                           session_id="chat-1"))
            await store.save_run(RunRecord("r-two", "a", "m", "p", "completed", 2.0,
                                           session_id="notes-2026"))
        finally:
            await store.aclose()

    asyncio.run(more())
    shown = runner.invoke(sessions_app, ["show", "no", "--db", db, "--json"])
    assert shown.exit_code == 0, shown.output
    assert [orjson.loads(x) for x in shown.output.splitlines()] == [
        {"role": "user", "content": "keep this"}]
    both = runner.invoke(sessions_app, ["show", "chat", "--db", db])
    assert both.exit_code == 1
    assert "'chat' is the start of 2 sessions' ids" in both.output
    listed = runner.invoke(app, ["runs", "--session", "notes", "--db", db, "--json"])
    assert listed.exit_code == 0, listed.output
    assert [orjson.loads(x)["id"] for x in listed.output.splitlines()] == ["r-two"]
    ambiguous = runner.invoke(app, ["runs", "--session", "ch", "--db", db])
    assert ambiguous.exit_code == 2 and "is the start of 2 sessions' ids" in ambiguous.output
    deleted = runner.invoke(sessions_app, ["delete", "not", "--db", db, "--yes"])
    assert deleted.exit_code == 0 and "deleted notes-2026" in deleted.output
    # A deleted session's whole id still lists its runs; its prefix names nothing now.
    gone = runner.invoke(app, ["runs", "--session", "notes-2026", "--db", db, "--json"])
    assert [orjson.loads(x)["id"] for x in gone.output.splitlines()] == ["r-two"]
    missing = runner.invoke(sessions_app, ["delete", "no", "--db", db, "--yes"])
    assert missing.exit_code == 1 and "no session named 'no'" in missing.output
