"""Provider function calling: tools go in the request, calls come back structured."""

from __future__ import annotations

from collections.abc import Sequence

from thinkloop.core.model import ReplyConstraint
from thinkloop.core.protocol import Act, Answer, Reading
from thinkloop.core.types import Message, ModelResponse, ToolResult, ToolSpec


class NativeTools:
    """The native half of a protocol (``auto`` has it too): the tools go in the request as
    they are, and no text constraint can describe a reply that may be a structured call."""

    def model_tools(self, tools: Sequence[ToolSpec]) -> Sequence[ToolSpec]:
        return tools

    def reply_constraint(self, tools: Sequence[ToolSpec], *,
                         required: bool = False) -> ReplyConstraint | None:
        return None


def tool_messages(results: Sequence[ToolResult]) -> list[Message]:
    """Each result as the tool message answering its native call id."""
    return [Message.tool(r.call.id, r.call.name, r.content) for r in results]


class NativeProtocol(NativeTools):
    name = "native"

    def prompt_section(self, tools: Sequence[ToolSpec]) -> str:
        return ""

    def read(self, response: ModelResponse) -> Reading:
        msg = response.message
        if msg.tool_calls:
            return Act(msg.tool_calls, msg.content, msg.thought)
        return Answer(msg.content, msg.thought)

    def observations(self, assistant: Message, results: Sequence[ToolResult]) -> list[Message]:
        return tool_messages(results)
