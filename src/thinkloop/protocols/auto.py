"""``auto``: provider function calling, with the text parser as a fallback.

Tools are offered natively. A reply that carries structured tool calls is read natively; a
plain-text reply goes through the text parser, so a model that writes ``<tool_call>`` or
``[TOOL_CALLS]`` into its text (common with open models behind OpenAI-compatible servers)
still gets its calls run. The model's name picks its family's formats (``table.FAMILIES``),
read first; a reply with nothing in them is read in every format. Results go back the way the
calls came: tool messages for native calls, one user message for parsed ones (a tool message
must answer a native call id).
"""

from __future__ import annotations

from collections.abc import Sequence

from thinkloop.core.protocol import Act, Answer, Reading
from thinkloop.core.types import Message, ModelResponse, ToolResult, ToolSpec
from thinkloop.protocols.native import NativeTools, tool_messages
from thinkloop.protocols.parse import Parsed
from thinkloop.protocols.table import family_of
from thinkloop.protocols.text import TextProtocol, conform, format_observations


class AutoProtocol(NativeTools, TextProtocol):
    name = "auto"
    format_hint = ("a native tool call, or <tool_call>{\"name\": \"tool_name\", "
                   "\"arguments\": {...}}</tool_call>")

    def prompt_section(self, tools: Sequence[ToolSpec]) -> str:
        self._specs = {t.name: t for t in tools}
        return ""

    def read(self, response: ModelResponse) -> Reading:
        msg = response.message
        if msg.tool_calls:
            calls = tuple(conform(c, self._specs) if c.parse_error is None else c
                          for c in msg.tool_calls)
            return Act(calls, msg.content, msg.thought)
        return super().read(response)

    def parse(self, text: str, model: str | None = None,
              formats: frozenset[str] | None = None) -> Parsed:
        family = family_of(model)
        if family is not None and formats is None:
            parsed = super().parse(text, model, family.formats)
            if parsed.calls or parsed.problems or parsed.completed is not None:
                return parsed
        return super().parse(text, model, formats)

    def finish(self, parsed: Parsed, thought: str | None, raw: str) -> Reading:
        if not parsed.thoughts and parsed.completed is None:
            # Nothing was parsed out of the reply: the answer is the reply, untouched.
            return Answer(raw, thought)
        return super().finish(parsed, thought, raw)

    def observations(self, assistant: Message, results: Sequence[ToolResult]) -> list[Message]:
        if assistant.tool_calls:
            return tool_messages(results)
        return [Message.observation(format_observations(results))] if results else []
