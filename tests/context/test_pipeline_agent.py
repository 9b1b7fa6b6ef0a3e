"""The pipeline as a pre_reason hook in a real run: what the model is sent, exactly."""

from __future__ import annotations

from thinkloop import Agent, ScriptedModel, tool
from thinkloop.context.pipeline import ContextSettings
from thinkloop.memory import Memory
from thinkloop.models.scripted import call, reply
from thinkloop.store import MemoryStore
from thinkloop.types import Message


@tool
def look(n: int) -> str:
    """Look at item n."""
    if n == 4:
        raise ValueError("item 4 is gone")
    return f"item {n}"


async def test_a_long_run_sends_a_tally_instead_of_its_middle_steps() -> None:
    script = [reply("", call("look", n=i)) for i in range(1, 13)] + ["all seen"]
    model = ScriptedModel(script)
    memory = Memory(MemoryStore(), embedder=None, jobs=(), auto_compact=False)
    agent = Agent(model, tools=[look], hooks=memory.hooks(), max_steps=20, plugins=False,
                  guard=False)
    result = await agent.run("look at twelve items")
    assert result.status == "completed" and len(result.steps) == 13
    # Call 11 sees 10 finished steps: nothing compacted yet.
    assert len(model.calls[10].messages) == 2 + 2 * 10
    # The last call sees 12 steps: the first 2 and last 2 whole, 8 tallied in between.
    sent = model.calls[12].messages
    assert [m.role for m in sent] == ["system", "user", *["assistant", "tool"] * 2, "user",
                                      *["assistant", "tool"] * 2]
    assert sent[6] == Message.user(
        "--- [8 middle steps compacted] ---\n"
        "... look x8 (7 ok, 1 err)\n"
        "--- [recent steps below] ---"
    )
    assert [m.content for m in sent if m.role == "tool"] == [
        "item 1", "item 2", "item 11", "item 12"]
    # What was sent changed; the run's own history did not.
    assert len(result.messages) == 1 + 2 * 12 + 1


async def test_recent_messages_bound_the_history_sent() -> None:
    store = MemoryStore()
    await store.append("s", [m for i in range(40)
                             for m in (Message.user(f"u{i}"), Message.assistant(f"a{i}"))])
    model = ScriptedModel(["ok"])
    memory = Memory(store, embedder=None, jobs=(), auto_compact=False,
                    context=ContextSettings(recent_messages=6))
    agent = Agent(model, store=store, hooks=memory.hooks(), plugins=False, guard=False)
    await agent.run("now", session="s")
    assert [m.content for m in model.calls[0].messages[1:]] == [
        "u37", "a37", "u38", "a38", "u39", "a39", "now"]
