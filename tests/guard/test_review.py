from __future__ import annotations

from dataclasses import replace

from thinkloop.guard import GuardSettings, ReviewSettings
from thinkloop.guard.review import review
from thinkloop.models.scripted import call, reply
from thinkloop.tools.base import tool
from thinkloop.types import ToolCall, ToolResult

from .helpers import run_agent

S = ReviewSettings()
LONG = "The Eiffel Tower is 330 metres tall and was completed in 1889 for the World's Fair. " * 3


def r(name: str, content: str, err: bool = False) -> ToolResult:
    return ToolResult(ToolCall("i", name, {}), content, err)


def test_codes() -> None:
    assert review("ok", [], S) == {}  # no tools: a plain chat answer is never blocked
    assert review("Here you go", [r("a", "Error: boom", True)], S) == {"ERROR_UNRESOLVED": "a"}
    assert review("The tool failed: boom", [r("a", "Error: boom", True)], S) == {}
    assert review("fixed", [r("a", "Error", True), r("a", "fine")], S) == {}
    assert review("Done.", [r("a", "fine")], S) == {"ACK_ONLY": ""}
    assert review("I'll look into it!", [r("a", "fine")], S) == {"ACK_ONLY": ""}
    assert review("Summary ready.", [r("web", LONG)], S) == {"UNSENT_RESULTS": "web"}
    assert review("It is 330 metres tall.", [r("web", LONG)], S) == {}
    assert review("Done.", [r("web", LONG)], S) == {"ACK_ONLY": "", "UNSENT_RESULTS": "web"}


@tool
def fetch(url: str) -> str:
    """Fetch."""
    return LONG


@tool
def boom() -> str:
    """Always fails."""
    raise RuntimeError("disk on fire")


def review_only(**kw: object) -> GuardSettings:
    return replace(GuardSettings.off(), review=ReviewSettings(**kw))  # type: ignore[arg-type]


async def test_blocked_completion_injects_reason_and_continues() -> None:
    run = await run_agent([reply("", call("fetch", url="x")), "Done.",
                           "The tower is 330 metres tall."], tools=[fetch], guard=review_only())
    assert run.result.status == "completed" and run.result.text == "The tower is 330 metres tall."
    feedback = run.model.calls[2].messages[-1]
    assert feedback.role == "user" and feedback.content.startswith(
        "[Completion blocked: ACK_ONLY, UNSENT_RESULTS] Your answer only acknowledges")
    assert run.guard_events == [("review.blocked", {
        "codes": ["ACK_ONLY", "UNSENT_RESULTS"], "reason": feedback.content, "attempt": 1})]


async def test_unresolved_error_then_explained() -> None:
    run = await run_agent([reply("", call("boom")), "All set!", "Sorry, the tool failed."],
                          tools=[boom], guard=review_only())
    assert [p["codes"] for _, p in run.guard_events] == [["ERROR_UNRESOLVED"]]
    assert run.result.text == "Sorry, the tool failed."


async def test_at_most_twice_per_run() -> None:
    run = await run_agent([reply("", call("fetch", url="x")), "Done.", "Done!", "OK."],
                          tools=[fetch], guard=review_only(), max_steps=10)
    assert len(run.of("review.blocked")) == 2
    assert run.result.status == "completed" and run.result.text == "OK."
