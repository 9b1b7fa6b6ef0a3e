"""Tools that change or send need a person's yes: the CLI asks on a terminal and, without one
and without ``--approve``, refuses such calls and says which flag allows them."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import orjson

from thinkloop.testing.openai_server import OpenAIServer
from thinkloop.tools.defaults import default_tools

from .conftest import calls, say

CLI = [sys.executable, "-c", "from thinkloop.cli.app import main; main()"]
TASK = ["run", "Write 'hi' to hello.txt.", "--tools", "write_file,read_file", "--json"]


def _script(llm: OpenAIServer) -> None:
    llm.enqueue(calls(("write_file", {"path": "hello.txt", "content": "hi"})),
                say("I wrote 'hi' to hello.txt."))


def test_builtins_that_change_or_send_need_approval() -> None:
    tools = default_tools("default")
    needs = sorted(t.name for t in tools if t.needs_approval)
    assert needs == ["browser_click", "browser_type", "edit_file", "send_message", "shell",
                     "write_file"]


def test_without_a_terminal_the_call_is_refused_naming_the_flag(
        llm: OpenAIServer, tmp_path: Path) -> None:
    _script(llm)
    done = subprocess.run([*CLI, *TASK], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    result = orjson.loads(done.stdout)
    observation = result["steps"][0]["results"][0]["content"]
    assert observation.startswith("Not approved: write_file needs approval and there is no "
                                  "terminal to ask on; run again with --approve auto")
    assert "--approve auto" in done.stderr
    assert not (tmp_path / "workspace" / "default" / "hello.txt").exists()
    # With the flag the same call runs.
    _script(llm)
    done = subprocess.run([*CLI, *TASK, "--approve", "auto"], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "workspace" / "default" / "hello.txt").read_text() == "hi"


def test_on_a_terminal_the_cli_asks_and_a_yes_runs_the_call(
        llm: OpenAIServer, tmp_path: Path) -> None:
    _script(llm)
    master, slave = pty.openpty()
    os.write(master, b"y\n")  # the person's answer, typed ahead of the question
    try:
        done = subprocess.run([*CLI, *TASK], stdin=slave, capture_output=True, text=True,
                              timeout=120)
    finally:
        os.close(slave)
        os.close(master)
    assert done.returncode == 0, done.stderr
    assert "Approve tool call write_file" in done.stderr
    assert (tmp_path / "workspace" / "default" / "hello.txt").read_text() == "hi"
    result = orjson.loads(done.stdout)
    assert result["status"] == "completed" and result["text"] == "I wrote 'hi' to hello.txt."
