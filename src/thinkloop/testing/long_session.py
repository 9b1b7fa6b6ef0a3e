"""A scripted long-session workload: the 300-turn test and ``benchmarks/memory.py`` share it.

``answer`` plays the agent's model (a long reply echoing the turn); ``helper`` plays the
background model of the memory layer (flush turns store nothing, summaries are short and
fixed), so the session's growth and its compaction are deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

from thinkloop.core.types import Message, ModelResponse, ToolSpec
from thinkloop.models.scripted import reply

FILLER = "Please also consider the logistics, the budget and the timeline in detail. " * 3


def helper(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
    system = messages[0].content
    if system.startswith("You maintain long-term memory"):
        return reply("NO_REPLY")
    if system.startswith("You keep the condensed history"):
        return reply("Condensed: a long planning conversation about many topics. " * 5)
    return reply("- talked about planning")


def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
    return reply(f"Noted: {messages[-1].content[:40]} " + "Here is a detailed plan. " * 8)
