"""The pieces of a chat: a turn's streaming answer, its tool calls folding open under it, and
the in-place prompts (an approval, an ``ask_human`` question). Model and tool text is shown
as plain text (``rich.text.Text``), never read as markup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import orjson
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Collapsible, Input, Label, Static

from thinkloop.events import (
    ApprovalDecided,
    ApprovalRequested,
    InputRequested,
    ToolCalled,
    ToolReturned,
)

ARGS_CHARS = 60  # of a tool call's arguments in its folded title
RESULT_CHARS = 4000  # of a tool result shown unfolded
# Who decided an approval (``approval.decided``'s source), in words.
SOURCES = {"approver": "by you", "cache": "remembered", "timeout": "no answer in time",
           "error": "the approver failed", "none": "no approver"}


def short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def call_text(name: str, arguments: object) -> str:
    return f"{name}({orjson.dumps(arguments).decode()})"


class Banner(Static):
    """A line across the top while the backend is unreachable."""

    def show(self, text: str | None) -> None:
        self.display = text is not None
        if text is not None:
            self.update(Text(text))


class UserMessage(Static):
    def __init__(self, text: str) -> None:
        super().__init__(Text.assemble(("you  ", "bold"), text))


class ToolFold(Collapsible):
    """One tool call: folded to ``name(args) -> ok``, open to its arguments and result."""

    def __init__(self, event: ToolCalled) -> None:
        self.call_id = event.id
        self.name_ = event.name
        self.args = call_text(event.name, event.arguments)
        self.result = Static(Text("running…", style="italic"), classes="result")
        super().__init__(Static(Text(self.args), classes="args"), self.result,
                         title=f"{short(self.args, ARGS_CHARS)}  …", collapsed=True)
        self.add_class("tool")

    def returned(self, event: ToolReturned) -> None:
        outcome = "error" if event.is_error else "ok"
        self.title = f"{short(self.args, ARGS_CHARS)}  → {outcome} {event.duration_s:.2f}s"
        self.add_class(outcome)
        self.result.update(Text(short(event.content, RESULT_CHARS) if len(event.content)
                                > RESULT_CHARS else event.content))


@dataclass
class Decided(Message):
    """An approval prompt was answered: ``choice`` is once, always or deny."""

    prompt: ApprovalPrompt
    choice: str


class ApprovalPrompt(Vertical, can_focus=True):
    """``tool(args)`` needs approval: y approves once, a always for this tool, n denies."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("y", "choose('once')", "Approve once"),
                Binding("a", "choose('always')", "Always for this tool"),
                Binding("n", "choose('deny')", "Deny")]

    def __init__(self, run_id: str, event: ApprovalRequested) -> None:
        super().__init__(classes="approval")
        self.run_id = run_id
        self.event = event
        self.answered = False

    def compose(self) -> ComposeResult:
        e = self.event
        yield Label(Text.assemble(("approve? ", "bold"), call_text(e.tool, e.arguments),
                                  f"  ({e.reason})" if e.reason else ""))
        with Horizontal(classes="choices"):
            yield Button("y approve once", id="once", compact=True)
            yield Button(f"a always {e.tool}", id="always", compact=True)
            yield Button("n deny", id="deny", compact=True)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_choose(event.button.id or "deny")

    def action_choose(self, choice: str) -> None:
        if not self.answered:
            self.answered = True
            self.post_message(Decided(self, choice))

    def decided(self, event: ApprovalDecided) -> None:
        self.answered = True
        self.remove_children()
        verdict = "approved" if event.approved else "denied"
        how = SOURCES.get(event.source, event.source)
        self.mount(Label(Text.assemble((f"{verdict} ", "bold"),
                                       call_text(self.event.tool, self.event.arguments),
                                       f"  ({how})")))
        self.add_class("approved" if event.approved else "denied")


@dataclass
class Answered(Message):
    prompt: QuestionPrompt
    text: str


class QuestionPrompt(Vertical):
    """``ask_human``: the question and an input for the answer, in place."""

    def __init__(self, run_id: str, event: InputRequested) -> None:
        super().__init__(classes="question")
        self.run_id = run_id
        self.event = event

    def compose(self) -> ComposeResult:
        yield Label(Text.assemble(("the agent asks: ", "bold"), self.event.question))
        yield Input(placeholder="your answer, then Enter", classes="answer")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if text:
            self.query_one(Input).disabled = True
            self.post_message(Answered(self, text))


class Turn(Vertical):
    """One run in the chat: tool calls fold under it, the answer streams at its end."""

    def __init__(self, run_id: str) -> None:
        super().__init__(classes="turn")
        self.run_id = run_id
        self.text = ""
        self.answer = Static("", classes="answer")
        self.answer.display = False
        self.status = Static("", classes="status")
        self.folds: dict[str, ToolFold] = {}
        self.prompts: dict[str, ApprovalPrompt] = {}

    def compose(self) -> ComposeResult:
        yield self.answer
        yield self.status

    def _answer(self) -> None:
        self.answer.display = bool(self.text)  # no empty "agent" line while tools run
        self.answer.update(Text.assemble(("agent  ", "bold"), self.text))

    def chunk(self, text: str) -> None:
        self.text += text
        self._answer()

    def step_text(self, text: str) -> None:
        """A step's whole reply: the text streamed so far is that step's."""
        self.text = text
        self._answer()

    async def before(self, widget: Widget) -> None:
        """Put ``widget`` above the answer (the answer stays last)."""
        await self.mount(widget, before=self.answer)

    async def tool_called(self, event: ToolCalled) -> None:
        fold = ToolFold(event)
        self.folds[event.id] = fold
        await self.before(fold)
        self.text = ""
        self._answer()

    def tool_returned(self, event: ToolReturned) -> None:
        fold = self.folds.get(event.id)
        if fold is not None:
            fold.returned(event)

    def ended(self, status: str, output: str | None, error: str | None) -> None:
        if output is not None:
            self.text = output
            self._answer()
        note = status if status == "completed" else f"{status}: {error}" if error else status
        self.status.update(Text(f"— {note}", style="italic"))
        self.add_class(status)
