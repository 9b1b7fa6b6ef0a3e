"""The ``thinkloop`` command as a user runs it: a real process against a loopback server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from thinkloop.cli.app import EXIT_CODES
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def thinkloop(
    *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "THINKLOOP_MODEL")}
    return subprocess.run(
        [sys.executable, "-c", "from thinkloop.cli.app import main; main()", *args],
        capture_output=True, text=True, timeout=300, env={**base, **(env or {})}, input=stdin,
    )


def test_run_json_against_openai_compatible_endpoint(server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(
        Reply(body=completion(tool_calls=[("calculator", {"expression": "12*7"})])),
        Reply(body=completion("12*7 = 84")),
    )
    proc = thinkloop("run", "What is 12*7? Use the calculator.", "--model", "openai:fake",
                     "--json", env={"OPENAI_BASE_URL": server.base_url})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "completed" and out["output"] == "12*7 = 84"
    assert out["model"] == "openai:fake"
    assert out["steps"][0]["tool_calls"][0]["name"] == "calculator"
    result = out["steps"][0]["results"][0]
    assert result["call"] == {"id": "call_0", "name": "calculator",
                              "arguments": {"expression": "12*7"}}
    assert (result["content"], result["is_error"]) == ("84", False)
    assert out["usage"]["requests"] == 2
    assert server.requests[0]["messages"][1]["content"] == "What is 12*7? Use the calculator."


def test_run_shows_steps_live(server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(
        Reply(body=completion(tool_calls=[("calculator", {"expression": "2**10"})])),
        Reply(body=completion("1024")),
    )
    proc = thinkloop("run", "2**10?", "--model", "openai:fake",
                     env={"OPENAI_BASE_URL": server.base_url, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    # Progress on stderr; the answer once, alone, on stdout (plain text when piped).
    assert "model: openai:fake" in proc.stderr
    assert "calculator" in proc.stderr and "-> 1024" in proc.stderr
    assert "2 model calls" in proc.stderr and "1024" not in proc.stderr.split("-> 1024", 1)[1]
    assert proc.stdout == "1024\n"


@pytest.mark.parametrize(
    ("args", "env", "code", "message"),
    [
        (["--model", "nope:x"], {}, 2, "error: unknown model provider 'nope'"),
        (["--model", "openai:gpt-4o-mini"], {}, 2, "error: model 'openai:gpt-4o-mini' needs"),
        (["--model", "openai:x"], {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, 1,
         "cannot reach http://127.0.0.1:9/v1"),
    ],
)
def test_failures_are_one_clear_line(
    args: list[str], env: dict[str, str], code: int, message: str
) -> None:
    proc = thinkloop("run", "hi", *args, env=env)
    assert proc.returncode == code
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_tools_lists_calculator_with_schema() -> None:
    proc = thinkloop("tools", "--json")
    assert proc.returncode == 0, proc.stderr
    tools = {t["name"]: t for t in json.loads(proc.stdout)}
    assert tools["calculator"]["parameters"]["required"] == ["expression"]
    assert set(tools) == {
        "read_file", "write_file", "edit_file", "list_dir", "glob", "grep", "shell",
        "web_fetch", "web_search", "browser_open", "browser_snapshot", "browser_click",
        "browser_type", "browser_screenshot", "send_message", "ask_human", "calculator",
        "spawn_agent", "search_tools", "run_workflow", "remember", "recall", "forget"}
    assert tools["shell"]["needs"] is None and "store" in tools["remember"]["needs"]
    assert all(t["parameters"]["type"] == "object" for t in tools.values())


def test_run_with_file_context_reaches_the_model(server: OpenAIServer, tmp_path: object) -> None:
    from pathlib import Path

    notes = Path(str(tmp_path)) / "notes.md"
    notes.write_text("The launch code is 4711.")
    server.clear()
    server.enqueue(Reply(body=completion("4711")))
    proc = thinkloop("run", "What is the launch code?", "--model", "openai:fake", "--json",
                     "--file", str(notes), env={"OPENAI_BASE_URL": server.base_url})
    assert proc.returncode == 0, proc.stderr
    user = server.requests[0]["messages"][1]["content"]
    assert "The launch code is 4711." in user and user.endswith("What is the launch code?")


def test_prompt_command_shows_sections() -> None:
    proc = thinkloop("prompt", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "identity" in proc.stdout


def test_run_with_an_mcp_server(server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(
        Reply(body=completion(tool_calls=[("time_convert_time", {
            "source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})])),
        Reply(body=completion("21:00 in Tokyo")),
    )
    spec = f"trusted:time={sys.executable} -m mcp_server_time --local-timezone UTC"
    proc = thinkloop("run", "noon UTC in Tokyo?", "--model", "openai:fake", "--json",
                     "--tools", "none", "--mcp", spec,
                     env={"OPENAI_BASE_URL": server.base_url})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    sent = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert sent == {"time_convert_time", "time_get_current_time"}
    obs = out["steps"][0]["results"][0]
    assert not obs["is_error"] and "21:00" in obs["content"]
    assert out["output"] == "21:00 in Tokyo"


def test_session_survives_across_processes(server: OpenAIServer, tmp_path: object) -> None:
    env = {"OPENAI_BASE_URL": server.base_url, "THINKLOOP_HOME": str(tmp_path)}
    server.clear()
    server.enqueue(Reply(body=completion("Nice to meet you, Ada.")),
                   Reply(body=completion("- Ada introduced herself.")),  # post-turn summary
                   Reply(body=completion("You are Ada.")))
    first = thinkloop("run", "My name is Ada.", "--model", "openai:fake", "--session", "s1",
                      "--json", env=env)
    assert first.returncode == 0, first.stderr
    second = thinkloop("run", "Who am I?", "--model", "openai:fake", "--session", "s1",
                       "--json", env=env)
    assert second.returncode == 0, second.stderr
    summary_request = server.requests[1]["messages"][-1]["content"]
    assert "user: My name is Ada.\nassistant: Nice to meet you, Ada." in summary_request
    sent = [(m["role"], m["content"]) for m in server.requests[2]["messages"][1:]]
    assert sent == [("user", "My name is Ada."), ("assistant", "Nice to meet you, Ada."),
                    ("user", "Who am I?")]
    # the memory layers reached the second run's system prompt
    assert "Ada introduced herself." in server.requests[2]["messages"][0]["content"]
    assert json.loads(second.stdout)["output"] == "You are Ada."
    listing = thinkloop("sessions", "list", "--json", env=env)
    assert listing.returncode == 0, listing.stderr
    rows = [json.loads(line) for line in listing.stdout.splitlines()]
    assert [(r["id"], r["messages"]) for r in rows] == [("s1", 4)]


@pytest.mark.parametrize(("answer", "observation"), [
    ("Lisbon\n", "The user answered: Lisbon"),
    ("", "Error: the console closed before an answer was given"),
])
def test_ask_human_talks_on_stderr_and_keeps_json_clean(
    server: OpenAIServer, answer: str, observation: str
) -> None:
    server.clear()
    server.enqueue(Reply(body=completion(tool_calls=[("ask_human", {"question": "Which city?"})])),
                   Reply(body=completion("Booked.")))
    proc = thinkloop("run", "plan a trip", "--model", "openai:fake", "--json", "--max-steps", "2",
                     env={"OPENAI_BASE_URL": server.base_url}, stdin=answer)
    assert "[agent] Which city?" in proc.stderr
    out = json.loads(proc.stdout)  # nothing but the RunResult on stdout
    assert proc.returncode == EXIT_CODES[out["status"]], proc.stderr
    content = out["steps"][0]["results"][0]["content"]
    assert observation in content
