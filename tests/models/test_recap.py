"""A small model reads a session's earlier turns as a recap of what the person said."""

from __future__ import annotations

from thinkloop import Agent, ScriptedModel
from thinkloop.core.types import Message, ToolCall
from thinkloop.models.recap import RECAP_HEAD, recap, task_text


class SmallScripted(ScriptedModel):
    context_window = 4096


def test_earlier_turns_fold_into_the_task() -> None:
    call = ToolCall("c1", "calculator", {"expression": "2*2"})
    history = [Message.system("s"), Message.user("My name is  Ada.\n"),
               Message.assistant("Nice to meet you, Eve!"),
               Message.user("What is 2*2?"), Message.assistant("", (call,)),
               Message.tool("c1", "calculator", "4"), Message.assistant("4"),
               Message.user("What is my name?")]
    folded = recap(history, "What is my name?")
    assert [m.role for m in folded] == ["system", "user"]
    assert folded[1].content == (f'{RECAP_HEAD}"My name is Ada."\n"What is 2*2?"\n\n'
                                 "What is my name?")
    assert task_text(folded[1]) == "What is my name?"
    # The steps of the current turn stay as they are; a first turn is left alone.
    step = [*history, Message.assistant("", (call,)), Message.tool("c1", "calculator", "4")]
    assert recap(step, "What is my name?")[2:] == step[-2:]
    assert recap(history[:2], "My name is  Ada.\n") == history[:2]
    # A nudge after the results is no task: nothing of the run is folded away.
    nudged = [*step, Message.user("[Urgent] Only 2 step(s) left.")]
    assert recap(nudged, "What is my name?")[2:] == nudged[-3:]
    assert recap(nudged, "not in the messages") == nudged


async def test_a_small_model_in_a_session_is_shown_the_recap() -> None:
    model = SmallScripted(["Noted.", "Your name is Ada."])
    agent = Agent(model, store="memory")
    await agent.run("My name is Ada.", session="s")
    result = await agent.run("What is my name?", session="s")
    assert result.output == "Your name is Ada."
    last = model.calls[1].messages
    assert [m.role for m in last] == ["system", "user"]
    assert last[-1].content == f'{RECAP_HEAD}"My name is Ada."\n\nWhat is my name?'
    # A large model follows the chat itself: it gets the turns as they were.
    large = ScriptedModel(["Noted.", "Ada."])
    agent = Agent(large, store="memory")
    await agent.run("My name is Ada.", session="s")
    await agent.run("What is my name?", session="s")
    assert [m.role for m in large.calls[1].messages][-3:] == ["user", "assistant", "user"]
