"""Checkpoints: a process killed mid-run, the run resumed in another process, every tool
call executed exactly once (side effects counted in a file)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from thinkloop import Agent, ModelSettings, tool
from thinkloop.errors import RunAccessError
from thinkloop.models.scripted import call, reply
from thinkloop.store import PostgresStore, SQLiteStore, open_store
from thinkloop.types import Message, ModelResponse, TextDelta, ToolSpec

Backend = SQLiteStore | PostgresStore

# The same tool and the same competent model in both processes; the first one hangs where
# the test kills it (in a model call, or in a tool while its sibling call has finished).
SHARED = textwrap.dedent(
    """
    import asyncio, sys
    from thinkloop import ToolContext, tool
    from thinkloop.models.scripted import call, reply

    LOG, HANG = sys.argv[2], sys.argv[3]

    async def sibling_recorded(run_id):
        # Hang only once the sibling call's result is in the checkpoints, so the kill lands
        # after it for sure (a result not yet recorded may run again: at least once).
        from thinkloop.store import open_store
        store = open_store(sys.argv[1])
        while not any(b"recorded b" in data for _, data in await store.checkpoints(run_id)):
            await asyncio.sleep(0.01)
        await store.aclose()

    @tool
    async def record(ctx: ToolContext, item: str) -> str:
        "Record an item (a side effect: one line in the log)."
        if HANG == "tool:" + item:
            await sibling_recorded(ctx.run_id)
            print("HANG", flush=True)
            await asyncio.sleep(3600)
        with open(LOG, "a") as f:
            f.write(item + "\\n")
        return "recorded " + item

    class Planner:
        name = "scripted:planner"

        def decide(self, messages):
            done = sum(m.role == "tool" for m in messages)
            if HANG == f"model:{done}":
                return None
            if done == 0:
                return reply("", call("record", item="a"), thought="first a")
            if done == 1:
                return reply("", call("record", item="b"), call("record", item="c"))
            if done == 3:
                return reply("", call("record", item="d"))
            return reply("recorded a, b, c and d")

        async def complete(self, messages, tools, settings):
            r = self.decide(messages)
            if r is None:
                print("HANG", flush=True)
                await asyncio.sleep(3600)
            return r

        async def stream(self, messages, tools, settings):
            yield await self.complete(messages, tools, settings)
    """
)
FIRST = SHARED + textwrap.dedent(
    """
    from thinkloop import Agent
    from thinkloop.store import open_store

    async def main():
        agent = Agent(Planner(), tools=[record], store=open_store(sys.argv[1]), guard=False)
        handle = agent.start("record a, b, c and d", session="s", events=False)
        print(handle.run_id, flush=True)
        await handle.result()

    asyncio.run(main())
    """
)


def _shared(log: Path) -> dict[str, object]:
    space: dict[str, object] = {}
    sys_argv, sys.argv = sys.argv, ["x", "", str(log), "none"]
    try:
        exec(compile(SHARED, "shared", "exec"), space)
    finally:
        sys.argv = sys_argv
    return space


async def _start_and_kill(store_url: str, log: Path, hang: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", FIRST, store_url, str(log), hang,
        stdout=asyncio.subprocess.PIPE, env=env)
    assert proc.stdout is not None
    try:
        run_id = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip()
        assert (await asyncio.wait_for(proc.stdout.readline(), 60)).strip() == b"HANG"
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return run_id


@pytest.mark.parametrize("hang", ["model:3", "tool:c"])
async def test_a_killed_run_resumes_in_another_process_and_runs_each_tool_once(
    store_url: str, tmp_path: Path, hang: str,
) -> None:
    log = tmp_path / "side-effects.log"
    run_id = await _start_and_kill(store_url, log, hang)
    before = sorted(log.read_text().split())
    # Killed in the model call after step 2, or in call "c" after its sibling "b" finished.
    assert before == (["a", "b", "c"] if hang == "model:3" else ["a", "b"])
    store = open_store(store_url)
    try:
        rec = await store.get_run(run_id)
        assert rec is not None and rec.status == "running" and rec.ended_at is None
        space = _shared(log)
        agent = Agent(space["Planner"](), tools=[space["record"]], store=store,  # type: ignore[operator]
                      guard=False)
        result = await asyncio.wait_for(agent.resume_run(run_id), 30)
        assert result.status == "completed", result.error
        assert result.run_id == run_id and result.text == "recorded a, b, c and d"
        assert sorted(log.read_text().split()) == ["a", "b", "c", "d"]  # each exactly once
        assert [len(s.tool_calls) for s in result.steps] == [1, 2, 1, 0]
        assert result.steps[0].thought == "first a"
        assert [r.content for r in result.steps[1].results] == ["recorded b", "recorded c"]
        # The session holds the whole turn, as if the run had never been interrupted.
        turn = await store.load("s")
        assert [(m.role, len(m.tool_calls)) for m in turn] == [
            ("user", 0), ("assistant", 1), ("tool", 0), ("assistant", 2), ("tool", 0),
            ("tool", 0), ("assistant", 1), ("tool", 0), ("assistant", 0)]
        assert [m.content for m in turn if m.role == "tool"] == [
            "recorded a", "recorded b", "recorded c", "recorded d"]
        rec = await store.get_run(run_id)
        assert rec is not None and rec.status == "completed" and rec.steps == 4
        assert rec.ended_at is not None
        with pytest.raises(RunAccessError, match="ended"):
            await agent.resume_run(run_id)
    finally:
        await store.aclose()


async def test_a_live_run_cannot_be_resumed_from_elsewhere(store_url: str) -> None:
    started = asyncio.Event()

    @tool
    async def wait(label: str) -> str:
        """Wait."""
        started.set()
        await asyncio.sleep(3600)
        return label

    owner_store, other_store = open_store(store_url), open_store(store_url)
    try:
        owner = Agent(_Calls(), tools=[wait], store=owner_store, guard=False)
        handle = owner.start("wait", session="s")
        await asyncio.wait_for(started.wait(), 10)
        with pytest.raises(RunAccessError, match="in this process"):
            await owner.resume_run(handle.run_id)
        other = Agent(_Calls(), tools=[wait], store=other_store, guard=False)
        with pytest.raises(RunAccessError, match="still running in another process"):
            await other.resume_run(handle.run_id)
        assert (await other_store.get_run(handle.run_id)).status == "running"  # type: ignore[union-attr]
        with pytest.raises(RunAccessError, match="no run"):
            await other.resume_run("nope")
        handle.cancel()
        await handle.result()
    finally:
        await owner_store.aclose()
        await other_store.aclose()


class _Calls:
    name = "scripted:calls"

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec],
                       settings: ModelSettings) -> ModelResponse:
        return reply("", call("wait", label="x"))

    async def stream(self, messages: Sequence[Message], tools: Sequence[ToolSpec],
                     settings: ModelSettings) -> AsyncIterator[TextDelta | ModelResponse]:
        yield await self.complete(messages, tools, settings)
