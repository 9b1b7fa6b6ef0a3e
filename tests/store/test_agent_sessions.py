"""Runs persisted through a durable store: whole turns or nothing, one run at a time."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from collections.abc import Sequence

from thinkloop import Agent, ScriptedModel, tool
from thinkloop.models.scripted import call, reply
from thinkloop.store import PostgresStore, SQLiteStore, open_store
from thinkloop.types import Message, ModelResponse, ToolSpec

Backend = SQLiteStore | PostgresStore


@tool
async def echo(text: str) -> str:
    """Echo the text back."""
    await asyncio.sleep(0.001)
    return f"echo:{text}"


@tool
async def hang(text: str) -> str:
    """Never returns."""
    await asyncio.sleep(3600)
    return text


def tool_then_answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
    """Call echo on the task, then answer with what it returned."""
    last = messages[-1]
    if last.role == "user":
        return reply("", call("echo", text=last.content))
    return reply(f"answer:{last.content}")


async def test_a_session_continues_across_runs_and_restarts(store_url: str) -> None:
    first = open_store(store_url)
    model = ScriptedModel(["Hi Ada.", "Your name is Ada."])
    r1 = await Agent(model, store=first, guard=False).run("I am Ada.", session="chat")
    assert r1.status == "completed"
    await first.aclose()

    second = open_store(store_url)  # a new process would do exactly this
    try:
        agent = Agent(model, store=second, instructions="Be brief.", guard=False)
        r2 = await agent.run("What is my name?", session="chat")
        assert r2.text == "Your name is Ada."
        sent = model.calls[1].messages
        assert [(m.role, m.content) for m in sent[1:]] == [
            ("user", "I am Ada."), ("assistant", "Hi Ada."),
            ("user", "What is my name?"),
        ]
        stored = await second.load("chat")
        assert [(m.role, m.content) for m in stored] == [
            ("user", "I am Ada."), ("assistant", "Hi Ada."),
            ("user", "What is my name?"), ("assistant", "Your name is Ada."),
        ]
    finally:
        await second.aclose()


async def test_a_run_cancelled_mid_tool_leaves_the_session_unchanged(store: Backend) -> None:
    await store.append("s", [Message.user("before"), Message.assistant("ok")])
    before = await store.load("s")
    model = ScriptedModel([reply("", call("hang", text="x"))])
    agent = Agent(model, tools=[hang], store=store, guard=False)
    handle = agent.start("this run dies", session="s")
    async for event in handle:
        if event.type == "tool.call":
            handle.cancel()
    result = await handle.result()
    assert result.status == "cancelled"
    assert await store.load("s") == before
    # The session is not left locked: the next run goes through and is saved whole.
    nxt = Agent(ScriptedModel(["fine"]), store=store, guard=False)
    assert (await asyncio.wait_for(nxt.run("again", session="s"), 10)).status == "completed"
    assert [m.content for m in await store.load("s")] == ["before", "ok", "again", "fine"]


async def test_twenty_concurrent_runs_leave_twenty_whole_turns_in_order(store: Backend) -> None:
    model = ScriptedModel([tool_then_answer] * 40)
    agent = Agent(model, tools=[echo], store=store, guard=False)
    handles = []
    for i in range(20):
        handles.append(agent.start(f"task{i}", session="s", stream_model=False))
        await asyncio.sleep(0)  # arrival order is the order of service
    results = [await h.result() for h in handles]
    assert [r.status for r in results] == ["completed"] * 20
    stored = await store.load("s")
    assert len(stored) == 80
    for i in range(20):
        user, assistant, tool_msg, answer = stored[4 * i : 4 * i + 4]
        assert (user.role, user.content) == ("user", f"task{i}")
        assert assistant.tool_calls[0].arguments == {"text": f"task{i}"}
        assert (tool_msg.role, tool_msg.content) == ("tool", f"echo:task{i}")
        assert tool_msg.tool_call_id == assistant.tool_calls[0].id
        assert (answer.role, answer.content) == ("assistant", f"answer:echo:task{i}")
    # Each run saw exactly the turns of the runs before it.
    assert [len(c.messages) for c in model.calls[::2]] == [2 + 4 * i for i in range(20)]


CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from thinkloop import Agent, ScriptedModel, tool
    from thinkloop.models.scripted import call, reply
    from thinkloop.store import open_store

    @tool
    async def hang(text: str) -> str:
        "Never returns."
        print("IN_TOOL", flush=True)
        await asyncio.sleep(3600)
        return text

    async def main() -> None:
        store = open_store(sys.argv[1])
        agent = Agent(ScriptedModel([reply("", call("hang", text="x"))]), tools=[hang],
                      store=store)
        await agent.run("killed mid-tool", session="s")

    asyncio.run(main())
    """
)


async def test_a_killed_process_leaves_the_session_unchanged_and_unlocked(store_url: str) -> None:
    store = open_store(store_url)
    try:
        await store.append("s", [Message.user("before"), Message.assistant("ok")])
        before = await store.load("s")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CHILD, store_url, stdout=asyncio.subprocess.PIPE, env=env
        )
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.strip() == b"IN_TOOL"
        # The child holds the session lock now: a run here must wait for it.
        waiter = asyncio.create_task(
            Agent(ScriptedModel(["after"]), store=store, guard=False).run("next", session="s")
        )
        await asyncio.sleep(0.3)
        assert not waiter.done()
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        assert proc.returncode == -signal.SIGKILL
        result = await asyncio.wait_for(waiter, 20)  # the OS / server dropped the dead lock
        assert result.status == "completed"
        assert await store.load("s") == [*before, Message.user("next"), Message.assistant("after")]
    finally:
        await store.aclose()
