"""Workspace attacks a hostile model tried: planted links, swapped directories, racing edits,
backtracking patterns, FIFOs and file names that are not UTF-8."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from pathlib import Path

import pytest
from tests.tools.helpers import call, ctx

from thinkloop.tools.base import Tool
from thinkloop.tools.builtin import files
from thinkloop.tools.builtin.files import file_tools
from thinkloop.tools.builtin.settings import ToolSettings
from thinkloop.tools.builtin.shell import shell_tool
from thinkloop.tools.execute import run_call
from thinkloop.tools.workspace import Workspace
from thinkloop.types import ToolCall


@pytest.fixture
def tools(workspace: Workspace, settings: ToolSettings) -> list[Tool]:
    return [*file_tools(workspace, settings), shell_tool(workspace, settings)]


async def test_link_planted_at_another_users_folder_is_refused(
    tools: list[Tool], workspace: Workspace
) -> None:
    mallory = workspace.root("mallory")
    # Planted where bob's folder will be: bob's files would land in mallory's folder.
    (workspace.base / "bob").symlink_to(mallory, target_is_directory=True)
    for name, args in [("write_file", {"path": "diary.txt", "content": "dear diary"}),
                       ("list_dir", {}), ("shell", {"command": "echo x > diary.txt"})]:
        r = await call(tools, name, user="bob", **args)
        assert r.is_error and "symbolic link 'bob'" in r.content, (name, r.content)
    assert list(mallory.iterdir()) == []


async def test_directory_swapped_for_a_link_never_leads_outside(
    tools: list[Tool], workspace: Workspace, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("outside secret")
    root = workspace.root("alice")
    (root / "d").mkdir()
    (root / "d" / "f.txt").write_text("inside")
    stop = threading.Event()

    def swap() -> None:  # the attacker flips d between a directory and a link to outside
        real, link = root / "d.real", root / "d.link"
        link.symlink_to(outside, target_is_directory=True)
        os.rename(root / "d", real)
        steps = [(link, root / "d"), (root / "d", link), (real, root / "d"), (root / "d", real)]
        while not stop.is_set():
            for src, dst in steps:
                with contextlib.suppress(OSError):  # a tool may have made a new d meanwhile
                    os.rename(src, dst)

    t = threading.Thread(target=swap)
    t.start()
    try:
        results = []
        for i in range(150):
            results.append(await call(tools, "read_file", path="d/f.txt"))
            results.append(await call(tools, "write_file", path="d/f.txt", content=f"w{i}"))
    finally:
        stop.set()
        t.join()
    assert not any("outside secret" in r.content for r in results)
    assert (outside / "f.txt").read_text() == "outside secret"
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]


async def test_parallel_edits_of_one_file_all_land(
    tools: list[Tool], workspace: Workspace
) -> None:
    by_name = {t.name: t for t in tools}
    path = workspace.root("alice") / "list.txt"
    for trial in range(20):
        path.write_text("a=0\nb=0\nc=0\n")
        calls = [ToolCall(f"c{k}", "edit_file", {"path": "list.txt", "old_string": f"{k}=0",
                                                 "new_string": f"{k}={trial + 1}"})
                 for k in "abc"]
        results = await asyncio.gather(*(run_call(by_name, c, ctx(), 10.0) for c in calls))
        assert [r.is_error for r in results] == [False] * 3
        n = trial + 1
        assert path.read_text() == f"a={n}\nb={n}\nc={n}\n", trial


async def test_backtracking_grep_ends_in_time_and_never_freezes_the_loop(
    tools: list[Tool], workspace: Workspace
) -> None:
    (workspace.root("alice") / "x.txt").write_text(("x" * 4000 + "\n") * 3)
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.02)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    by_name = {t.name: t for t in tools}
    start = time.monotonic()
    # The run's tool timeout (2 s) ends the call; the match itself stops at its CPU budget.
    r = await run_call(by_name, ToolCall("c1", "grep", {"pattern": "(x+x+)+y"}), ctx(), 2.0)
    elapsed = time.monotonic() - start
    tick.cancel()
    assert r.is_error and ("timed out after 2s" in r.content or "of CPU" in r.content)
    assert elapsed < 3.5
    assert max(gaps) < 1.0  # the event loop kept running while the pattern backtracked


async def test_backtracking_grep_stops_at_its_cpu_budget(
    tools: list[Tool], workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "GREP_TIME_S", 0.3)
    (workspace.root("alice") / "x.txt").write_text("x" * 4000 + "\n")
    r = await call(tools, "grep", pattern="(x+x+)+y")
    assert r.is_error and "used more than 0.3s of CPU" in r.content


async def test_a_fifo_cannot_hang_read_file(tools: list[Tool], workspace: Workspace) -> None:
    os.mkfifo(workspace.root("alice") / "pipe")
    r = await asyncio.wait_for(call(tools, "read_file", path="pipe"), 5)
    assert r.is_error and "not a regular file" in r.content
    g = await asyncio.wait_for(call(tools, "grep", pattern="x"), 5)
    assert g.content == "no matches"


async def test_non_utf8_file_names_come_back_as_valid_text(
    tools: list[Tool], workspace: Workspace
) -> None:
    root = workspace.root("alice")
    (root / os.fsdecode(b"bad\xff.txt")).write_bytes(b"caf\xe9\n")
    for name, args in [("list_dir", {}), ("glob", {"pattern": "*"}),
                       ("grep", {"pattern": "caf"}), ("shell", {"command": "ls; cat bad*"})]:
        r = await call(tools, name, **args)
        assert not r.is_error, (name, r.content)
        r.content.encode("utf-8")  # no lone surrogate left
        assert "bad\ufffd.txt" in r.content or "caf\ufffd" in r.content, (name, r.content)


async def test_a_project_workspace_is_the_directory_itself_and_still_confines(
    tmp_path: Path
) -> None:
    # thinkloop run --workspace DIR: every user works in DIR itself, with the same refusals.
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("print('hi')\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside secret")
    (project / "escape").symlink_to(outside, target_is_directory=True)
    settings = ToolSettings(workspace=project, workspace_per_user=False, sandbox="none")
    workspace = Workspace.of(settings)
    assert workspace.root(None) == workspace.root("bob") == project.resolve()
    tools = [*file_tools(workspace, settings), shell_tool(workspace, settings)]

    read = await call(tools, "read_file", user="bob", path="app.py")
    assert not read.is_error and "print('hi')" in read.content
    wrote = await call(tools, "write_file", path="notes/todo.txt", content="ship it")
    assert not wrote.is_error and (project / "notes" / "todo.txt").read_text() == "ship it"
    shell = await call(tools, "shell", command="pwd && ls")
    assert not shell.is_error and str(project.resolve()) in shell.content
    for name, args in [("read_file", {"path": "../outside/secret.txt"}),
                       ("read_file", {"path": str(outside / "secret.txt")}),
                       ("read_file", {"path": "escape/secret.txt"}),
                       ("write_file", {"path": "escape/planted.txt", "content": "x"}),
                       ("list_dir", {"path": "escape"})]:
        r = await call(tools, name, **args)
        assert r.is_error and "secret" not in r.content.replace(
            "secret.txt", ""), (name, r.content)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
