"""The Model protocol every provider implements, and the settings passed to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from thinkloop.core.types import Message, ModelResponse, TextDelta, ToolSpec


@dataclass(frozen=True, slots=True)
class ReplyConstraint:
    """The exact shape a reply must take, for providers that can constrain decoding.

    ``kind`` is ``json_schema`` (``text`` is the schema as JSON) or ``gbnf`` (``text`` is a
    llama.cpp grammar). The local provider compiles either to a grammar; OpenAI-compatible
    providers send a schema as ``response_format`` and a grammar only to servers whose quirks
    say they take one; Anthropic has no such request field and ignores it.
    """

    kind: Literal["json_schema", "gbnf"]
    text: str
    name: str = "reply"


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Per-call knobs. ``extra`` is merged into the provider's request body as-is."""

    temperature: float | None = None
    max_tokens: int | None = None
    tool_choice: Literal["auto", "none", "required"] | None = None
    timeout_s: float = 120.0
    extra: dict[str, Any] = field(default_factory=dict)
    # Set by the loop for text protocols (see ToolCallProtocol.reply_constraint).
    constraint: ReplyConstraint | None = None
    # How hard a reasoning model thinks: OpenAI's ``reasoning_effort``, Anthropic's extended
    # thinking budget (THINKING_BUDGETS); providers without it ignore it.
    reasoning_effort: Literal["low", "medium", "high"] | None = None


# Anthropic extended thinking: the token budget for each reasoning effort.
THINKING_BUDGETS = {"low": 1024, "medium": 4096, "high": 16384}


@runtime_checkable
class Model(Protocol):
    """A chat model. ``name`` is the ``provider:model`` string it was resolved from.

    ``stream`` yields :class:`TextDelta` fragments as they arrive and ends with exactly one
    :class:`ModelResponse` holding the whole reply.
    """

    name: str

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> ModelResponse: ...

    def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[TextDelta | ModelResponse]: ...


def input_kinds(model: object) -> frozenset[str]:
    """The content parts ``model`` reads besides text (``"image"``, ``"document"``).

    A model (or the model a wrapper's ``inner`` holds) may declare ``input_kinds``; else an
    OpenAI-wire model takes images when its quirks say so, and documents are sent as text.
    """
    while (kinds := getattr(model, "input_kinds", None)) is None and hasattr(model, "inner"):
        model = model.inner
    if kinds is not None:
        return frozenset(kinds)
    images = getattr(getattr(model, "quirks", None), "images", True)
    return frozenset({"image"}) if images else frozenset()
