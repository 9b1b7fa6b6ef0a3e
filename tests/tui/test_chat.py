"""The chat screen on live runs: turns on one session, tool calls folded, approvals, questions,
Ctrl-C. Every test runs in process and through a real gateway (``make_app``)."""

from __future__ import annotations

from pathlib import Path

from tests.tui.conftest import MakeApp, running, say, shot, until
from textual.widgets import Collapsible, Input

from thinkloop.testing.openai_server import OpenAIServer, Reply, completion
from thinkloop.tui.widgets import ApprovalPrompt, ToolFold, Turn


def turns(app: object) -> list[Turn]:
    return list(app.screen.query(Turn))  # type: ignore[attr-defined]


async def test_two_turns_on_one_session_with_a_tool_call_folded(
        make_app: MakeApp, model: OpenAIServer, tmp_path: Path) -> None:
    model.enqueue(Reply(body=completion(tool_calls=[("calculator", {"expression": "12*7"})])),
                  Reply(body=completion("12*7 is 84.")),
                  Reply(body=completion("Doubled, that is 168.")))
    app = make_app(agent="helper", session="math")
    async with running(app) as pilot:
        assert app.screen.query_one("#prompt").has_focus  # type at once
        await say(pilot, "What is 12*7?")
        await until(pilot, lambda: "completed" in turns(app)[0].classes if turns(app) else False)
        first = turns(app)[0]
        assert first.text == "12*7 is 84."
        fold = first.query_one(ToolFold)
        assert fold.collapsed and "calculator" in fold.title and "ok" in fold.title
        text = shot(app, tmp_path, "chat-folded")
        assert "you  What is 12*7?" in text and "agent  12*7 is 84." in text
        assert "calculator" in text and "→ ok" in text and "84\n" not in text

        fold.query_one("CollapsibleTitle").focus()
        await pilot.press("enter")
        await until(pilot, lambda: not fold.collapsed)
        assert "84" in str(fold.result.render())

        await say(pilot, "Double it")
        await until(pilot, lambda: len(turns(app)) == 2
                    and "completed" in turns(app)[1].classes)
        assert turns(app)[1].text == "Doubled, that is 168."
        text = shot(app, tmp_path, "chat-two-turns")
        assert "Double it" in text and "Doubled, that is 168." in text
    # The second turn went to the model with the first one's history: one session.
    said = [m.get("content") for m in model.requests[-1]["messages"]]
    assert "What is 12*7?" in said and "12*7 is 84." in said and "Double it" in said


async def test_history_of_the_session_on_open(make_app: MakeApp, model: OpenAIServer,
                                              tmp_path: Path) -> None:
    model.enqueue(Reply(body=completion("Noted: blue.")))
    app = make_app(agent="helper", session="colours")
    async with running(app) as pilot:
        await say(pilot, "My colour is blue")
        await until(pilot, lambda: bool(turns(app)) and "completed" in turns(app)[0].classes)
    again = make_app(agent="helper", session="colours")
    async with running(again) as pilot:
        await until(pilot, lambda: "earlier messages" in shot(again, tmp_path, "history"))
        text = shot(again, tmp_path, "history")
        assert "you  My colour is blue" in text and "agent  Noted: blue." in text


async def test_an_approval_approved_then_one_denied(make_app: MakeApp, model: OpenAIServer,
                                                    tmp_path: Path) -> None:
    model.enqueue(Reply(body=completion(tool_calls=[("calculator", {"expression": "2+2"})])),
                  Reply(body=completion("It is 4.")),
                  Reply(body=completion(tool_calls=[("calculator", {"expression": "3+3"})])),
                  Reply(body=completion("I was not allowed to compute it.")))
    app = make_app(agent="careful", session="gated")
    async with running(app) as pilot:
        await say(pilot, "2+2?")
        await until(pilot, lambda: bool(app.screen.query(ApprovalPrompt)))
        prompt = app.screen.query_one(ApprovalPrompt)
        assert prompt.has_focus
        text = shot(app, tmp_path, "approval")
        assert "approve?" in text and 'calculator({"expression":"2+2"})' in text
        await pilot.press("y")
        await until(pilot, lambda: bool(turns(app)) and "completed" in turns(app)[0].classes)
        assert "approved" in prompt.classes and turns(app)[0].text == "It is 4."
        assert turns(app)[0].query_one(ToolFold).result.render().plain == "4"

        await say(pilot, "3+3?")
        await until(pilot, lambda: len(app.screen.query(ApprovalPrompt)) == 2)
        second = list(app.screen.query(ApprovalPrompt))[1]
        await pilot.press("n")
        await until(pilot, lambda: len(turns(app)) == 2 and "completed" in turns(app)[1].classes)
        assert "denied" in second.classes
        fold = turns(app)[1].query_one(ToolFold)
        assert "error" in fold.classes
        text = shot(app, tmp_path, "denied")
        assert "denied" in text


async def test_ctrl_c_aborts_the_run_not_the_app(make_app: MakeApp, model: OpenAIServer,
                                                 tmp_path: Path) -> None:
    model.enqueue(Reply(body=completion("too late"), delay_s=10))
    app = make_app(agent="helper", session="long")
    async with running(app) as pilot:
        await say(pilot, "Take your time")
        await until(pilot, lambda: app.screen.run_id is not None and bool(turns(app)))
        await say(pilot, "Next question")  # kept in the line while the run goes on
        assert app.screen.query_one("#prompt", Input).value == "Next question"
        assert len(turns(app)) == 1
        await pilot.press("ctrl+c")
        await until(pilot, lambda: "cancelled" in turns(app)[0].classes)
        assert app.is_running and app.screen.run_id is None
        assert "cancelled" in shot(app, tmp_path, "aborted")
        await pilot.press("ctrl+c")  # no run: a notice, the app stays
        await pilot.pause()
        assert app.is_running


async def test_ask_human_is_answered_in_place(make_app: MakeApp, model: OpenAIServer,
                                              tmp_path: Path) -> None:
    model.enqueue(Reply(body=completion(tool_calls=[("ask_human", {"question": "Which city?"})])),
                  Reply(body=completion("Paris it is.")))
    app = make_app(agent="asker", session="trip")
    async with running(app) as pilot:
        await say(pilot, "Plan a trip")
        await until(pilot, lambda: bool(app.screen.query(".question Input")))
        box = app.screen.query_one(".question Input", Input)
        assert box.has_focus
        assert "Which city?" in shot(app, tmp_path, "question")
        box.value = "Paris"
        await pilot.press("enter")
        await until(pilot, lambda: bool(turns(app)) and "completed" in turns(app)[0].classes)
        assert turns(app)[0].text == "Paris it is."
    result = next(m for m in model.requests[-1]["messages"] if m.get("role") == "tool")
    assert "Paris" in result["content"]


async def test_commands(make_app: MakeApp, model: OpenAIServer, tmp_path: Path) -> None:
    app = make_app(agent="helper", session="cmds")
    async with running(app) as pilot:
        await say(pilot, "/tools")
        await say(pilot, "/model")
        await say(pilot, "/session")
        await pilot.pause(0.5)
        text = shot(app, tmp_path, "commands")
        assert "tools: calculator" in text and "model openai:fake" in text
        assert "session cmds" in text
        await say(pilot, "/clear")
        await until(pilot, lambda: app.screen.session != "cmds")
        await say(pilot, "/nope")
        await pilot.pause(0.3)
        assert "unknown command /nope" in shot(app, tmp_path, "unknown")
        assert not list(app.screen.query(Collapsible))
