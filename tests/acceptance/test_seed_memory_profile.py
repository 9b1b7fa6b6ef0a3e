"""Memory that keeps enough, the profile and recall rows: a capable model keeps what the user
says about themselves ("I fly to Lisbon on Friday"), the local tiny model falls back to the
patterns, and a short follow-up question ("What did Acme Clinic say?") still recalls what was
said about it, the entities and the lessons."""

from __future__ import annotations

from pathlib import Path

from thinkloop import Agent, AgentOptions, ScriptedModel
from thinkloop.core.events import Event
from thinkloop.judgement import Judgement
from thinkloop.memory import Memory
from thinkloop.store.sqlite import SQLiteStore
from thinkloop.testing.openai_server import OpenAIServer

from .conftest import say


def _system(llm: OpenAIServer, i: int) -> str:
    return str(llm.requests[i]["messages"][0]["content"])


async def test_a_capable_model_keeps_a_plan_the_patterns_miss(
        llm: OpenAIServer, tmp_path: Path) -> None:
    llm.enqueue(
        say("Have a good flight!"),
        say('- the user flies to Lisbon on Friday\nUSER FACTS: {"travel_plan": '
            '"flies to Lisbon on Friday", "bad": {"nested": 1}}'),
        say("On Friday."))
    async with Agent(memory=True, store=str(tmp_path / "m.db")) as agent:
        await agent.run("I fly to Lisbon on Friday.", session="s1", user_id="ana")
        await agent.sessions.drain()
        store = agent.store
        assert isinstance(store, SQLiteStore)
        assert await store.profile("user:ana") == {"travel_plan": "flies to Lisbon on Friday"}
        [summary] = await store.memories("user:ana", "summary")
        assert summary.content == "- the user flies to Lisbon on Friday"  # no facts line
        await agent.run("When is my flight?", session="s2", user_id="ana")
    assert "USER FACTS:" in _system(llm, 1)  # asked in the summary's own call
    assert "## What you know about the user\n- travel plan: flies to Lisbon on Friday" in (
        _system(llm, 2))


class TinyLocal(ScriptedModel):
    context_window = 4096  # the local model's size: its extracted facts would be noise


async def test_the_local_tiny_model_keeps_the_patterns(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    model = TinyLocal(["Nice to meet you.", "- Ana introduced herself"])
    async with Agent(model, memory=Memory(store, embedder=None), store=store) as agent:
        await agent.run("My name is Ana. I fly to Lisbon on Friday.", session="s1",
                        user_id="ana")
        await agent.sessions.drain()
        assert await store.profile("user:ana") == {"name": "Ana"}
    assert "USER FACTS" not in model.calls[1].messages[0].content
    await store.aclose()


async def test_a_short_follow_up_recalls_what_was_said_its_entities_and_lessons(
        llm: OpenAIServer, tmp_path: Path) -> None:
    events: list[Event] = []
    llm.enqueue(say("Acme Clinic said they can see you on Tuesday at 10."))
    db = str(tmp_path / "m.db")
    async with Agent(memory=True, store=db, on_event=events.append,
                     options=AgentOptions(judgement=Judgement.parse("learn"))) as agent:
        await agent.run("Please phone Acme Clinic about my appointment and tell me what "
                        "they say.", session="s1", user_id="ana")
        await agent.sessions.drain()
        store = agent.store
        assert isinstance(store, SQLiteStore)
        await store.add_memory("user:ana", "reflection", "confirm",
                               "Confirm appointment times in writing.")
        llm.clear()
        llm.enqueue(say("They can see you on Tuesday at 10."))
        events.clear()
        await agent.run("What did Acme Clinic say?", session="s2", user_id="ana")
    lean = [e.payload for e in events if e.type == "budget.assigned"]
    assert lean and lean[0]["lean"] is True  # a trivial task: lean mode
    assert not [e for e in events if e.type == "memory.recall_skipped"]
    system = _system(llm, 0)
    assert "Acme Clinic said they can see you on Tuesday at 10." in system  # the episode
    assert "- lesson (confirm): Confirm appointment times in writing." in system
    recalled = [e.payload for e in events if e.type == "entities.recalled"]
    assert recalled and "Acme Clinic" in recalled[0]["entities"]  # the entity graph
