"""ScriptedModel: replays given replies in order. The test double for the loop."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from thinkloop.core.errors import ModelResponseError
from thinkloop.core.model import ModelSettings
from thinkloop.core.types import Message, ModelResponse, TextDelta, ToolCall, ToolSpec, Usage
from thinkloop.models.catalog import ModelFacts, facts


@dataclass(frozen=True, slots=True)
class ModelCall:
    """What the scripted model was asked: the exact messages and tool specs."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    settings: ModelSettings


_ids = itertools.count(1)


def call(name: str, **arguments: Any) -> ToolCall:
    """Shorthand for a tool call in a script: ``call("add", a=1, b=2)``."""
    return ToolCall(f"call_{next(_ids)}", name, arguments)


def reply(
    text: str = "", *calls: ToolCall, thought: str | None = None, usage: Usage | None = None
) -> ModelResponse:
    """Shorthand for a scripted model reply."""
    return ModelResponse(
        Message.assistant(text, tuple(calls), thought),
        usage or Usage(1, 10, 5),
        "tool_calls" if calls else "stop",
        "scripted",
    )


class ScriptedModel:
    """Answers each call with the next item of ``script``.

    An item may be a :class:`ModelResponse`, an assistant :class:`Message`, plain text (a final
    answer), an exception instance (raised), or a callable ``(messages, tools) -> item`` for
    replies that depend on the request. ``delay_s`` makes each call take that long.
    """

    def __init__(self, script: Sequence[Any], *, delay_s: float = 0.0, name: str = "scripted"):
        self.script = list(script)
        self.delay_s = delay_s
        self.name = name
        self.calls: list[ModelCall] = []


    @property
    def facts(self) -> ModelFacts:
        """The catalog's for its name (a subclass may set ``context_window``), priced by its
        script: its replies carry their cost."""
        found = facts(self.name)
        window = getattr(self, "context_window", None)
        if isinstance(window, int):
            found = replace(found, window=window)
        return found if found.priced else replace(found, price=(0.0, 0.0),
                                                  price_source="script")
    def _next(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        if len(self.calls) > len(self.script):
            raise ModelResponseError(f"script exhausted after {len(self.script)} replies")
        item = self.script[len(self.calls) - 1]
        if callable(item) and not isinstance(item, type):
            item = item(messages, tools)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, str):
            return reply(item)
        if isinstance(item, Message):
            return ModelResponse(item, Usage(1, 10, 5), None, "scripted")
        assert isinstance(item, ModelResponse), f"bad script item {item!r}"
        return item

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> ModelResponse:
        self.calls.append(ModelCall(tuple(messages), tuple(tools), settings))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return self._next(messages, tools)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        response = await self.complete(messages, tools, settings)
        text = response.message.content
        for i in range(0, len(text), 4):
            yield TextDelta(text[i : i + 4])
        yield response
