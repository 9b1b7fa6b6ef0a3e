"""The engine's own words (cap notice, corrections, nudges, guard notes, format placeholders)
reach the model for one request only: never the history, the stored session or the answer."""

from __future__ import annotations

from thinkloop import Agent, ScriptedModel, tool
from thinkloop.loop.notices import CAP_NOTICE, NOT_AN_ANSWER_NOTICE, is_internal_echo
from thinkloop.models.scripted import call, reply
from thinkloop.store.inprocess import MemoryStore


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _texts(messages: object) -> list[str]:
    return [m.content for m in messages]  # type: ignore[attr-defined]


async def test_the_cap_notice_goes_to_the_last_request_only() -> None:
    store = MemoryStore()
    model = ScriptedModel([reply("", call("add", a=1, b=2)), reply("", call("add", a=2, b=3)),
                           "It is 5."])
    agent = Agent(model, tools=[add], max_steps=2, store=store)
    result = await agent.run("add things", session="s")
    assert (result.status, result.output) == ("max_steps", "It is 5.")
    cap = CAP_NOTICE.format(n=2)
    assert model.calls[-1].messages[-1].content == cap and model.calls[-1].tools == ()
    stored = await store.load("s")
    assert cap not in _texts(stored) and cap not in _texts(result.messages)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant", "tool",
                                        "assistant"]


async def test_an_answer_that_repeats_the_cap_notice_is_no_answer() -> None:
    parrot = ("You have used all 1 steps available for this task. Do not call any more "
              "tools.")
    model = ScriptedModel([reply("", call("add", a=1, b=2)), parrot])
    result = await Agent(model, tools=[add], max_steps=1).run("add")
    assert (result.status, result.output, result.text) == ("max_steps", "", "")


async def test_a_placeholder_answer_is_asked_again_and_never_stored() -> None:
    store = MemoryStore()
    model = ScriptedModel([reply("", call("add", a=40, b=2)), "TEXT", "The sum is 42."])
    result = await Agent(model, tools=[add], store=store).run("40+2?", session="s")
    assert (result.status, result.output) == ("completed", "The sum is 42.")
    third = _texts(model.calls[2].messages)
    notice = NOT_AN_ANSWER_NOTICE.format(why="repeated the engine's instructions")
    assert third[third.index("TEXT") + 1] == notice and model.calls[2].tools == ()
    stored = _texts(await store.load("s"))
    assert "TEXT" not in stored and notice not in stored
    assert stored[-1] == "The sum is 42." and len(result.steps) == 3


async def test_a_malformed_reply_and_its_correction_stay_out_of_the_history() -> None:
    store = MemoryStore()
    broken = "<tool_call>add one and two please</tool_call>"
    model = ScriptedModel([broken, "3"])
    result = await Agent(model, tools=[add], store=store).run("1+2?", session="s")
    assert (result.status, result.output) == ("completed", "3")
    assert any("could not be read" in t for t in _texts(model.calls[1].messages))
    stored = _texts(await store.load("s"))
    assert stored == ["1+2?", "3"] and _texts(result.messages) == stored


def test_echo_detection() -> None:
    assert is_internal_echo("TEXT") and is_internal_echo(" ... ")
    assert is_internal_echo("[Urgent] Only 2 step(s) left for this task. Stop calling tools")
    assert is_internal_echo("Note: you already made this exact call (add with the same")
    assert not is_internal_echo("84") and not is_internal_echo("")
    # The hint after a failed call, copied as the answer (measured on SmolLM2-135M).
    assert is_internal_echo("That call failed. Make a different tool call")
    assert not is_internal_echo("The text says 84; no more tools are needed.")
