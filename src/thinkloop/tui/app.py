"""``ThinkloopApp``: the chat and operator screens over one backend, a help screen, and a
banner while the backend cannot be reached."""

from __future__ import annotations

from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from thinkloop.tui.backend import Backend
from thinkloop.tui.chat import ChatScreen
from thinkloop.tui.help import HelpScreen
from thinkloop.tui.operator import OperatorScreen
from thinkloop.tui.widgets import Banner

CHECK_S = 1.0  # how often an unreachable backend is tried again

CSS = """
#banner { dock: top; height: 1; background: $error; color: $text; text-style: bold;
          padding: 0 1; }
#status { height: 1; background: $boost; color: $text-muted; padding: 0 1; }
#log { height: 1fr; padding: 0 1; }
#prompt { dock: bottom; margin-bottom: 1; }
.turn { height: auto; margin-bottom: 1; }
.answer, .status, .note, .history, UserMessage { height: auto; }
UserMessage { margin-top: 1; color: $text-primary; }
.history { color: $text-muted; }
.note { color: $text-muted; text-style: italic; }
.error, .turn.failed .status, .turn.cancelled .status { color: $text-error; }
.tool { margin: 0; padding: 0; border: none; }
.tool.error CollapsibleTitle { color: $text-error; }
.tool.ok CollapsibleTitle { color: $text-success; }
.tool Contents { padding: 0 0 0 2; }
.approval, .question { height: auto; border: round $warning; padding: 0 1; }
.approval:focus { border: round $accent; }
.approval.approved { border: round $success; }
.approval.denied { border: round $error; }
.approval Label, .question Label { width: 1fr; }
.choices { height: 1; }
.choices Button { margin-right: 2; }
TabbedContent { height: 1fr; }
#run-head, #memory-head { height: 1; text-style: bold; }
#sessions-table { height: 40%; }
HelpScreen { align: center middle; }
HelpScreen > VerticalScroll { width: 78; max-height: 24; border: round $accent;
                              background: $surface; padding: 0 1; }
"""


class ThinkloopApp(App[None]):
    TITLE = "thinkloop"
    CSS = CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "help", "Help"),
        Binding("f2", "show('chat')", "Chat"),
        Binding("f3", "show('operator')", "Operator"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(self, backend: Backend, *, agent: str = "default",
                 session: str | None = None, start: str = "chat") -> None:
        super().__init__()
        self.backend = backend
        self.agent_name = agent
        self.session = session
        self.first = start
        self._online = True

    def on_mount(self) -> None:
        self.install_screen(ChatScreen(self.backend, self.agent_name, self.session), "chat")
        self.install_screen(OperatorScreen(self.backend), "operator")
        self.push_screen(self.first)
        self.set_interval(CHECK_S, self.check)

    async def action_show(self, name: str) -> None:
        if self.screen.name != name:
            await self.switch_screen(name)
            self.banner()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def check(self) -> None:
        """Reach the backend again; a banner while it cannot be, a notice when it is back."""
        was = self._online
        self._online = await self.backend.check()
        if was and not self._online:
            self.banner()
        elif self._online and not was:
            self.banner()
            self.notify("reconnected to " + self.backend.label)

    def banner(self) -> None:
        text = (None if self._online else
                f"cannot reach {self.backend.label} — retrying every {CHECK_S:g}s")
        for banner in self.screen.query(Banner):
            banner.show(text)

    async def on_unmount(self) -> None:
        await self.backend.aclose()
