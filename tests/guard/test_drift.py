from __future__ import annotations

from dataclasses import replace

from thinkloop import Agent
from thinkloop.events import Event
from thinkloop.guard import DriftSettings, GuardSettings
from thinkloop.guard.drift import drift_score
from thinkloop.models.scripted import ScriptedModel


def test_scores() -> None:
    assert drift_score("plan a trip to Rome", "plan a trip to Rome") == (0.0, 0.0, 0.0)
    score, keyword, _ = drift_score("plan a trip to Rome", "Actually, plan Paris instead")
    assert keyword == 1.0 and score >= 0.4
    assert drift_score("plan a trip to Rome in May", "book the trip to Rome in May")[0] < 0.4
    assert drift_score("plan a trip to Rome", "write a poem about whales")[0] == 0.5


async def test_drift_event_across_turns_of_a_session() -> None:
    events: list[Event] = []
    guard = replace(GuardSettings.off(), drift=DriftSettings())
    agent = Agent(ScriptedModel(["ok", "ok", "ok"]), guard=guard, on_event=events.append,
                  plugins=False)
    await agent.run("plan a trip to Rome in May", session="s")
    await agent.run("plan the trip to Rome in May for two", session="s")
    await agent.run("Actually, write a poem about whales instead", session="s")
    drift = [e.payload for e in events if e.type == "goal.drift"]
    assert len(drift) == 1
    assert drift[0]["previous"] == "plan the trip to Rome in May for two"
    assert drift[0]["keyword"] == 1.0 and drift[0]["score"] >= 0.4
