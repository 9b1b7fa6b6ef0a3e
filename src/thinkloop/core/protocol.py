"""How tool calls travel between the loop and a model.

A protocol tells the model about tools (a prompt section and/or native tool specs), reads each
reply into one of three readings (act, answer, malformed) and turns tool results back into
messages. ``native`` uses provider function calling; text protocols parse the reply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from thinkloop.core.model import ReplyConstraint
from thinkloop.core.types import Message, ModelResponse, ToolCall, ToolResult, ToolSpec


@dataclass(frozen=True, slots=True)
class Act:
    """The model asked for tools."""

    calls: tuple[ToolCall, ...]
    text: str = ""
    thought: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """The model gave its final answer."""

    text: str
    thought: str | None = None


@dataclass(frozen=True, slots=True)
class Malformed:
    """The reply looks like a tool call that cannot be parsed; ``problem`` says why."""

    problem: str
    text: str = ""


Reading = Act | Answer | Malformed


class ToolCallProtocol(Protocol):
    name: str

    def prompt_section(self, tools: Sequence[ToolSpec]) -> str:
        """Text for the system prompt describing the tools and the call format ("" if none)."""
        ...

    def model_tools(self, tools: Sequence[ToolSpec]) -> Sequence[ToolSpec]:
        """The tool specs passed to the provider's native function calling."""
        ...

    def reply_constraint(self, tools: Sequence[ToolSpec], *,
                         required: bool = False) -> ReplyConstraint | None:
        """The exact shape of a reply, for providers that constrain decoding (None: free);
        ``required``: the reply must call a tool (``tool_choice="required"``)."""
        ...

    def read(self, response: ModelResponse) -> Reading: ...

    def observations(self, assistant: Message, results: Sequence[ToolResult]) -> list[Message]:
        """Messages that report ``results`` back to the model."""
        ...
