"""Small models are offered only the tools that match the task, the same ones every step."""

from __future__ import annotations

from thinkloop import Agent, ScriptedModel
from thinkloop.context.focus import is_small, rank_tools
from thinkloop.guard.focus import focus_hook
from thinkloop.models.scripted import call, reply
from thinkloop.tools.defaults import default_tools


def _specs() -> list:  # type: ignore[type-arg]
    tools = default_tools("default")
    return [t.spec for t in tools]


def test_the_task_picks_its_tools() -> None:
    specs = _specs()
    picks = {task: [t.name for t in rank_tools(task, specs)] for task in (
        "What is 12*7? Use the calculator.", "What is (17+25)*3?",
        "Write hello to notes.txt", "List the files in the workspace",
        "Read notes.txt and tell me what it says", "What is the capital of France?")}
    assert picks == {
        "What is 12*7? Use the calculator.": ["calculator"],
        "What is (17+25)*3?": ["calculator"],
        "Write hello to notes.txt": ["write_file"],
        "List the files in the workspace": ["list_dir"],
        "Read notes.txt and tell me what it says": ["read_file"],
        "What is the capital of France?": [],
    }
    both = [t.name for t in rank_tools("Write blue to sky.txt, then read it back", specs)]
    assert set(both) == {"write_file", "read_file"}


def test_a_word_only_a_tools_parameters_share_offers_no_tool() -> None:
    """"My name is Ada." matched send_message through its parameters' word "name", and the
    bundled model called it until its steps ran out (the README's recall line had no answer);
    with a session, remember and recall matched the same way."""
    from thinkloop.memory.tools import memory_tools

    specs = _specs() + [t.spec for t in memory_tools(None)]  # type: ignore[arg-type]
    for task in ("My name is Ada.", "What is my name?", "What is my favourite colour?",
                 "Where do I live?"):
        assert rank_tools(task, specs) == [], task
    # The tool's own name or description still counts, and then its parameters rank it.
    assert [t.name for t in rank_tools("Remember that my name is Ada.", specs)] == ["remember"]
    assert [t.name for t in rank_tools(
        "Read price.txt, then use the calculator to add 5 to the price.", specs)] == [
        "read_file", "calculator"]


class SmallScripted(ScriptedModel):
    context_window = 4096


async def test_a_small_model_sees_the_few_tools_every_step_and_the_minimal_prompt() -> None:
    tools = default_tools("default")
    model = SmallScripted([reply("", call("calculator", expression="12*7")), "84"])
    agent = Agent(model, tools=tools)
    assert is_small(model)
    assert any(h.name == "context.focus" for h in agent.hooks.by_stage["pre_reason"])
    result = await agent.run("What is 12*7? Use the calculator.")
    assert (result.status, result.output) == ("completed", "84")
    assert [[t.name for t in c.tools] for c in model.calls] == [["calculator"], ["calculator"]]
    assert "mode=minimal" in model.calls[0].messages[0].content


async def test_a_large_model_sees_every_tool_and_a_chosen_few_stay() -> None:
    tools = default_tools("default")
    model = ScriptedModel(["hi"])
    await Agent(model, tools=tools).run("What is 12*7? Use the calculator.")
    assert len(model.calls[0].tools) == len(tools)
    few = SmallScripted(["hi"])
    await Agent(few, tools=tools[:2]).run("What is 12*7?")
    assert [t.name for t in few.calls[0].tools] == [t.name for t in tools[:2]]
    assert focus_hook().stage == "pre_reason"


def test_a_named_file_is_read_and_everyday_arithmetic_is_arithmetic() -> None:
    specs = _specs()
    picks = {task: [t.name for t in rank_tools(task, specs)] for task in (
        "cat fruit.txt", "Open pet.txt.", "What is 7 squared?",
        "Convert 2.5 kilometers to meters.")}
    assert picks["cat fruit.txt"][0] == "read_file"
    assert picks["Open pet.txt."][0] == "read_file"
    assert picks["What is 7 squared?"] == ["calculator"]
    assert picks["Convert 2.5 kilometers to meters."] == ["calculator"]
    # A task that changes no file is never offered the tools that change files.
    for task in ("cat fruit.txt", "Show me the contents of todo.md.", "Edit notes.txt"):
        names = {t.name for t in rank_tools(task, specs)}
        assert (names & {"write_file", "edit_file"} != set()) == task.startswith("Edit")


def test_arithmetic_gets_no_shell_and_orders_to_save_get_write_file() -> None:
    specs = _specs()
    picks = {task: [t.name for t in rank_tools(task, specs)] for task in (
        "What's 25% of 60?", "What is 9 times 8?", "Run echo 25% of 60 in the shell",
        "Save the word banana in fruit.txt.", "Store 42 in answer.txt",
        "Put hello into a.txt", "What did I save in notes.txt?")}
    assert picks["What's 25% of 60?"] == ["calculator"]
    assert picks["What is 9 times 8?"] == ["calculator"]
    assert "shell" in picks["Run echo 25% of 60 in the shell"]
    for task in ("Save the word banana in fruit.txt.", "Store 42 in answer.txt",
                 "Put hello into a.txt"):
        assert picks[task][0] == "write_file"
    assert "write_file" not in picks["What did I save in notes.txt?"]
