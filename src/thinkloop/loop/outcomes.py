"""The closed set of transitions the loop can take after reading a model reply."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from thinkloop.core.types import Message, ToolCall


@dataclass(frozen=True, slots=True)
class RunTools:
    """Execute these calls, observe, and think again."""

    assistant: Message
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class Finish:
    """Stop with this answer (``output`` is the validated structured value, if any)."""

    assistant: Message
    text: str
    output: Any


@dataclass(frozen=True, slots=True)
class TryAgain:
    """Tell the model what was wrong with its reply and let it answer again."""

    assistant: Message
    feedback: str


NextStep = RunTools | Finish | TryAgain
