"""``thinkloop runs`` / ``thinkloop trace`` as a user runs them: real ``thinkloop run``
processes against the loopback server; list, show, trace and replay what they recorded,
abort one from another process, resume one whose process was killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from thinkloop.cli.app import app
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

runner = CliRunner()


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("THINKLOOP_HOME", str(tmp_path))
    monkeypatch.delenv("THINKLOOP_DATABASE_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path


def _env(server: OpenAIServer, home: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "THINKLOOP_MODEL")}
    return {**base, "OPENAI_BASE_URL": server.base_url, "THINKLOOP_HOME": str(home),
            "COLUMNS": "200"}


def _thinkloop(*args: str) -> list[str]:
    return [sys.executable, "-c", "from thinkloop.cli.app import main; main()", *args]


def _runs(*args: str) -> list[dict[str, object]]:
    out = runner.invoke(app, ["runs", *args, "--json"])
    assert out.exit_code == 0, out.output
    return [json.loads(line) for line in out.output.splitlines()]


def test_list_show_trace_and_replay_a_recorded_run(server: OpenAIServer, home: Path) -> None:
    server.clear()
    server.enqueue(
        Reply(body=completion(tool_calls=[("calculator", {"expression": "12*7"})])),
        Reply(body=completion(tool_calls=[("calculator", {"expression": "84+"})])),  # bad
        Reply(body=completion(tool_calls=[("calculator", {"expression": "84+0"})])),  # retry
        Reply(body=completion("12*7 = 84")),
    )
    live = subprocess.run(_thinkloop("run", "What is 12*7? Use the calculator.", "--model",
                                     "openai:fake", "--max-steps", "6"),
                          capture_output=True, text=True,
                          timeout=120, env=_env(server, home))
    assert live.returncode == 0, live.stderr
    # The steps go to stderr live, the answer to stdout.
    assert "-> 84" in live.stderr and "12*7 = 84" in live.stdout

    (row,) = _runs()
    assert (row["status"], row["model"], row["provider"], row["agent"], row["steps"],
            row["input_tokens"], row["output_tokens"]) == (
        "completed", "openai:fake", "openai", "thinkloop", 4, 40, 20)
    assert row["task"] == "What is 12*7? Use the calculator." and row["ended_at"]
    run_id = str(row["id"])
    assert _runs("--status", "failed") == [] and _runs("--session", "other") == []
    table = runner.invoke(app, ["runs"])
    assert run_id in table.output and "completed" in table.output

    shown = runner.invoke(app, ["runs", "show", run_id])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0].startswith(f"run {run_id}  completed  agent thinkloop  model openai:fake")
    assert "4 steps, 40 in / 20 out tokens" in shown.output
    assert '  calculator({"expression":"12*7"})' in lines and "    -> 84" in lines
    assert "step 4" in shown.output and "says 12*7 = 84" in shown.output

    traced = runner.invoke(app, ["trace", run_id])
    assert traced.exit_code == 0, traced.output
    out = traced.output
    assert "invoke_agent thinkloop" in out and "completed" in out
    assert out.count("chat openai:fake") == 4 and out.count("execute_tool calculator") == 3
    assert "10 in / 5 out tokens" in out and "step 1" in out and "error" in out  # the bad call
    spans = [json.loads(x) for x in runner.invoke(app, ["trace", run_id, "--json"])
             .output.splitlines()]
    root = spans[0]
    assert root["name"] == "invoke_agent thinkloop" and root["parent_id"] is None
    assert all(s["trace_id"] == root["trace_id"] for s in spans)

    replay = runner.invoke(app, ["runs", "replay", run_id])
    assert replay.exit_code == 0, replay.output
    # The same steps, from the record, no model call.
    steps = [ln for ln in live.stderr.splitlines() if ln.startswith(("step ", "  ->"))]
    assert len(steps) == 6
    assert [ln for ln in replay.output.splitlines() if ln.startswith(("step ", "  ->"))] == steps
    assert len(server.requests) == 4

    missing = runner.invoke(app, ["runs", "show", "nope"])
    assert missing.exit_code == 2 and "no run 'nope'" in missing.output


def _wait_for_running(timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = _runs("--status", "running")
        if rows:
            return str(rows[0]["id"])
        time.sleep(0.2)
    raise AssertionError("the run never showed up as running")


def test_abort_a_run_in_another_process(server: OpenAIServer, home: Path) -> None:
    server.clear()
    server.enqueue(Reply(body=completion("too late"), delay_s=60))
    proc = subprocess.Popen(_thinkloop("run", "take your time", "--model", "openai:fake",
                                       "--session", "s1"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(server, home))
    try:
        run_id = _wait_for_running()
        aborted = runner.invoke(app, ["runs", "abort", run_id])
        assert aborted.exit_code == 0, aborted.output
        assert f"abort requested for run {run_id}" in aborted.output
        _, out = proc.communicate(timeout=60)  # the steps and the end go to stderr
    finally:
        proc.kill()
        proc.communicate()
    assert "cancelled" in out
    (row,) = _runs()
    assert row["status"] == "cancelled" and row["error"] == (
        "aborted on request from another process")
    again = runner.invoke(app, ["runs", "abort", run_id])
    assert again.exit_code == 1 and "no run" in again.output
    # The session is intact: nothing of the aborted turn was saved.
    sessions = runner.invoke(app, ["sessions", "show", "s1"])
    assert sessions.exit_code == 1


def test_resume_a_run_whose_process_was_killed(
    server: OpenAIServer, home: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server.clear()
    server.enqueue(
        Reply(body=completion(tool_calls=[("calculator", {"expression": "6*7"})])),
        Reply(body=completion("never seen"), delay_s=60),
    )
    proc = subprocess.Popen(_thinkloop("run", "What is 6*7?", "--model", "openai:fake"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=_env(server, home))
    try:
        deadline = time.monotonic() + 90
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server.requests) == 2  # step 1 is done; the model call of step 2 hangs
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    (row,) = _runs()
    assert row["status"] == "running" and row["ended_at"] is None
    server.clear()
    server.enqueue(Reply(body=completion("6*7 = 42")))
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    resumed = runner.invoke(app, ["runs", "resume", str(row["id"]), "--json"])
    assert resumed.exit_code == 0, resumed.output
    result = json.loads(resumed.output)
    assert result["status"] == "completed" and result["output"] == "6*7 = 42"
    assert result["run_id"] == row["id"]
    assert [len(s["tool_calls"]) for s in result["steps"]] == [1, 0]
    (request,) = server.requests  # one model call: step 1 was not done again
    sent = request["messages"]
    # The turn so far comes from the checkpoint (guards may add a note after it).
    assert [m["role"] for m in sent[:4]] == ["system", "user", "assistant", "tool"]
    assert sent[3]["content"] == "42" and [m["role"] for m in sent].count("assistant") == 1
    (row,) = _runs()
    assert row["status"] == "completed" and row["steps"] == 2


def test_ids_are_whole_at_80_columns_and_a_unique_prefix_names_a_run(
    server: OpenAIServer, home: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server.clear()
    server.enqueue(Reply(body=completion("one")), Reply(body=completion("two")))
    for task in ("first task", "second task"):
        done = subprocess.run(_thinkloop("run", task, "--model", "openai:fake"),
                              capture_output=True, text=True, timeout=120,
                              env=_env(server, home))
        assert done.returncode == 0, done.stderr
    ids = [str(r["id"]) for r in _runs()]
    monkeypatch.setenv("COLUMNS", "80")
    table = runner.invoke(app, ["runs"])
    assert all(i in table.output for i in ids), table.output
    assert max(len(line) for line in table.output.splitlines()) <= 80
    # The columns shown are whole (not folded to a few letters a line); the rest are named.
    header = table.output.splitlines()[1]
    assert [c.strip() for c in header.strip("┃").split("┃")][:3] == ["run", "status", "started"]
    said = " ".join(table.output.split())
    assert "completed" in said and "(not shown at 80 columns:" in said
    assert "cost $; a wider terminal or --json shows them)" in said
    # The shortest prefix that tells the two apart names one; a shared one says so.
    n = next(k for k in range(1, 40) if ids[0][:k] != ids[1][:k])
    shown = runner.invoke(app, ["runs", "show", ids[0][:n]])
    assert shown.exit_code == 0 and shown.output.startswith(f"run {ids[0]}"), shown.output
    traced = runner.invoke(app, ["trace", ids[1][:n]])
    assert traced.exit_code == 0 and "invoke_agent" in traced.output
    if n > 1:
        both = runner.invoke(app, ["runs", "show", ids[0][: n - 1]])
        assert both.exit_code == 2 and "is the start of 2 runs' ids" in both.output
