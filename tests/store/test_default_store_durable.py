"""The library's defaults keep what a run did when the process ends badly (issue 30).

- A script that never calls ``aclose`` loses no post-turn memory: ``asyncio.run`` cancels the
  jobs still running when ``main`` returns, and their writes are redone on a store a cancel
  cannot wedge.
- ``Agent(store=None)`` records each run in the default store (SQLite under THINKLOOP_HOME),
  as the CLI does: a process killed with SIGKILL mid-turn loses nothing, and the run resumes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from tests.store.test_resume_runs import SHARED, _shared

from thinkloop import Agent
from thinkloop.store import open_store

NO_ACLOSE = textwrap.dedent(
    """
    import asyncio, sys
    from thinkloop import Agent
    from thinkloop.memory import Memory
    from thinkloop.models.scripted import ScriptedModel
    from thinkloop.store import open_store

    async def main(i):
        model = ScriptedModel([f"Nice to meet you, Ada{i}. Teal is a fine colour.",
                               f"- the user is Ada{i} and likes teal"])
        store = open_store()  # the default store; never closed
        # No embedder: importing one takes 13 s here, and the jobs write all the same.
        agent = Agent(model, store=store, memory=Memory(store, embedder=None), guard=False)
        result = await agent.run(f"My name is Ada{i}. My favorite color is teal.",
                                 user_id=f"u{i}", session=f"s{i}")
        print(result.status, flush=True)

    for i in range(int(sys.argv[1])):
        asyncio.run(main(i))
    """
)


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "THINKLOOP_HOME": str(home)}


async def test_scripts_that_never_call_aclose_lose_no_post_turn_memory(tmp_path: Path) -> None:
    home, n = tmp_path / "home", 8
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", NO_ACLOSE, str(n), env=_env(home),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    assert out.decode().split() == ["completed"] * n
    assert b"Traceback" not in err, err.decode()
    store = open_store(home / "thinkloop.db")
    try:
        for i in range(n):
            assert (await store.profile(f"user:u{i}")).get("name") == f"Ada{i}", i
            episodes = await store.memories(f"user:u{i}", "episode")
            assert len(episodes) == 1 and f"Ada{i}" in episodes[0].content, i
    finally:
        await store.aclose()


DEFAULT_STORE = SHARED + textwrap.dedent(
    """
    from thinkloop import Agent

    async def main():
        agent = Agent(Planner(), tools=[record], guard=False)  # store=None: the default
        handle = agent.start("record a, b, c and d", session="s", events=False)
        print(handle.run_id, flush=True)
        await handle.result()

    asyncio.run(main())
    """
)


async def test_kill_9_mid_turn_with_the_default_store_loses_nothing_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    home, log = tmp_path / "home", tmp_path / "side-effects.log"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", DEFAULT_STORE, str(home / "thinkloop.db"), str(log), "tool:c",
        stdout=asyncio.subprocess.PIPE, env=_env(home))
    assert proc.stdout is not None
    try:
        run_id = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip()
        assert (await asyncio.wait_for(proc.stdout.readline(), 60)).strip() == b"HANG"
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    assert sorted(log.read_text().split()) == ["a", "b"]  # killed inside call "c"

    monkeypatch.setenv("THINKLOOP_HOME", str(home))
    space = _shared(log)
    agent = Agent(space["Planner"](), tools=[space["record"]], guard=False)  # type: ignore[operator]
    try:
        rec = await agent.store.get_run(run_id)  # type: ignore[attr-defined]
        assert rec is not None and rec.status == "running"
        result = await asyncio.wait_for(agent.resume_run(run_id), 30)
        assert result.status == "completed", result.error
        assert sorted(log.read_text().split()) == ["a", "b", "c", "d"]  # each exactly once
        turn = await agent.store.load("s")
        assert [m.content for m in turn if m.role == "tool"] == [
            "recorded a", "recorded b", "recorded c", "recorded d"]
        info = await agent.store.session_info("s")  # type: ignore[attr-defined]
        assert info is not None and info.messages == 9
    finally:
        await agent.aclose()
