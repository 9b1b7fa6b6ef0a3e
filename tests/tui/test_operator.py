"""The operator screen on live runs, in process and through a real gateway: a run followed
to its end, approvals and an abort from the keyboard, sessions, memory filtered by run, a
trace; and the help screen."""

from __future__ import annotations

from pathlib import Path

from tests.tui.conftest import MakeApp, running, shot, until
from textual.widgets import DataTable, RichLog, TabbedContent, Tree

from thinkloop.testing.openai_server import OpenAIServer, Reply, completion


def calc(expr: str, delay_s: float = 0.0) -> Reply:
    return Reply(body=completion(tool_calls=[("calculator", {"expression": expr})]),
                 delay_s=delay_s)


def log_text(app: object) -> str:
    log = app.screen.query_one("#run-log", RichLog)  # type: ignore[attr-defined]
    return "\n".join(line.text for line in log.lines)


def row(app: object, run_id: str) -> list[object]:
    table = app.screen.query_one("#runs-table", DataTable)  # type: ignore[attr-defined]
    return table.get_row(run_id) if run_id in {k.value for k in table.rows} else []


async def test_a_run_followed_to_its_end_then_its_trace(
        make_app: MakeApp, model: OpenAIServer, tmp_path: Path) -> None:
    model.enqueue(calc("1+1", 0.4), calc("2+2", 0.4), calc("3+3", 0.4),
                  Reply(body=completion("Done: 2, 4, 6."), delay_s=0.4))
    app = make_app(agent="helper", start="operator")
    async with running(app) as pilot:
        run_id = await app.backend.start("helper", "Add three times", "ops")
        await until(pilot, lambda: bool(row(app, run_id)))
        assert row(app, run_id)[1] == "running"
        text = shot(app, tmp_path, "operator-runs")
        assert run_id[:8] in text and "running" in text and "Add three times" in text
        await pilot.press("enter")
        assert app.screen.query_one(TabbedContent).active == "run"
        await until(pilot, lambda: "end of the run's events" in log_text(app))
        log = log_text(app)
        assert 'call calculator({"expression":"1+1"})' in log
        assert "result calculator: 6" in log and "completed Done: 2, 4, 6." in log
        assert "step 4" in log
        text = shot(app, tmp_path, "operator-run")
        assert "completed Done: 2, 4, 6." in text
        # The table caught up with the end: steps, tokens (10 in / 5 out per reply), cost.
        await until(pilot, lambda: row(app, run_id)[1] == "completed")
        assert row(app, run_id)[3] == "4" and row(app, run_id)[4] == "40/20"

        await pilot.press("t")
        tree = app.screen.query_one("#trace-tree", Tree)
        await until(pilot, lambda: "trace of run" in str(tree.root.label))
        names = [str(n.label) for n in _nodes(tree.root)]
        assert any(n.startswith("invoke_agent helper") for n in names)
        assert sum(n.startswith("chat ") for n in names) == 4
        assert sum(n.startswith("execute_tool calculator") for n in names) == 3
        assert any("10/5 tokens" in n for n in names)
        text = shot(app, tmp_path, "operator-trace")
        assert "invoke_agent helper" in text and "execute_tool calculator" in text


def _nodes(node: object) -> list[object]:
    out = []
    for child in node.children:  # type: ignore[attr-defined]
        out += [child, *_nodes(child)]
    return out


async def test_approve_deny_and_abort_from_the_keyboard(
        make_app: MakeApp, model: OpenAIServer, tmp_path: Path) -> None:
    model.enqueue(calc("5*5"), Reply(body=completion("25.")),
                  calc("6*6"), Reply(body=completion("Not allowed.")),
                  Reply(body=completion("never"), delay_s=10))
    app = make_app(agent="careful", start="operator")
    async with running(app) as pilot:
        first = await app.backend.start("careful", "5*5?", None)
        await until(pilot, lambda: bool(row(app, first)))
        await pilot.press("enter")
        await until(pilot, lambda: "waits for approval" in log_text(app))
        assert "waits for approval" in shot(app, tmp_path, "operator-approval")
        await pilot.press("y")
        await until(pilot, lambda: "end of the run's events" in log_text(app))
        assert "approved" in log_text(app) and "completed 25." in log_text(app)

        second = await app.backend.start("careful", "6*6?", None)
        await pilot.press("r")
        await until(pilot, lambda: bool(row(app, second)))
        table = app.screen.query_one("#runs-table", DataTable)
        assert table.has_focus  # r: the runs, the cursor still on the run it was on
        await pilot.press("up", "enter")  # the newest run is the top row
        assert app.screen.selected == second
        await until(pilot, lambda: "waits for approval" in log_text(app))
        await pilot.press("n")
        await until(pilot, lambda: "end of the run's events" in log_text(app))
        assert "denied" in log_text(app) and "completed Not allowed." in log_text(app)

        third = await app.backend.start("helper", "slow one", None)
        await pilot.press("r")
        await until(pilot, lambda: bool(row(app, third)))
        await pilot.press("up", "enter")
        assert app.screen.selected == third
        await until(pilot, lambda: "started" in log_text(app))
        await pilot.press("x")
        await until(pilot, lambda: "end of the run's events" in log_text(app))
        assert "cancelled" in log_text(app)
        await until(pilot, lambda: row(app, third)[1] == "cancelled")


