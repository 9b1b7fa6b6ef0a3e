"""An open agent's per-user files in the store, through the Python API (``thinkloop.build``),
on SQLite and PostgreSQL: every run of a user reads that user's copy, a run resumed after an
approval pause included; files on disk stay the agent's default and no user's."""

from __future__ import annotations

from tests.acceptance.conftest import calls, say

from thinkloop.build import AgentSpec, build_agent
from thinkloop.core.settings import load_settings
from thinkloop.store import open_store
from thinkloop.store.sqlmanaged import UserFiles
from thinkloop.testing.openai_server import OpenAIServer


def system(llm: OpenAIServer, i: int) -> str:
    return str(llm.requests[i]["messages"][0]["content"])


async def test_each_user_reads_their_own_copy_even_in_a_resumed_run(
        llm: OpenAIServer, durable_url: str) -> None:
    settings = load_settings()
    store = open_store(durable_url)
    assert isinstance(store, UserFiles)
    spec = AgentSpec("pal", type="open", tools="calculator",
                     ask_before=["calculator"], approve="pause", memory=False)
    agent = build_agent(spec, settings, store=store)
    try:
        llm.enqueue(say("Hello, new friend."))
        await agent.run("hi", session="a1", user_id="ana")
        assert "This is your first conversation" in system(llm, 0)
        await store.put_user_file("pal", "ana", "SOUL.md", "Call this user Captain.")
        # A run that pauses for an approval, then is resumed: both halves read her copy.
        llm.clear()
        llm.enqueue(calls(("calculator", {"expression": "6*7"})), say("42, Captain."))
        paused = await agent.run("What is 6*7?", session="a2", user_id="ana")
        assert paused.status == "paused"
        assert "Call this user Captain." in system(llm, 0)
        done = await agent.resume("a2", True, user_id="ana")
        assert done.text == "42, Captain."
        assert "Call this user Captain." in system(llm, 1)
        assert "first conversation" not in system(llm, 1)
        # Bob never sees Ana's copy; neither's is on disk.
        llm.clear()
        llm.enqueue(say("Hello."))
        await agent.run("hi", session="b1", user_id="bob")
        assert "Captain" not in system(llm, 0) and "Be genuinely helpful" in system(llm, 0)
        assert (await store.user_files("pal", "bob"))["SOUL.md"] != "Call this user Captain."
        assert not (settings.home / "agents" / "pal" / "users").exists()
        assert (settings.home / "agents" / "pal" / "SOUL.md").is_file()  # the agent's default
    finally:
        await agent.aclose()
        await store.aclose()
