"""A run's lifetime as a user's script sees it: durable sessions without ``store=``, post-turn
jobs that survive the process ending, and a process that exits at once and silently."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from thinkloop import Agent
from thinkloop.testing.openai_server import OpenAIServer, Reply

from .conftest import run_python, say

ONE_TURN = """
import asyncio, sys
from thinkloop import Agent

async def main():
    agent = Agent()
    result = await agent.run(sys.argv[1], session="trip")
    print(result.status, result.text, flush=True)

asyncio.run(main())
"""


def test_a_session_continues_in_a_second_process_without_a_store(llm: OpenAIServer) -> None:
    llm.enqueue(say("Noted: you fly to Lisbon on Friday."), say("You fly to Lisbon."))
    code = ONE_TURN.replace("sys.argv[1]", "{task!r}")
    first = run_python(code.format(task="I fly to Lisbon on Friday."))
    second = run_python(code.format(task="Where do I fly?"))
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert second.stdout.strip() == "completed You fly to Lisbon."
    sent = [m["content"] for m in llm.requests[1]["messages"][1:]]
    assert sent == ["I fly to Lisbon on Friday.", "Noted: you fly to Lisbon on Friday.",
                    "Where do I fly?"]
    assert first.stderr == "" and second.stderr == ""


def test_exits_within_two_seconds_of_its_last_run_with_nothing_on_stderr(
        llm: OpenAIServer) -> None:
    # A durable store (with its aiosqlite thread) and an HTTP session open, nothing closed.
    llm.enqueue(say("Hello Ann."))
    code = """
import asyncio, time
from thinkloop import Agent
from thinkloop.store.open import open_store

async def main():
    agent = Agent(store=open_store())  # opened by the user, never closed
    result = await agent.run("Hi, I am Ann.", session="s", user_id="ann")
    print(result.status, time.time(), flush=True)

asyncio.run(main())
"""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    ended = time.time()
    status, answered = out.split()
    assert proc.returncode == 0 and status == "completed"
    assert ended - float(answered) < 2.0
    assert err == ""


def test_a_failed_run_leaves_nothing_on_stderr(llm: OpenAIServer) -> None:
    llm.enqueue(Reply(status=401, body={"error": {"message": "bad key"}}))
    code = """
import asyncio
from thinkloop import Agent

async def main():
    result = await Agent().run("Hello", session="s")
    print(result.status, flush=True)

asyncio.run(main())
"""
    done = run_python(code)
    assert done.stdout.strip() == "failed"
    assert done.stderr == ""


def test_post_turn_jobs_are_stored_after_run_sync_and_exit(
        llm: OpenAIServer, tmp_path: Path) -> None:
    llm.enqueue(say("Nice to meet you, Ann."), say("- Ann introduced herself; lives in Porto."))
    code = """
from thinkloop import Agent

result = Agent(memory=True).run_sync("My name is Ann and I live in Porto.", session="s1",
                                     user_id="ann")
print(result.status, flush=True)
"""
    done = run_python(code, timeout=180)
    assert done.stdout.strip() == "completed" and done.stderr == ""
    db = sqlite3.connect(tmp_path / "thinkloop-home" / "thinkloop.db")
    kinds = sorted((k, c) for k, c in db.execute(
        "SELECT kind, content FROM memories WHERE owner = 'user:ann'"))
    assert kinds == [
        ("episode", "User: My name is Ann and I live in Porto.\nAssistant: Nice to meet you, "
                    "Ann."),
        ("summary", "- Ann introduced herself; lives in Porto."),
    ]
    profile = dict(db.execute("SELECT key, value FROM profile WHERE owner = 'user:ann'"))
    assert profile.get("name") == "Ann"
    # The summary request was the post-turn job's own model call.
    assert "Summarise this conversation turn" in orjson.dumps(llm.requests[1]).decode()


async def test_memory_recalls_a_fact_from_an_earlier_session(llm: OpenAIServer) -> None:
    llm.enqueue(say("Got it: your dog is called Biscuit."), say("- dog: Biscuit"),
                say("Your dog is called Biscuit."))
    async with Agent(memory=True) as agent:
        await agent.run("Remember that my dog is called Biscuit.", session="monday",
                        user_id="ann")
    async with Agent(memory=True) as agent:
        result = await agent.run("What is my dog called?", session="tuesday", user_id="ann")
    assert result.text == "Your dog is called Biscuit."
    system = llm.requests[2]["messages"][0]["content"]
    assert "Biscuit" in system  # recalled into the new session's prompt


async def test_async_with_closes_what_the_agent_opened(llm: OpenAIServer) -> None:
    from thinkloop.models.h1 import H1Transport

    llm.enqueue(say("Hi."))
    async with Agent() as agent:
        await agent.run("Hello", session="s")
        thread = agent.store._db._thread  # type: ignore[attr-defined]  # aiosqlite's worker
        transport = agent.model.inner.transport  # type: ignore[attr-defined]  # in its wrapper
        # The default client when httptools is installed (the test extras install it).
        assert isinstance(transport, H1Transport)
        idle = [c for pool in transport._idle.values() for c in pool]
        assert thread.is_alive() and len(idle) == 1 and idle[0].transport is not None
    # The SQLite connection (and its thread) and the model's kept-alive connection are closed.
    thread.join(5)
    assert agent.store._db is None and not thread.is_alive()  # type: ignore[attr-defined]
    assert transport._idle == {} and idle[0].transport.is_closing()
    # Closing is not the end: the agent reopens what it needs.
    llm.enqueue(say("Hi again."))
    async with agent:
        again = await agent.run("Hello again", session="s")
    assert again.text == "Hi again." and len(llm.requests[-1]["messages"]) == 4


async def test_store_memory_opts_out_of_durability(llm: OpenAIServer, tmp_path: Path) -> None:
    llm.enqueue(say("Hi."))
    async with Agent(store="memory") as agent:
        await agent.run("Hello", session="s")
        assert await agent.store.load("s")
    assert not (tmp_path / "thinkloop-home" / "thinkloop.db").exists()


async def test_memory_works_on_the_in_process_store(llm: OpenAIServer) -> None:
    llm.enqueue(say("Noted: you are allergic to peanuts."), say("- allergy: peanuts"),
                say("You are allergic to peanuts."))
    async with Agent(store="memory", memory=True) as agent:
        assert {"remember", "recall"} <= set(agent.tools)
        await agent.run("Remember: I am allergic to peanuts.", session="a", user_id="bo")
        await agent.sessions.drain()
        result = await agent.run("What am I allergic to?", session="b", user_id="bo")
    assert result.text == "You are allergic to peanuts."
    assert "peanuts" in llm.requests[2]["messages"][0]["content"]


def test_memory_on_a_store_without_memories_is_an_error() -> None:

    from thinkloop.errors import ConfigError
    from thinkloop.models.scripted import ScriptedModel

    class Minimal:
        async def load(self, session_id: str) -> list[object]:
            return []

        async def append(self, session_id: str, messages: object) -> None:
            return None

    with pytest.raises(ConfigError, match="memory=True needs a store that keeps memories"):
        Agent(ScriptedModel(["hi"]), store=Minimal(), memory=True)  # type: ignore[arg-type]
