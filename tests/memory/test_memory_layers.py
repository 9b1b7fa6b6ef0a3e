"""Memory layers in the prompt, post-turn jobs and auto-compaction, with scripted models."""

from __future__ import annotations

import asyncio
import logging

import pytest

from thinkloop import Agent, ScriptedModel
from thinkloop.agent import spawn_child
from thinkloop.memory import Memory, MemorySettings, Turn, run_jobs
from thinkloop.models.scripted import call, reply
from thinkloop.store import PostgresStore, SQLiteStore
from thinkloop.types import Message

Backend = SQLiteStore | PostgresStore


async def test_every_layer_reaches_the_system_prompt(store: Backend) -> None:
    await store.append("s", [Message.user("old"), Message.assistant("old reply")])
    await store.compact("s", "Ada asked about trains.", drop_first=0)
    await store.set_facts("user:ada", {"favorite_color": "teal"})
    await store.add_memory("user:ada", "summary", "session:s0", "- planned a trip to Lyon")
    await store.add_memory("user:ada", "manual", "dog", "Ada's dog is called Rex.")
    await store.add_memory("user:ada", "episode", "", "User: train times? Assistant: 9:15")
    memory = Memory(store, embedder=None, jobs=(), auto_compact=False)
    model = ScriptedModel(["ok"])
    agent = Agent(model, store=store, hooks=memory.hooks(), instructions="Be brief.",
                  plugins=False)
    # Not a trivial task: lean mode (trivial tasks) skips the recall search.
    await agent.run("what were the train times again, the ones you told me?", session="s",
                    user_id="ada")
    system = model.calls[0].messages[0].content
    block = system[system.index("# Memory"):]
    assert block == (
        "# Memory\n\n"
        "## Earlier in this conversation (condensed)\nAda asked about trains.\n\n"
        "## What you know about the user\n- favorite color: teal\n\n"
        "## Summaries of past sessions\n- planned a trip to Lyon\n\n"
        "## Saved memories (remember / forget)\n- [dog] Ada's dog is called Rex.\n\n"
        "## Possibly relevant memories\n- (episode) User: train times? Assistant: 9:15"
    )
    assert system.startswith("Be brief.")


async def test_post_turn_jobs_extract_profile_summary_and_episode(store: Backend) -> None:
    summarizer = ScriptedModel(["- Ada said her favourite colour is teal"])
    memory = Memory(store, embedder=None, model=summarizer, auto_compact=False)
    agent = Agent(ScriptedModel(["Nice colour!"]), store=store, hooks=memory.hooks(),
                  plugins=False)
    handle = agent.start("My favorite color is teal. Call me Ada.", session="s", user_id="ada")
    result = await handle.result()
    await handle.wait_background()
    assert result.text == "Nice colour!"
    assert await store.profile("user:ada") == {"favorite_color": "teal", "name": "Ada"}
    rows = [(m.kind, m.key, m.content) for m in await store.memories("user:ada")]
    assert rows == [
        ("summary", "session:s", "- Ada said her favourite colour is teal"),
        ("episode", "", "User: My favorite color is teal. Call me Ada.\nAssistant: Nice colour!"),
    ]
    sent = summarizer.calls[0].messages[1].content
    assert sent == "user: My favorite color is teal. Call me Ada.\nassistant: Nice colour!"
    # A second turn updates the fact instead of adding another.
    agent2 = Agent(ScriptedModel(["ok"]), store=store, hooks=memory.hooks(), plugins=False)
    summarizer.script.append("- colour is now blue")
    h2 = agent2.start("Actually my favorite color is blue.", session="s", user_id="ada")
    await h2.result()
    await h2.wait_background()
    assert await store.profile("user:ada") == {"favorite_color": "blue", "name": "Ada"}
    assert [m.content for m in await store.memories("user:ada", "summary")] == [
        "- colour is now blue"]


