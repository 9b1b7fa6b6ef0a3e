"""Frozen typed data that flows through the loop: messages, tool calls, usage, events.

Pydantic lives at the edges (tool arguments, config, HTTP); inside, everything is a frozen
dataclass. ``Message.cache`` is the one mutable corner: providers memoise a message's wire
encoding there so a step never re-serialises the whole history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
RunStatus = Literal[
    "completed",
    "max_steps",
    "timeout",
    "cancelled",
    "failed",
    "blocked",
    "loop_detected",
    "budget_exceeded",
    "no_answer",  # the model's replies were engine text, twice (``loop/engine_text.py``)
    "paused",  # waiting for an approval; ``agent.resume`` continues it from the store
]
# Which ends keep what (one place; the session, memory and learning read these).
# Runs that end in these states leave the session (and its pending calls) as they were.
UNSAVED: frozenset[str] = frozenset({"failed", "cancelled", "timeout"})
# A saved turn that is over (not paused): memory's post-turn jobs run on it.
ENDED_SAVED: frozenset[str] = frozenset(
    {"completed", "max_steps", "blocked", "loop_detected", "budget_exceeded", "no_answer"})
# The model gave its answer (or ran out of steps on the way): lessons are learned from these.
ANSWERED: frozenset[str] = frozenset({"completed", "max_steps"})


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A model's request to run one tool."""

    id: str
    name: str
    arguments: dict[str, Any]
    # Set when the model's arguments could not be decoded; the loop reports it back.
    parse_error: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a model is told about a tool: its name, description and JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ContentPart:
    """A non-text block in a user message (image, document)."""

    kind: Literal["image", "document", "text"]
    media_type: str = ""
    data: bytes = b""
    text: str = ""
    url: str = ""


# ``Message.name`` of the user-role messages the loop writes itself; context stages tell them
# from the user's words (the task) by it, and never send it on the wire.
OBSERVATION = "thinkloop.observation"
NOTICE = "thinkloop.notice"


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    thought: str | None = None
    parts: tuple[ContentPart, ...] = ()
    # Provider-private memo of this message's wire encoding, keyed by wire format. Not an
    # init field, so ``dataclasses.replace`` gives a changed copy an empty memo instead of
    # the original's encoding (which would send the old text).
    cache: dict[Any, Any] = field(
        default_factory=dict, init=False, compare=False, hash=False, repr=False
    )

    @staticmethod
    def system(text: str) -> Message:
        return Message("system", text)

    @staticmethod
    def user(text: str, parts: tuple[ContentPart, ...] = ()) -> Message:
        return Message("user", text, parts=parts)

    @staticmethod
    def assistant(
        text: str = "", tool_calls: tuple[ToolCall, ...] = (), thought: str | None = None
    ) -> Message:
        return Message("assistant", text, tool_calls=tool_calls, thought=thought)

    @staticmethod
    def tool(call_id: str, name: str, text: str) -> Message:
        return Message("tool", text, tool_call_id=call_id, name=name)

    @staticmethod
    def observation(text: str) -> Message:
        """Tool results sent as a user message (text protocols): the loop's words."""
        return Message("user", text, name=OBSERVATION)

    @staticmethod
    def notice(text: str) -> Message:
        """An instruction the loop adds (retry, answer now, out of steps): not the task."""
        return Message("user", text, name=NOTICE)

    @property
    def from_loop(self) -> bool:
        """A user-role message the loop wrote (an observation or a notice), not the user."""
        return self.role == "user" and self.name in (OBSERVATION, NOTICE)


@dataclass(frozen=True, slots=True)
class Usage:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    # Requests answered by a model whose price is unknown: their cost is not in cost_usd.
    unpriced: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.requests + other.requests,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost_usd + other.cost_usd,
            self.unpriced + other.unpriced,
        )

    @property
    def cost_known(self) -> bool:
        """False when some request's price is unknown: ``cost_usd`` is then a lower bound."""
        return self.unpriced == 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One complete model reply: an assistant message plus accounting."""

    message: Message
    usage: Usage = Usage()
    finish_reason: str | None = None
    model: str = ""
    # Models of a fallback list that failed before ``model`` answered: (name, error).
    fallbacks: tuple[tuple[str, str], ...] = ()
    # Characters of the request the model itself left out to fit its context window of
    # ``window`` tokens (the local models cut the middle of long turns; the loop tells the
    # person: ``model.input_cut``). 0: nothing was cut (``window`` is then not set).
    cut_chars: int = 0
    window: int = 0


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A streamed fragment of the model's reply."""

    text: str
    kind: Literal["text", "thought", "tool_call"] = "text"


@dataclass(frozen=True, slots=True)
class ToolResult:
    call: ToolCall
    content: str
    is_error: bool = False
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Step:
    """One think-act-observe iteration."""

    index: int
    thought: str | None
    text: str
    tool_calls: tuple[ToolCall, ...]
    results: tuple[ToolResult, ...]
    usage: Usage


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A tool call a paused run waits on. The last three fields let a resume restore the run:
    its task, its step limit and how many stored messages its turn has so far."""

    run_id: str
    session_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str
    requested_at: float
    task: str = ""
    max_steps: int = 0
    turn_messages: int = 0


@dataclass(frozen=True, slots=True)
class Skill:
    """A saved procedure: its name, when to use it, and its steps (a skills/*.md file or a
    lesson the agent learned)."""

    name: str
    description: str
    body: str = ""

    def search_text(self) -> str:
        return f"{self.name.replace('-', ' ').replace('_', ' ')}: {self.description}\n" \
               f"{self.body[:500]}"
