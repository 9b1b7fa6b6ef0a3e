"""thinkloop: an agentic reasoning engine.

    from thinkloop import Agent, tool

    @tool
    def add(a: int, b: int) -> int:
        "Add two integers."
        return a + b

    result = Agent("openai:gpt-4o-mini", tools=[add]).run_sync("What is 2 + 3?")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thinkloop._lazy import lazy_exports

if TYPE_CHECKING:
    from thinkloop.agent import Agent, AgentOptions
    from thinkloop.core.errors import ThinkloopError
    from thinkloop.core.events import Event
    from thinkloop.core.types import Message, ModelResponse, Step, ToolCall, ToolResult, Usage
    from thinkloop.loop import RunHandle, RunResult
    from thinkloop.models import Model, ModelSettings, ScriptedModel
    from thinkloop.tools import Tool, ToolContext, tool

__version__ = "0.1.0"

# Where each public name lives. They load on first use (PEP 562), so ``import thinkloop`` and
# the ``thinkloop`` command's start-up do not pay for the engine, pydantic and the HTTP stack.
_EXPORTS: dict[str, str] = {
    "Agent": "thinkloop.agent",
    "AgentOptions": "thinkloop.agent",
    "Event": "thinkloop.core.events",
    "Message": "thinkloop.core.types",
    "Model": "thinkloop.core.model",
    "ModelResponse": "thinkloop.core.types",
    "ModelSettings": "thinkloop.core.model",
    "RunHandle": "thinkloop.loop",
    "RunResult": "thinkloop.loop",
    "ScriptedModel": "thinkloop.models",
    "Step": "thinkloop.core.types",
    "ThinkloopError": "thinkloop.core.errors",
    "Tool": "thinkloop.core.tool",
    "ToolCall": "thinkloop.core.types",
    "ToolContext": "thinkloop.core.tool",
    "ToolResult": "thinkloop.core.types",
    "Usage": "thinkloop.core.types",
    "tool": "thinkloop.core.tool",
}

__all__ = [
    "Agent",
    "AgentOptions",
    "Event",
    "Message",
    "Model",
    "ModelResponse",
    "ModelSettings",
    "RunHandle",
    "RunResult",
    "ScriptedModel",
    "Step",
    "ThinkloopError",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolResult",
    "Usage",
    "tool",
]

# `__all__` stays a literal list: it is what marks these names as re-exported for type checkers.
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