async def test_a_failing_job_is_logged_and_the_others_still_run(
    store: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(turn: Turn) -> None:
        raise RuntimeError("summariser is down")

    from thinkloop.memory import extract_profile, record_episode

    turn = Turn(store, "s", None, "session:s", "my name is Bo", "hi Bo",
                (Message.user("my name is Bo"), Message.assistant("hi Bo")))
    with caplog.at_level(logging.ERROR, "thinkloop.memory"):
        failed = await run_jobs(turn, [broken, extract_profile, record_episode])
    assert failed == ["broken"]
    assert "post-turn job broken failed for session s" in caplog.text
    assert "summariser is down" in caplog.text
    assert await store.profile("session:s") == {"name": "Bo"}
    assert len(await store.memories("session:s", "episode")) == 1


async def test_post_turn_jobs_never_delay_the_answer(store: Backend) -> None:
    release = asyncio.Event()

    async def slow(turn: Turn) -> None:
        await release.wait()

    memory = Memory(store, embedder=None, jobs=(slow,), auto_compact=False)
    agent = Agent(ScriptedModel(["quick"]), store=store, hooks=memory.hooks(), plugins=False)
    handle = agent.start("hi", session="s")
    result = await asyncio.wait_for(handle.result(), 5)
    assert result.text == "quick"
    background = asyncio.create_task(handle.wait_background())
    await asyncio.sleep(0.05)
    assert not background.done()
    release.set()
    await asyncio.wait_for(background, 5)


def _long_session(n: int) -> list[Message]:
    return [Message.user(f"q{i}") if i % 2 == 0 else Message.assistant(f"a{i}")
            for i in range(n)]


async def test_auto_compaction_flushes_summarises_and_keeps_the_30_most_recent(
        store: Backend) -> None:
    await store.append("s", _long_session(50))
    flush_then_summary = ScriptedModel([
        reply("", call("remember", key="q_count", content="The user asked 26 questions.")),
        "NO_REPLY",
        "Condensed: the user asked q0..q48 and got answers.",
    ])
    memory = Memory(store, embedder=None, model=flush_then_summary, jobs=())
    agent = Agent(ScriptedModel(["a50"]), store=store, hooks=memory.hooks(), plugins=False)
    handle = agent.start("q50", session="s")
    await handle.result()
    await handle.wait_background()
    kept = await store.load("s")  # 52 messages: 22 summarised, UrchinLoop's 30 kept verbatim
    assert [m.content for m in kept] == [*(m.content for m in _long_session(50)[22:]),
                                         "q50", "a50"]
    info = await store.session_info("s")
    assert info is not None
    assert (info.summary, info.compactions) == (
        "Condensed: the user asked q0..q48 and got answers.", 1)
    assert [m.content for m in await store.memories("session:s", "manual")] == [
        "The user asked 26 questions."]
    flush_task = flush_then_summary.calls[0].messages[-1].content
    assert flush_task.startswith("Store durable memories now, if nothing to store reply NO_REPLY.")
    assert flush_task.endswith("user: q50\nassistant: a50")
    summary_input = flush_then_summary.calls[2].messages[1].content
    assert summary_input.startswith("New messages:\nuser: q0\nassistant: a1\n")
    assert summary_input.endswith("user: q20\nassistant: a21")
    # The next run sees the summary in its prompt and the 30 kept messages.
    model = ScriptedModel(["ok"])
    quiet = Memory(store, embedder=None, jobs=(), auto_compact=False)
    await Agent(model, store=store, hooks=quiet.hooks(), plugins=False).run("next", session="s")
    sent = model.calls[0].messages
    assert "Condensed: the user asked q0..q48" in sent[0].content
    assert [m.content for m in sent[1:]] == [m.content for m in kept] + ["next"]


async def test_small_sessions_are_not_compacted(store: Backend) -> None:
    await store.append("s", _long_session(10))
    memory = Memory(store, embedder=None, model=ScriptedModel([]), jobs=())
    assert await memory.compact("s", "session:s", ScriptedModel([])) is False
    assert len(await store.load("s")) == 10


async def test_one_compaction_at_a_time_per_session(store: Backend) -> None:
    await store.append("s", _long_session(60))
    model = ScriptedModel(["NO_REPLY", "summary"], delay_s=0.05)
    memory = Memory(store, embedder=None, model=model, jobs=(),
                    settings=MemorySettings(compact_after_messages=50))
    first = asyncio.create_task(memory.compact("s", "session:s", model, spawn_child))
    await asyncio.sleep(0.02)
    assert await memory.compact("s", "session:s", model, spawn_child) is False  # busy
    assert await first is True
    assert len(await store.load("s")) == 30


async def test_compaction_held_by_another_process_is_skipped(store_url: str) -> None:
    from thinkloop.store import open_store

    store, other = open_store(store_url), open_store(store_url)
    try:
        await store.append("s", _long_session(60))
        memory = Memory(store, embedder=None, model=ScriptedModel([]), jobs=())
        async with other.try_lock("compact:s") as taken:
            assert taken
            assert await memory.compact("s", "session:s", ScriptedModel([])) is False
        assert len(await store.load("s")) == 60
    finally:
        await store.aclose()
        await other.aclose()
