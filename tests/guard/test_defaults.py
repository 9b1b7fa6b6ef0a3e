"""All default guards together on ordinary runs: they stay out of the way."""

from __future__ import annotations

from thinkloop.models.scripted import call, reply
from thinkloop.tools.base import tool

from .helpers import run_agent

PAGE = "Paris weather today: 8 degrees, partly cloudy, wind 15 km/h from the north-west. " * 3


@tool(external=True)
def web_search(query: str) -> str:
    """Search the web."""
    return PAGE


async def test_ordinary_tool_run_with_all_defaults() -> None:
    run = await run_agent(
        [reply("", call("web_search", query="weather Paris")),
         "It is 8 degrees and partly cloudy in Paris."],
        "Find the weather in Paris", tools=[web_search])
    assert run.result.status == "completed"
    assert run.guard_events == [("budget.assigned", {
        "complexity": "simple", "max_steps": 8, "lean": False, "mode": "normal",
        "source": "heuristic"})]
    obs = run.result.steps[0].results[0].content
    assert obs.startswith('<untrusted_content source="web_search"')
    assert PAGE.strip().replace(" ", "^") in obs


async def test_plain_chat_with_all_defaults() -> None:
    run = await run_agent(["ok"], "say ok")
    assert run.result.status == "completed" and run.result.text == "ok"
    assert [t for t, _ in run.guard_events] == ["budget.assigned"]
