"""Event recording and the CLI as a subprocess, for the judgement tests."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from thinkloop.events import Event


class Recorder:
    """A subscriber that keeps every event of every run it sees."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of(self, type_: str) -> list[dict[str, Any]]:
        return [e.payload for e in self.events if e.type == type_]

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def clear(self) -> None:
        self.events.clear()


def thinkloop_cli(
    *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "THINKLOOP_MODEL",
                         "THINKLOOP_JUDGEMENT")}
    return subprocess.run(
        [sys.executable, "-c", "from thinkloop.cli.app import main; main()", *args],
        capture_output=True, text=True, timeout=60, env={**base, **(env or {})}, input=stdin,
    )


async def run_through(agent: Any, task: str, **kw: Any) -> Any:
    """``agent.run`` that also waits for the post-turn jobs (before a store closes)."""
    handle = agent.start(task, stream_model=False, events=False, **kw)
    result = await handle.result()
    await handle.wait_background()
    return result