async def test_sessions_and_memory_filtered_by_run(
        make_app: MakeApp, model: OpenAIServer, tmp_path: Path) -> None:
    app = make_app(agent="noter", start="operator")
    async with running(app) as pilot:
        runs = []
        for key, value in (("colour", "blue"), ("pet", "a cat named Tom")):
            model.enqueue(Reply(body=completion(tool_calls=[
                ("remember", {"key": key, "content": value})])),
                Reply(body=completion(f"I saved your {key} as {value!r} under {key!r}.")))
            run_id = await app.backend.start("noter", f"Remember my {key}", "notes")
            # The first remember loads the local embedding model (the recall extra): slow.
            await until(pilot, lambda r=run_id: bool(row(app, r)) and row(app, r)[1]
                        == "completed", timeout_s=90)
            await pilot.pause(0.3)  # the run's post-turn memory jobs
            runs.append(run_id)
        table = app.screen.query_one("#runs-table", DataTable)
        table.move_cursor(row=table.get_row_index(runs[1]))
        await pilot.press("m")
        memory = app.screen.query_one("#memory-table", DataTable)
        await until(pilot, lambda: memory.row_count > 0)
        keys = [str(memory.get_row_at(i)[1]) for i in range(memory.row_count)]
        assert "pet" in keys and "colour" not in keys
        text = shot(app, tmp_path, "operator-memory")
        assert f"written by run {runs[1][:8]}" in text and "a cat named Tom" in text
        await pilot.press("f")  # all of the user's memory
        await until(pilot, lambda: memory.row_count >= 2 and "colour" in {
            str(memory.get_row_at(i)[1]) for i in range(memory.row_count)})
        assert "all of the run's user" in shot(app, tmp_path, "operator-memory-all")

        await pilot.press("s")
        sessions = app.screen.query_one("#sessions-table", DataTable)
        await until(pilot, lambda: sessions.row_count > 0)
        sessions.move_cursor(row=0)
        sessions.focus()
        await pilot.press("enter")
        messages = app.screen.query_one("#messages", RichLog)
        await until(pilot, lambda: len(messages.lines) > 3)
        text = shot(app, tmp_path, "operator-sessions")
        assert "notes" in text and "user: Remember my colour" in text


async def test_the_help_screen_lists_every_key(make_app: MakeApp, model: OpenAIServer,
                                               tmp_path: Path) -> None:
    app = make_app(agent="helper")
    async with running(app) as pilot:
        await pilot.press("f1")
        text = shot(app, tmp_path, "help")
        for key in ("F1", "F2", "F3", "Ctrl-Q", "Ctrl-C", "y / a / n", "Enter", "PgUp", "Esc",
                    "/model", "/tools", "/session", "/clear", "r, Enter", "y / n", " x ",
                    " s ", "m / f", " t ", "Tab"):
            assert key in text, key
        await pilot.press("escape")
        await pilot.press("f3")
        assert app.screen.name == "operator"
        await pilot.press("f2")
        assert app.screen.name == "chat"


async def test_the_runs_take_the_room_a_larger_terminal_gives(
        make_app: MakeApp, model: OpenAIServer, tmp_path: Path) -> None:
    task = "Summarise the quarterly figures for the northern region and flag every outlier"
    model.enqueue(Reply(body=completion("Nothing stands out in the northern figures.")))
    run_id = ""
    for size, whole in (((140, 40), True), ((80, 24), False)):  # the same run, twice
        app = make_app(agent="helper", start="operator")
        async with running(app, size) as pilot:
            if whole:
                run_id = await app.backend.start("helper", task, None)
            await until(pilot, lambda a=app, r=run_id: row(a, r) and row(a, r)[1]
                        == "completed")
            text = shot(app, tmp_path, f"runs-{size[0]}")
            assert (task in text) is whole and "Summarise the" in text
