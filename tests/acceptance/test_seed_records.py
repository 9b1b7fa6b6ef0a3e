"""Records by default: ``Agent(model)`` in a Python script keeps run records, traces and
session totals in the default store as the CLI does, and ``thinkloop sessions`` shows the
totals (the gateway's GET /v1/sessions/{id} too: tests/server/test_session_totals.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from thinkloop.testing.openai_server import OpenAIServer

from .conftest import run_python, say

CLI = [sys.executable, "-c", "from thinkloop.cli.app import main; main()"]

SCRIPT = """
from thinkloop import Agent
agent = Agent()  # every default: the default store, records, traces
for task in ("Hello", "And again"):
    r = agent.run_sync(task, session="chat")
    print(r.run_id, r.usage.input_tokens, r.usage.output_tokens, flush=True)
"""


def _cli(*args: str) -> str:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ), stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_python_agent_keeps_records_traces_and_session_totals_by_default(
        llm: OpenAIServer, tmp_path: Path) -> None:
    llm.enqueue(say("Hi."), say("Hi again."))
    done = run_python(SCRIPT)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = [line.split() for line in done.stdout.splitlines()]
    assert len(runs) == 2
    tokens_in = sum(int(r[1]) for r in runs)
    tokens_out = sum(int(r[2]) for r in runs)
    assert tokens_in > 0 and tokens_out > 0
    # The run records, newest first, in the default store (the CLI reads the same one).
    listed = [orjson.loads(line) for line in _cli("runs", "--session", "chat", "--json")
              .splitlines()]
    assert [r["id"] for r in listed] == [runs[1][0], runs[0][0]]
    assert all(r["status"] == "completed" for r in listed)
    # Each has its trace.
    assert "invoke_agent" in _cli("trace", runs[0][0])
    # The session's totals.
    [session] = [orjson.loads(line) for line in _cli("sessions", "list", "--json").splitlines()]
    assert (session["id"], session["messages"]) == ("chat", 4)
    assert (session["input_tokens"], session["output_tokens"]) == (tokens_in, tokens_out)
    assert session["model"]
    assert f"{tokens_in}/{tokens_out}" in _cli("sessions", "list")
    assert f"{tokens_in} in / {tokens_out} out tokens" in _cli("sessions", "show", "chat")
