"""In process, the operator screen sees what ``thinkloop run`` does in another process on the
same store: its run listed, followed from its audit log to its end, and aborted."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from tests.tui.conftest import running, shot, until
from textual.widgets import RichLog

from thinkloop.settings import load_settings
from thinkloop.store.open import open_store
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion
from thinkloop.tui.app import ThinkloopApp
from thinkloop.tui.local import LocalBackend


def run_elsewhere(task: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "THINKLOOP_MODEL"}
    return subprocess.Popen(
        [sys.executable, "-c", "from thinkloop.cli.app import main; main()", "run", task,
         "--model", "openai:fake", "--tools", "calculator"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def rows(app: ThinkloopApp) -> dict[str, str]:
    return {r.task: r.status for r in app.screen.rows.values()}  # type: ignore[attr-defined]


async def test_a_run_of_another_process_followed_then_one_aborted(
        model: OpenAIServer, tmp_path: Path) -> None:
    model.enqueue(Reply(body=completion(tool_calls=[("calculator", {"expression": "2+2"})]),
                        delay_s=1.0),
                  Reply(body=completion("2+2 is 4."), delay_s=0.5),
                  Reply(body=completion("too late"), delay_s=20))
    settings = load_settings()
    app = ThinkloopApp(LocalBackend(settings, open_store(settings=settings)), start="operator")
    first = run_elsewhere("What is 2+2?")
    try:
        async with running(app) as pilot:
            await until(pilot, lambda: rows(app).get("What is 2+2?") == "running", 30)
            await pilot.press("enter")
            log = app.screen.query_one("#run-log", RichLog)
            await until(pilot, lambda: any("end of the run's events" in line.text
                                           for line in log.lines), 30)
            text = "\n".join(line.text for line in log.lines)
            assert 'call calculator({"expression":"2+2"})' in text
            assert "result calculator: 4" in text and "completed 2+2 is 4." in text
            assert await asyncio.to_thread(first.wait, 30) == 0
            assert first.stdout is not None and first.stdout.read().strip() == "2+2 is 4."

            second = run_elsewhere("Take a long time")
            await until(pilot, lambda: rows(app).get("Take a long time") == "running", 30)
            await pilot.press("r", "up", "x")  # the newest run: the top row, above the first
            # Its own process stopped it (cancelled), on the request through the store.
            assert await asyncio.to_thread(second.wait, 30) == 130
            await until(pilot, lambda: rows(app).get("Take a long time") == "cancelled", 10)
            assert "cancelled" in shot(app, tmp_path, "other-process")
    finally:
        for proc in (first, locals().get("second")):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc is not None:
                proc.stdout.close()
                proc.stderr.close()
