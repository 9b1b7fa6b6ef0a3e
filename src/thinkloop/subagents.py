"""Sub-agents, ready to use: :class:`SubAgents` that start their children as
:func:`thinkloop.agent.spawn_child` builds them, inside a run or outside one.

The runner itself (:mod:`thinkloop.tools.subagents`) sits below the agent and starts children
through the ``spawn`` its caller's run gives it; this one brings its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from thinkloop.agent import spawn_child
from thinkloop.core.spec import MINIMAL_INSTRUCTIONS, AgentSpec, Spawn
from thinkloop.tools.subagents import ChildResult, render_results
from thinkloop.tools.subagents import SubAgents as _Runner


@dataclass
class SubAgents(_Runner):
    """Runs child agents; one instance may serve many parent runs at once."""

    spawn: Spawn | None = spawn_child


__all__ = ["MINIMAL_INSTRUCTIONS", "AgentSpec", "ChildResult", "SubAgents", "render_results"]
