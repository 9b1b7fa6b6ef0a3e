"""The chat screen: turn after turn with one agent on one session.

Enter sends; the answer streams; tool calls fold under the turn; approvals and questions are
answered in place; Ctrl-C aborts the run (never the app). ``/model``, ``/tools``,
``/session``, ``/agent`` and ``/clear`` act on the chat itself.
"""

from __future__ import annotations

import time
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from thinkloop.errors import ThinkloopError
from thinkloop.events import (
    ApprovalDecided,
    ApprovalRequested,
    Chunk,
    Event,
    InputRequested,
    LlmResponse,
    MessageSent,
    RunCancelled,
    RunCompleted,
    RunFailed,
    ToolCalled,
    ToolReturned,
)
from thinkloop.tui.backend import Backend
from thinkloop.tui.help import COMMANDS, HelpScreen
from thinkloop.tui.widgets import (
    Answered,
    ApprovalPrompt,
    Banner,
    Decided,
    QuestionPrompt,
    Turn,
    UserMessage,
)


def new_session() -> str:
    return time.strftime("tui-%Y%m%d-%H%M%S")


class ChatScreen(Screen[None]):
    AUTO_FOCUS = "#prompt"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "abort", "Abort run", priority=True),
        Binding("escape", "focus_prompt", "Prompt", show=False),
        Binding("pageup", "scroll('up')", "Scroll up", show=False),
        Binding("pagedown", "scroll('down')", "Scroll down", show=False),
    ]

    def __init__(self, backend: Backend, agent: str, session: str | None) -> None:
        super().__init__(name="chat")
        self.backend = backend
        self.agent = agent
        self.session = session or new_session()
        self.model: str | None = None  # /model NAME: this model instead of the agent's
        self.run_id: str | None = None
        self.turn: Turn | None = None
        self.always: set[str] = set()  # tools approved for the rest of this chat

    def compose(self) -> ComposeResult:
        yield Banner(id="banner")
        yield Static("", id="status")
        yield VerticalScroll(id="log")
        yield Input(placeholder="Message, or /help  (Enter sends, Ctrl-C aborts a run)",
                    id="prompt")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Banner).show(None)
        self.load()

    # --- the log ---------------------------------------------------------------------------

    @property
    def log_view(self) -> VerticalScroll:
        return self.query_one("#log", VerticalScroll)

    def say(self, text: str, cls: str = "note") -> None:
        self.log_view.mount(Static(Text(text), classes=cls))
        self.log_view.scroll_end(animate=False)

    @work(exclusive=True, group="load")
    async def load(self) -> None:
        """The status line, and the session's history (what it holds already)."""
        await self.log_view.remove_children()
        try:
            info = await self.backend.agent(self.agent, self.model)
            self.query_one("#status", Static).update(Text(
                f"agent {self.agent} · model {info.model} · session {self.session} · "
                f"{self.backend.label}"))
            history = await self._history()
        except ThinkloopError as exc:
            self.say(f"error: {exc}", "error")
            return
        for role, text in history:
            self.log_view.mount(Static(Text.assemble((f"{role}  ", "bold"), text),
                                       classes=f"history {role}"))
        if history:
            self.say(f"— {len(history)} earlier messages of session {self.session}")
        self.log_view.scroll_end(animate=False)

    async def _history(self) -> list[tuple[str, str]]:
        rows = await self.backend.messages(self.session)
        names = {"user": "you", "assistant": "agent"}
        return [(names[m.role], m.content) for m in rows
                if m.role in names and m.content.strip()]

    # --- input -----------------------------------------------------------------------------

    @on(Input.Submitted, "#prompt")
    def submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        if self.run_id is not None and not text.startswith("/"):
            # The message stays in the line, to be sent when the run has ended.
            self.notify("a run is going: wait for it, or Ctrl-C to abort it", severity="warning")
            return
        event.input.value = ""
        if text.startswith("/"):
            self.command(text)
        else:
            self.log_view.mount(UserMessage(text))
            self.converse(text)

    def command(self, text: str) -> None:
        name, _, arg = text.partition(" ")
        arg = arg.strip()
        if self.run_id is not None and (name == "/clear" or arg):
            self.notify(f"{name} changes the chat: wait for the run, or Ctrl-C to abort it",
                        severity="warning")
            return
        if name == "/clear":
            self.session = new_session()
            self.load()
        elif name == "/session":
            if arg:
                self.session = arg
                self.load()
            else:
                self.say(f"session {self.session}")
        elif name in ("/model", "/tools", "/agent"):
            self.about(name, arg)
        elif name == "/help":
            self.app.push_screen(HelpScreen())
        else:
            self.say(f"unknown command {name}; the commands: {COMMANDS}", "error")

    @work(group="about")
    async def about(self, name: str, arg: str) -> None:
        try:
            if name == "/agent" and arg:
                await self.backend.agent(arg)
                self.agent, self.model = arg, None
                self.load()
            elif name == "/agent":
                self.say(f"agent {self.agent}; agents: {', '.join(await self.backend.agents())}")
            elif name == "/model" and arg:
                info = await self.backend.agent(self.agent, arg)
                self.model = arg
                self.say(f"model {info.model}")
                self.load()
            else:
                info = await self.backend.agent(self.agent, self.model)
                self.say(f"model {info.model}" if name == "/model"
                         else f"tools: {', '.join(info.tools) or 'none'}")
        except ThinkloopError as exc:
            self.say(f"error: {exc}", "error")

    # --- a run -----------------------------------------------------------------------------

    @work(exclusive=True, group="run")
    async def converse(self, task: str) -> None:
        try:
            self.run_id = await self.backend.start(self.agent, task, self.session, self.model)
        except ThinkloopError as exc:
            self.say(f"error: {exc}", "error")
            return
        self.turn = Turn(self.run_id)
        await self.log_view.mount(self.turn)
        try:
            async for _, event in self.backend.follow(self.run_id):
                await self.apply(self.turn, event)
                self.log_view.scroll_end(animate=False)
        except ThinkloopError as exc:
            self.turn.ended("lost", None, str(exc))
        finally:
            self.run_id = None
            self.query_one("#prompt", Input).focus()

    async def apply(self, turn: Turn, event: Event) -> None:
        match event:
            case Chunk(kind="text", content=content):
                turn.chunk(content)
            case LlmResponse(purpose=None, text=text):
                turn.step_text(text)
            case ToolCalled():
                await turn.tool_called(event)
            case ToolReturned():
                turn.tool_returned(event)
            case ApprovalRequested():
                await self.approval(turn, event)
            case ApprovalDecided(id=call_id) if call_id in turn.prompts:
                turn.prompts[call_id].decided(event)
            case InputRequested():
                prompt = QuestionPrompt(turn.run_id, event)
                await turn.before(prompt)
                prompt.query_one(Input).focus()
            case MessageSent(text=text):
                await turn.before(Static(Text(f"message: {text}"), classes="note"))
            case RunCompleted(status=status, output=output, error=error):
                turn.ended(status or "completed", output, error)
            case RunFailed(error=error):
                turn.ended("failed", None, error)
            case RunCancelled():
                turn.ended("cancelled", None, "aborted")

    async def approval(self, turn: Turn, event: ApprovalRequested) -> None:
        prompt = ApprovalPrompt(turn.run_id, event)
        turn.prompts[event.id] = prompt
        await turn.before(prompt)
        if event.tool in self.always:
            prompt.action_choose("always")
        else:
            prompt.focus()

    @on(Decided)
    async def decided(self, message: Decided) -> None:
        prompt = message.prompt
        if message.choice == "always":
            self.always.add(prompt.event.tool)
        await self._answer(prompt.run_id, prompt.event.id, approved=message.choice != "deny")
        self.query_one("#prompt", Input).focus()

    @on(Answered)
    async def answered(self, message: Answered) -> None:
        await self._answer(message.prompt.run_id, message.prompt.event.id, text=message.text)
        self.query_one("#prompt", Input).focus()

    async def _answer(self, run_id: str, input_id: str, *, approved: bool | None = None,
                      text: str | None = None) -> None:
        try:
            await self.backend.answer(run_id, input_id, approved=approved, text=text)
        except ThinkloopError as exc:
            self.say(f"error: {exc}", "error")

    async def action_abort(self) -> None:
        if self.run_id is None:
            self.notify("no run to abort (Ctrl-Q quits)")
            return
        try:
            await self.backend.abort(self.run_id)
        except ThinkloopError as exc:
            self.say(f"error: {exc}", "error")

    def action_focus_prompt(self) -> None:
        self.query_one("#prompt", Input).focus()

    def action_scroll(self, where: str) -> None:
        if where == "up":
            self.log_view.scroll_page_up()
        else:
            self.log_view.scroll_page_down()
