"""Provider function calling: tools go in the request, calls come back structured."""

from __future__ import annotations

from collections.abc import Sequence

from thinkloop.models.base import ReplyConstraint
from thinkloop.protocols.base import Act, Answer, Reading
from thinkloop.types import Message, ModelResponse, ToolResult, ToolSpec


class NativeProtocol:
    name = "native"

    def prompt_section(self, tools: Sequence[ToolSpec]) -> str:
        return ""

    def model_tools(self, tools: Sequence[ToolSpec]) -> Sequence[ToolSpec]:
        return tools

    def reply_constraint(self, tools: Sequence[ToolSpec], *,
                         required: bool = False) -> ReplyConstraint | None:
        return None

    def read(self, response: ModelResponse) -> Reading:
        msg = response.message
        if msg.tool_calls:
            return Act(msg.tool_calls, msg.content, msg.thought)
        return Answer(msg.content, msg.thought)

    def observations(self, assistant: Message, results: Sequence[ToolResult]) -> list[Message]:
        return [Message.tool(r.call.id, r.call.name, r.content) for r in results]
