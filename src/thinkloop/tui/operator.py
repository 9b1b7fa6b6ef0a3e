"""The operator screen: runs as they go, one run's steps streaming, sessions and their
messages, memory layers filtered by run, and a run's trace as a tree.

Keys: r runs, enter opens the selected run, s sessions, m memory, f filter memory by the run,
t trace; y / n approve or deny what the open run waits on, x aborts it.
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, RichLog, Static, TabbedContent, TabPane, Tree

from thinkloop.errors import ThinkloopError
from thinkloop.events import (
    ApprovalDecided,
    ApprovalRequested,
    Event,
    InputRequested,
    LlmResponse,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStarted,
    ToolCalled,
    ToolReturned,
)
from thinkloop.tui.backend import Backend, RunRow
from thinkloop.tui.trace import span_tree
from thinkloop.tui.widgets import Banner, call_text, short

REFRESH_S = 1.0
RUN_COLUMNS = ("run", "status", "agent", "steps", "tokens", "cost $", "time", "task")
OTHERS = 60  # about what the columns before the task take, with their padding


def elapsed(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds < 60 else f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def run_cells(r: RunRow, width: int) -> tuple[str, ...]:
    """A run's row; the task gets what the other columns leave of ``width``."""
    status = r.status + (" ?" if r.waiting else "")
    return (r.id[:8], status, r.agent, str(r.steps), f"{r.input_tokens}/{r.output_tokens}",
            f"{r.cost_usd:.4f}", elapsed(r.elapsed_s), short(r.task, max(12, width - OTHERS)))


