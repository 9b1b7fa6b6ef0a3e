"""300 turns on one session: the prompt stays bounded and a turn-3 fact is still in it."""

from __future__ import annotations

from thinkloop import Agent, ScriptedModel
from thinkloop.context.pipeline import ContextSettings
from thinkloop.context.tokens import estimate_tokens
from thinkloop.memory import Memory
from thinkloop.store import PostgresStore, SQLiteStore
from thinkloop.testing.long_session import FILLER, answer, helper

Backend = SQLiteStore | PostgresStore
WINDOW = 8192


async def test_three_hundred_turns_stay_bounded_and_remember(store: Backend) -> None:
    memory = Memory(store, embedder=None, model=ScriptedModel([helper] * 2000),
                    context=ContextSettings(context_window=WINDOW))
    model = ScriptedModel([answer] * 300)
    agent = Agent(model, store=store, tools=memory.tools(), hooks=memory.hooks(), plugins=False)
    for turn in range(1, 301):
        task = ("By the way, my favorite color is teal." if turn == 3
                else f"Turn {turn}: what should we do next? {FILLER}")
        handle = agent.start(task, session="long", user_id="ada", stream_model=False)
        result = await handle.result()
        assert result.status == "completed", result.error
        await handle.wait_background()  # the test waits; a real caller never has to

    sizes = [estimate_tokens(c.messages) for c in model.calls]
    assert max(sizes) < WINDOW * 0.75, max(sizes)
    assert max(len(c.messages) for c in model.calls) <= 60
    last = model.calls[-1].messages
    assert "favorite color: teal" in last[0].content
    assert all(m.content != "By the way, my favorite color is teal." for m in last)
    info = await store.session_info("long")
    assert info is not None and info.compactions >= 5
    assert info.messages <= 56
