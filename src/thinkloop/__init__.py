"""thinkloop: an agentic reasoning engine.

    from thinkloop import Agent, tool

    @tool
    def add(a: int, b: int) -> int:
        "Add two integers."
        return a + b

    result = Agent("openai:gpt-4o-mini", tools=[add]).run_sync("What is 2 + 3?")
"""

from thinkloop.agent import Agent
from thinkloop.errors import ThinkloopError
from thinkloop.events import Event
from thinkloop.loop import RunHandle, RunResult
from thinkloop.models import Model, ModelSettings, ScriptedModel
from thinkloop.tools import Tool, ToolContext, tool
from thinkloop.types import Message, ModelResponse, Step, ToolCall, ToolResult, Usage

__version__ = "0.1.0"

__all__ = [
    "Agent",
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