class OperatorScreen(Screen[None]):
    AUTO_FOCUS = "#runs-table"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "tab('runs')", "Runs"),
        Binding("enter", "open", "Open run", show=False),
        Binding("s", "tab('sessions')", "Sessions"),
        Binding("m", "memory", "Memory"),
        Binding("f", "filter", "Filter by run"),
        Binding("t", "trace", "Trace"),
        Binding("y", "decide(True)", "Approve"),
        Binding("n", "decide(False)", "Deny"),
        Binding("x", "abort", "Abort"),
    ]

    def __init__(self, backend: Backend) -> None:
        super().__init__(name="operator")
        self.backend = backend
        self.selected: str | None = None  # the run the keys act on
        self.rows: dict[str, RunRow] = {}
        self.waiting: dict[str, ApprovalRequested] = {}  # the open run's approvals, by id
        self.only_run = True

    def compose(self) -> ComposeResult:
        yield Banner(id="banner")
        yield Static(Text(self.backend.label), id="status")
        with TabbedContent(initial="runs"):
            with TabPane("Runs", id="runs"):
                yield DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
            with TabPane("Run", id="run"):
                yield Static("no run open: select one under Runs and press Enter",
                             id="run-head")
                yield RichLog(id="run-log", wrap=True, markup=False)
            with TabPane("Sessions", id="sessions"):
                yield DataTable(id="sessions-table", cursor_type="row")
                yield RichLog(id="messages", wrap=True, markup=False)
            with TabPane("Memory", id="memory"):
                yield Static("", id="memory-head")
                yield DataTable(id="memory-table", cursor_type="row")
            with TabPane("Trace", id="trace"):
                yield Tree("no trace open: select a run and press t", id="trace-tree")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Banner).show(None)
        self.query_one("#runs-table", DataTable).add_columns(*RUN_COLUMNS)
        self.query_one("#sessions-table", DataTable).add_columns("session", "messages",
                                                                "updated")
        self.query_one("#memory-table", DataTable).add_columns("layer", "key", "content",
                                                              "when")
        self.refresh_runs()
        self.set_interval(REFRESH_S, self.refresh_runs)

    # --- runs ------------------------------------------------------------------------------

    @work(exclusive=True, group="runs")
    async def refresh_runs(self) -> None:
        try:
            rows = await self.backend.runs()
        except ThinkloopError:
            return  # the banner says why; the table keeps what it had
        table = self.query_one("#runs-table", DataTable)
        keep = self._cursor_key(table)
        self.rows = {r.id: r for r in rows}
        table.clear()
        for r in rows:
            table.add_row(*run_cells(r, self.size.width), key=r.id)
        if keep in self.rows:
            table.move_cursor(row=table.get_row_index(keep))

    @staticmethod
    def _cursor_key(table: DataTable[str]) -> str | None:
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return str(key) if key is not None else None

    def _current(self) -> str | None:
        tab = self.query_one(TabbedContent).active
        if tab == "runs":
            return self._cursor_key(self.query_one("#runs-table", DataTable)) or self.selected
        return self.selected or self._cursor_key(self.query_one("#runs-table", DataTable))

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        self.query_one(f"#{tab}-table", DataTable).focus()
        if tab == "sessions":
            self.load_sessions()

    @on(DataTable.RowSelected, "#runs-table")
    def run_selected(self, event: DataTable.RowSelected) -> None:
        self.open(str(event.row_key.value))

    def action_open(self) -> None:
        run_id = self._current()
        if run_id is not None:
            self.open(run_id)

    def open(self, run_id: str) -> None:
        self.selected = run_id
        self.waiting.clear()
        self.query_one("#run-log", RichLog).clear()
        self.query_one(TabbedContent).active = "run"
        self.query_one("#run-log", RichLog).focus()
        self.follow(run_id)

    @work(exclusive=True, group="follow")
    async def follow(self, run_id: str) -> None:
        head = self.query_one("#run-head", Static)
        log = self.query_one("#run-log", RichLog)
        row = self.rows.get(run_id)
        head.update(Text(f"run {run_id}  {row.agent if row else ''}  "
                         f"session {row.session if row and row.session else '-'}"))
        try:
            async for _, event in self.backend.follow(run_id):
                line = self.line(event)
                if line is not None:
                    log.write(line)
        except ThinkloopError as exc:
            log.write(Text(f"error: {exc}"))
        log.write(Text("— end of the run's events", style="italic"))

    def line(self, event: Event) -> Text | None:
        match event:
            case RunStarted(task=task, model=model):
                return Text.assemble(("started ", "bold"), f"{model}: {short(task, 200)}")
            case LlmResponse(purpose=None, step=step, text=text, usage=usage):
                return Text.assemble((f"step {step + 1} ", "bold"),
                                     f"{usage.get('input_tokens', 0)}/"
                                     f"{usage.get('output_tokens', 0)} tokens  ",
                                     short(text, 300))
            case ToolCalled(name=name, arguments=arguments):
                return Text.assemble(("  call ", "bold"), call_text(name, arguments))
            case ToolReturned(name=name, is_error=err, content=content):
                return Text.assemble((f"  {'error' if err else 'result'} ", "italic"),
                                     f"{name}: {short(content, 300)}")
            case ApprovalRequested(id=call_id, tool=tool, arguments=arguments):
                self.waiting[call_id] = event
                return Text.assemble(("  waits for approval (y / n) ", "bold reverse"),
                                     call_text(tool, arguments))
            case ApprovalDecided(id=call_id, approved=ok, source=source):
                self.waiting.pop(call_id, None)
                return Text(f"  {'approved' if ok else 'denied'} ({source})", style="bold")
            case InputRequested(question=question):
                return Text(f"  asks: {question} (answer it in the chat)", style="bold")
            case RunCompleted(status=status, output=output):
                return Text.assemble((f"{status} ", "bold"), short(output, 500))
            case RunFailed(error=error):
                return Text(f"failed: {error}", style="bold")
            case RunCancelled():
                return Text("cancelled", style="bold")
        return None

    async def action_decide(self, approved: bool) -> None:
        if self.selected is None or not self.waiting:
            self.notify("the open run waits on no approval")
            return
        call_id = next(iter(self.waiting))
        try:
            await self.backend.answer(self.selected, call_id, approved=approved)
        except ThinkloopError as exc:
            self.notify(str(exc), severity="error")

    async def action_abort(self) -> None:
        run_id = self._current()
        if run_id is None:
            return
        try:
            await self.backend.abort(run_id)
            self.notify(f"run {run_id[:8]} aborted")
        except ThinkloopError as exc:
            self.notify(str(exc), severity="error")

    # --- sessions --------------------------------------------------------------------------

    @work(exclusive=True, group="sessions")
    async def load_sessions(self) -> None:
        table = self.query_one("#sessions-table", DataTable)
        try:
            sessions = await self.backend.sessions()
        except ThinkloopError as exc:
            self.notify(str(exc), severity="error")
            return
        table.clear()
        for s in sessions:
            table.add_row(Text(s.id), str(s.messages), when(s.updated_at), key=s.id)

    @on(DataTable.RowSelected, "#sessions-table")
    @work(exclusive=True, group="messages")
    async def session_selected(self, event: DataTable.RowSelected) -> None:
        log = self.query_one("#messages", RichLog)
        log.clear()
        try:
            messages = await self.backend.messages(str(event.row_key.value))
        except ThinkloopError as exc:
            log.write(Text(f"error: {exc}"))
            return
        for m in messages:
            calls = "".join(f"\n  -> {c}" for c in m.tool_calls)
            log.write(Text.assemble((f"{m.role}: ", "bold"), m.content + calls))

    # --- memory and traces -----------------------------------------------------------------

    def action_memory(self) -> None:
        self.query_one(TabbedContent).active = "memory"
        self.query_one("#memory-table", DataTable).focus()
        self.load_memory(self._current())

    def action_filter(self) -> None:
        self.only_run = not self.only_run
        self.action_memory()

    @work(exclusive=True, group="memory")
    async def load_memory(self, run_id: str | None) -> None:
        head = self.query_one("#memory-head", Static)
        table = self.query_one("#memory-table", DataTable)
        try:
            rows = await self.backend.memory(run_id, self.only_run and run_id is not None)
        except ThinkloopError as exc:
            head.update(Text(f"error: {exc}"))
            return
        scope = (f"written by run {run_id[:8]}" if run_id and self.only_run
                 else "all of the run's user" if run_id else "this user")
        owner = rows[0].owner if rows else "-"
        head.update(Text(f"memory of {owner}: {len(rows)} rows, {scope}  (f: filter by run)"))
        table.clear()
        for m in rows:
            table.add_row(m.kind, Text(short(m.key, 20)), Text(short(m.content, 60)),
                          when(m.created_at), key=str(m.id))

    def action_trace(self) -> None:
        run_id = self._current()
        if run_id is not None:
            self.query_one(TabbedContent).active = "trace"
            self.load_trace(run_id)

    @work(exclusive=True, group="trace")
    async def load_trace(self, run_id: str) -> None:
        tree = self.query_one("#trace-tree", Tree)
        try:
            spans = await self.backend.trace(run_id)
        except ThinkloopError as exc:
            tree.reset(Text(f"trace of {run_id[:8]}: {exc}"))
            return
        span_tree(tree, run_id, spans)
        tree.focus()


def when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%m-%d %H:%M:%S")
