"""A damaged SQLite store as a person meets it: a truncated copy or a file overwritten with
something else. Every command that opens the store says so in one line on stderr, naming the
file and what to do, and exits 1; no traceback, no model call, no answer."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from thinkloop.testing.openai_server import OpenAIServer


def _good(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (body TEXT)")
    db.executemany("INSERT INTO notes VALUES (?)", [("x" * 2000,)] * 100)
    db.commit()
    db.close()


def truncated(path: Path, keep: float) -> None:
    _good(path)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def garbage(path: Path) -> None:
    path.write_bytes(os.urandom(64 * 1024))


DAMAGE = {
    "truncated-to-a-third": lambda p: truncated(p, 1 / 3),
    "truncated-by-one-page": lambda p: truncated(p, 0.98),
    "garbage": garbage,
}


@pytest.fixture(scope="module")
def model() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


COMMANDS = {
    "run": ["run", "hello", "--model", "openai:fake"],
    "runs": ["runs"],
    "sessions": ["sessions", "list"],
    "serve": ["serve", "--no-auth", "--port", "PORT"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_store_is_one_line_and_exit_1(
    command: str, damage: str, tmp_path: Path, model: OpenAIServer
) -> None:
    db = tmp_path / "home" / "thinkloop.db"
    db.parent.mkdir()
    DAMAGE[damage](db)
    before = db.read_bytes()
    model.clear()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("THINKLOOP_", "OPENAI_", "ANTHROPIC_"))}
    env.update({"THINKLOOP_HOME": str(db.parent), "OPENAI_BASE_URL": model.base_url,
                "OPENAI_API_KEY": "sk-test", "THINKLOOP_TOOLS_SANDBOX": "none"})
    args = [str(_port()) if a == "PORT" else a for a in COMMANDS[command]]
    proc = subprocess.run(
        [sys.executable, "-c", "from thinkloop.cli.app import main; main()", *args],
        capture_output=True, text=True, timeout=120, env=env)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    if command in ("run", "serve"):  # their banner line comes first
        lines = [ln for ln in lines if not ln.startswith(("model:", "thinkloop gateway on"))]
    assert (proc.returncode, len(lines)) == (1, 1), proc.stderr
    (line,) = lines
    assert line.startswith(f"error: SQLite database {db} is damaged or not a thinkloop "
                           "database (")
    assert f"move it aside (mv {db} {db}.damaged)" in line
    assert proc.stdout == "" and model.requests == []
    assert db.read_bytes() == before  # nothing was written over what is left of it
