"""Broken stores and bad bytes: one clear StoreError, never a raw driver error, a hang or a
lost turn."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import asyncpg
import pytest
from tests.store.conftest import PG_DSN, _require_pg, drop_schema, new_schema

from thinkloop.agent import Agent
from thinkloop.errors import StoreError
from thinkloop.models.scripted import ScriptedModel, reply
from thinkloop.models.scripted import call as model_call
from thinkloop.store import PostgresStore, SQLiteStore
from thinkloop.store import sqlite as sqlite_store
from thinkloop.tools.base import tool
from thinkloop.types import Message


async def test_corrupted_sqlite_file_is_one_store_error_and_no_thread_left(
    tmp_path: Path
) -> None:
    db = tmp_path / "thinkloop.db"
    db.write_bytes(os.urandom(8192))
    before = {t.ident for t in threading.enumerate()}
    store = SQLiteStore(db)
    with pytest.raises(StoreError) as info:
        await store.load("s1")
    message = str(info.value)
    assert "file is not a database" in message and "\n" not in message
    await store.aclose()
    time.sleep(0.1)  # noqa: ASYNC251 - the worker thread exits on its own
    left = [t for t in threading.enumerate() if t.ident not in before and not t.daemon]
    assert left == []  # a leftover aiosqlite thread is what hung the CLI at exit


def _creating(db: Path) -> sqlite3.Connection:
    """Another process's connection, midway through creating its tables in a new file."""
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE theirs (x)")
    return other


async def test_a_new_sqlite_file_another_process_is_creating_is_waited_for(
    tmp_path: Path
) -> None:
    # Switching to WAL takes a lock SQLite does not wait for: this open failed at once with
    # "database is locked (is it a damaged or foreign file?)" (1 open in 40, 6 at a time).
    db = tmp_path / "thinkloop.db"
    other = _creating(db)
    commit = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    commit.start()
    store = SQLiteStore(db)
    try:
        started = time.monotonic()
        await store.append("s1", [Message.user("hi")])
        assert time.monotonic() - started >= 0.25  # it waited for the other's commit
        assert [m.content for m in await store.load("s1")] == ["hi"]
    finally:
        commit.join()
        other.close()
        await store.aclose()
    with sqlite3.connect(db) as check:  # the other's tables are there too, in WAL mode
        assert check.execute("SELECT count(*) FROM theirs").fetchone() == (0,)
        assert check.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_a_sqlite_file_locked_past_the_busy_timeout_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_S", 0.2)
    db = tmp_path / "thinkloop.db"
    other = _creating(db)
    store = SQLiteStore(db)
    try:
        with pytest.raises(StoreError, match=r"another connection kept it locked for 0\.2s"):
            await store.load("s1")
    finally:
        other.execute("ROLLBACK")
        other.close()
        await store.aclose()


def test_cli_with_a_corrupted_database_exits_1_with_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "thinkloop.db").write_bytes(os.urandom(8192))
    env = {k: v for k, v in os.environ.items() if k not in ("THINKLOOP_DATABASE_URL",)}
    env.update(THINKLOOP_HOME=str(home), OPENAI_BASE_URL="http://127.0.0.1:9/v1",
               OPENAI_API_KEY="x")
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", "from thinkloop.cli.app import main; main()", "run", "hi",
         "--model", "openai:fake", "--session", "s1"],
        capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "file is not a database" in errors[0]
    assert time.monotonic() - start < 90


async def test_raw_sqlite_errors_become_store_errors(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    store = SQLiteStore(db)
    await store.load("s1")
    with sqlite3.connect(db) as raw:
        raw.execute("DROP TABLE messages")
        raw.execute("DROP TABLE api_keys")
    with pytest.raises(StoreError, match=r"SQLite store failed: OperationalError: no such"):
        await store.load("s1")
    with pytest.raises(StoreError, match=r"SQLite store failed"):  # the gateway's tables too
        await store.api_key("hash")
    agent = Agent(ScriptedModel(["hi"]), store=store)
    with pytest.raises(StoreError):  # not sqlite3.OperationalError
        await agent.run("hello", session="s1")
    await store.aclose()


async def test_raw_postgres_errors_become_store_errors() -> None:
    await _require_pg()
    schema = new_schema()
    store = PostgresStore(PG_DSN, schema=schema)
    try:
        await store.load("s1")
        conn = await asyncpg.connect(PG_DSN)
        await conn.execute(f'DROP TABLE "{schema}".messages CASCADE')
        await conn.close()
        with pytest.raises(StoreError, match="PostgreSQL store failed: UndefinedTableError"):
            await store.load("s1")
    finally:
        await store.aclose()
        await drop_schema(schema)


async def test_lone_surrogates_are_stored_repaired_and_later_runs_work(tmp_path: Path) -> None:
    @tool
    def listing() -> str:
        """List odd names."""
        return os.fsdecode(b"report\xff.txt")  # what the OS gives for a non-UTF-8 name

    store = SQLiteStore(tmp_path / "t.db")
    model = ScriptedModel([reply("", model_call("listing")), "saw report\udcff.txt",
                           "second turn fine"])
    agent = Agent(model, tools=[listing], store=store)
    first = await agent.run("list", session="s1")
    second = await agent.run("again", session="s1")
    assert first.status == "completed" and second.status == "completed"
    history = await store.load("s1")
    texts = [m.content for m in history]
    assert "report\ufffd.txt" in texts[2] and "saw report\ufffd.txt" in texts
    for m in history:
        m.content.encode("utf-8")
    await store.aclose()
