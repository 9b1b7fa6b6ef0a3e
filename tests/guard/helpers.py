"""Run an agent with a scripted model and guards; collect events and tool executions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from thinkloop import Agent
from thinkloop.agent import with_options
from thinkloop.events import Event
from thinkloop.guard import GuardSettings
from thinkloop.loop.result import RunResult
from thinkloop.models.scripted import ScriptedModel
from thinkloop.tools.base import Tool

GUARD_EVENTS = ("guard.", "policy.", "approval.", "review.", "nudge", "budget.", "plan.")


@dataclass
class Run:
    result: RunResult
    events: list[Event]
    model: ScriptedModel
    executed: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def of(self, *types: str) -> list[Event]:
        return [e for e in self.events if e.type in types]

    @property
    def guard_events(self) -> list[tuple[str, dict[str, Any]]]:
        return [(e.type, e.payload) for e in self.events if e.type.startswith(GUARD_EVENTS)]


async def run_agent(
    script: Sequence[Any], task: str = "do the thing", *, tools: Sequence[Tool] = (),
    guard: GuardSettings | None = None, user_id: str | None = None,
    session: str | None = None, **agent_kw: Any,
) -> Run:
    model = ScriptedModel(script)
    events: list[Event] = []
    agent = Agent(model, tools=list(tools), guard=guard or GuardSettings(),
                  on_event=events.append, plugins=False, **with_options(agent_kw))
    result = await agent.run(task, user_id=user_id, session=session)
    return Run(result, events, model)
