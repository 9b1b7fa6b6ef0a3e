"""``thinkloop run --stdio`` as a container host drives it: a real process, JSON on stdin,
marker blocks on stdout, against the loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.cli.conftest import clean_env, read_blocks

from thinkloop.cli.stdio import OUTPUT_END, OUTPUT_START
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

SECRET = "sk-container-7f3a9c1e5b"
LABEL = "blue-harbor-42"


def host(payload: Any, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    stdin = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        [sys.executable, "-c", "from thinkloop.cli.app import main; main()", "run", "--stdio"],
        capture_output=True, text=True, timeout=60, env=clean_env(**(env or {})), input=stdin,
    )


def blocks(stdout: str) -> list[dict[str, Any]]:
    """What a host reads: the JSON between each pair of markers, line by line."""
    return read_blocks(stdout.splitlines(), (OUTPUT_START, OUTPUT_END))


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_streams_progress_and_writes_the_result(server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(
        Reply(body=completion("Let me compute that first.",
                              tool_calls=[("calculator", {"expression": "12*7"})])),
        Reply(body=completion("12*7 = 84")),
    )
    proc = host({"task": "What is 12*7?", "session": "chat-1", "user": "ana",
                 "model": "openai:fake",
                 "secrets": {"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": server.base_url}})
    assert proc.returncode == 0, proc.stderr
    got = blocks(proc.stdout)
    assert [b["status"] for b in got] == ["running", "success"]
    assert got[0]["result"] == "Let me compute that first." and got[0]["session_id"] == "chat-1"
    final = got[1]
    assert final["result"] == "12*7 = 84" and final["session_id"] == "chat-1"
    assert final["run_status"] == "completed" and final["usage"]["requests"] == 2
    # The secret reached the provider as its key, and nothing the process wrote shows it.
    assert server.headers[0]["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in proc.stdout and SECRET not in proc.stderr
    assert tool_results(server.requests[1]) == ["84"]

    # The next container start with the same session continues the conversation.
    server.clear()
    server.enqueue(Reply(body=completion("You asked about 12*7.")))
    proc = host({"task": "What did I ask?", "session": "chat-1", "user": "ana",
                 "model": "openai:fake",
                 "secrets": {"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": server.base_url}})
    assert proc.returncode == 0, proc.stderr
    assert blocks(proc.stdout)[-1]["result"] == "You asked about 12*7."
    contents = [m.get("content") for m in server.requests[0]["messages"]]
    assert "What is 12*7?" in contents and "12*7 = 84" in contents
    assert contents[-1] == "What did I ask?"


def test_secrets_reach_tools_as_env_and_are_never_written(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.clear()
    server.enqueue(
        Reply(body=completion(tool_calls=[("shell", {"command": "echo label=$BUILD_LABEL"})])),
        # A hostile model repeats the secret values in its answer.
        Reply(body=completion(f"The label is {LABEL} and the key is {SECRET}.")),
    )
    proc = host({"task": "Which build label is set?", "model": "openai:fake", "tools": "shell",
                 "approve": "auto",
                 "secrets": {"OPENAI_API_KEY": SECRET, "BUILD_LABEL": LABEL,
                             "OPENAI_BASE_URL": server.base_url}},
                # Beside the home, not holding it (the settings refuse that).
                env={"THINKLOOP_TOOLS_WORKSPACE": str(tmp_path / "workspace")})
    assert proc.returncode == 0, proc.stderr
    # The tool saw the variable: its output went back to the model.
    (out,) = tool_results(server.requests[1])
    assert f"label={LABEL}" in out
    final = blocks(proc.stdout)[-1]
    assert final["result"] == "The label is [redacted] and the key is [redacted]."
    for value in (SECRET, LABEL):
        assert value not in proc.stdout and value not in proc.stderr


def test_a_failed_run_is_an_error_block_and_exit_1(server: OpenAIServer) -> None:
    proc = host({"task": "hi", "session": "chat-2", "model": "openai:fake",
                 "secrets": {"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}})
    assert proc.returncode == 1
    (final,) = blocks(proc.stdout)
    assert final["status"] == "error" and final["result"] is None
    assert final["session_id"] == "chat-2" and final["run_status"] == "failed"
    # It says what failed; the endpoint itself came as a secret, so it is redacted too.
    assert "cannot reach [redacted]/chat/completions" in final["error"]
    assert SECRET not in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ("", "invalid payload"),
        ("{not json", "invalid payload"),
        ({"session": "s"}, "task: Field required"),
        ({"task": "hi", "secret": {"A": "b"}}, "secret: Extra inputs are not permitted"),
        ({"task": "hi", "max_steps": 0}, "max_steps: Input should be greater than or equal to 1"),
        ({"task": "hi", "approve": "ask"}, "approve: Input should be 'auto' or 'deny'"),
    ],
)
def test_bad_payloads_get_one_clear_error(stdin: Any, message: str) -> None:
    proc = host(stdin)
    assert proc.returncode == 1
    (final,) = blocks(proc.stdout)
    assert final["status"] == "error" and message in final["error"]
