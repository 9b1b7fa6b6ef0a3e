from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from tests.tools.helpers import call

from thinkloop.sandbox import NoSandbox, allowed_env
from thinkloop.tools.builtin.process import run_process
from thinkloop.tools.builtin.settings import ToolSettings
from thinkloop.tools.builtin.shell import shell_tool
from thinkloop.tools.workspace import Workspace


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); count it as gone.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"


async def test_shell_runs_in_workspace_with_exit_code(
    workspace: Workspace, settings: ToolSettings
) -> None:
    tools = [shell_tool(workspace, settings)]
    r = await call(tools, "shell", command="pwd; echo hi > made.txt; echo oops >&2; exit 3")
    root = workspace.root("alice")
    assert not r.is_error
    assert r.content == f"exit code: 3\n{root}\noops"
    assert (root / "made.txt").read_text() == "hi\n"


async def test_shell_env_is_scrubbed(
    workspace: Workspace, settings: ToolSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-123")
    monkeypatch.setenv("GH_TOKEN", "ghp-1")
    monkeypatch.setenv("MY_SECRET_THING", "s")
    monkeypatch.setenv("DB_PASSWORD", "p")
    monkeypatch.setenv("HARMLESS", "visible")
    monkeypatch.setenv("LANG", "C.UTF-8")
    tools = [shell_tool(workspace, settings)]
    r = await call(tools, "shell", command="env | sort")
    # An allow list: only named variables pass, harmless-looking or not.
    assert "LANG=C.UTF-8" in r.content and "HARMLESS" not in r.content
    for leaked in ("sk-123", "ghp-1", "MY_SECRET_THING", "DB_PASSWORD"):
        assert leaked not in r.content
    assert allowed_env(("PATH",), {"A": "1"}, {"X_KEY": "k", "PATH": "/bin"}) == {
        "PATH": "/bin", "A": "1"}


async def test_shell_timeout_kills_process_tree(
    workspace: Workspace, settings: ToolSettings
) -> None:
    # Unconfined: the process group is what ends the tree (bwrap: tests/sandbox).
    tools = [shell_tool(workspace, settings, NoSandbox())]
    # The child shell starts a grandchild that would outlive a plain kill of the shell.
    cmd = "sh -c 'sleep 30 & echo $! > grandchild.pid; wait' & echo started; wait"
    start = time.monotonic()
    r = await call(tools, "shell", command=cmd, timeout_s=1.0)
    assert time.monotonic() - start < 5
    assert r.is_error
    assert "timed out after 1s; every process it started was killed" in r.content
    assert "started" in r.content
    pid = int((workspace.root("alice") / "grandchild.pid").read_text())
    deadline = time.monotonic() + 2
    while _alive(pid) and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    assert not _alive(pid)


async def test_background_leftovers_do_not_hang_a_finished_command(tmp_path: Path) -> None:
    start = time.monotonic()
    res = await run_process("sleep 30 & echo done", cwd=tmp_path, timeout_s=10, cap=1000)
    assert time.monotonic() - start < 3
    assert (res.exit_code, res.output, res.timed_out) == (0, b"done\n", False)


async def test_output_cap_truncates_with_note(
    workspace: Workspace, tmp_path: Path
) -> None:
    settings = ToolSettings(workspace=tmp_path / "ws", output_cap_bytes=1000)
    tools = [shell_tool(workspace, settings)]
    r = await call(tools, "shell", command="head -c 5000000 /dev/zero | tr '\\0' x")
    assert not r.is_error
    head, note = r.content.rsplit("\n", 1)
    assert head == "exit code: 0\n" + "x" * 1000
    assert note == "[output truncated: showed the first 1000 of 5000000 bytes (cap 1000 bytes)]"


async def test_bad_timeout_is_an_argument_error(
    workspace: Workspace, settings: ToolSettings
) -> None:
    r = await call([shell_tool(workspace, settings)], "shell", command="true", timeout_s=10_000)
    assert r.is_error and "timeout_s must be between" in r.content
