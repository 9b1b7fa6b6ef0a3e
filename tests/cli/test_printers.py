"""What `thinkloop run` shows on stderr while a run works: waits that say how long they
last, a model's own cut of its input, the local model's load."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from thinkloop.cli.printers import SLOW_S, Elapsed, EventPrinter, load_local
from thinkloop.core.events import (
    ApprovalRequested,
    LlmRequest,
    ModelInputCut,
    RunCompleted,
    ToolCalled,
    ToolReturned,
)
from thinkloop.models.local import LocalModel
from thinkloop.models.wrappers import OverflowRecovery


def _piped() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=400), out


def _terminal() -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=120)


def test_a_wait_shows_its_seconds_once_it_is_slow() -> None:
    now = [100.0]
    label = Elapsed("step 1 calculator running...", clock=lambda: now[0])
    assert label.__rich__().plain == "step 1 calculator running..."
    now[0] += SLOW_S - 0.5
    assert label.__rich__().plain == "step 1 calculator running..."
    now[0] += 1.6
    assert label.__rich__().plain == "step 1 calculator running... 3s"


def test_a_running_tool_has_a_spinner_until_it_returns_or_a_person_is_asked() -> None:
    printer = EventPrinter(_terminal())
    printer(LlmRequest("r", 0, 2, ["shell"]))
    assert printer._status is not None and "model is working" in printer._label.markup
    printer(ToolCalled("r", 0, "c1", "shell", {"command": "sleep 5"}))
    assert printer._status is not None and "shell running" in printer._label.markup
    printer(ApprovalRequested("r", 0, "shell", "c1", {"command": "sleep 5"}, "asks"))
    assert printer._status is None  # the approval prompt is not drawn over
    printer(ToolReturned("r", 0, "c1", "shell", False, "done", 5.0))
    assert printer._status is None
    printer(ToolCalled("r", 1, "c2", "ask_human", {"question": "Which colour?"}))
    assert printer._status is None  # its question is asked on this terminal


def test_a_slow_tool_result_says_how_long_it_took() -> None:
    console, out = _piped()
    printer = EventPrinter(console)
    printer(ToolCalled("r", 0, "c1", "shell", {"command": "sleep 5"}))
    printer(ToolReturned("r", 0, "c1", "shell", False, "done", 5.04))
    printer(ToolCalled("r", 1, "c2", "calculator", {"expression": "1+1"}))
    printer(ToolReturned("r", 1, "c2", "calculator", False, "2", 0.01))
    lines = out.getvalue().splitlines()
    assert lines[1] == "  -> (5.0s) done" and lines[3] == "  -> 2"


def test_the_models_own_cut_is_said_once_a_run() -> None:
    console, out = _piped()
    printer = EventPrinter(console)
    for step, chars in enumerate((187_500, 187_900, 190_000)):
        printer(ModelInputCut("r", step, "local", 4096, chars))
    assert out.getvalue().splitlines() == [
        "note: the model's context window (4,096 tokens) could not hold the whole request: "
        "187,500 characters were left out of the middle of its longest messages (a note there "
        "tells it so)"]


class _Unloaded(LocalModel):
    loads = 0

    def load(self) -> None:
        self.loads += 1


async def test_the_local_model_load_says_what_loads(tmp_path: Path) -> None:
    weights = tmp_path / "Tiny-1M.Q4.gguf"
    weights.write_bytes(b"\0" * 3_000_000)
    local = _Unloaded(weights)
    console, out = _piped()
    await load_local(SimpleNamespace(model=OverflowRecovery(local)), console)  # type: ignore[arg-type]
    assert out.getvalue() == "loading the local model (Tiny-1M.Q4.gguf, 3 MB)…\n"
    assert local.loads == 1


async def test_a_model_that_is_not_local_loads_nothing_and_says_nothing() -> None:
    from thinkloop import ScriptedModel

    console, out = _piped()
    await load_local(SimpleNamespace(model=ScriptedModel(["hi"])), console)  # type: ignore[arg-type]
    assert out.getvalue() == ""


def test_the_runs_usage_line_counts_its_calls_in_words() -> None:
    console, out = _piped()
    printer = EventPrinter(console)
    for n in (1, 2):
        printer(RunCompleted("r", 1, "completed", "84", None, False,
                             {"requests": n, "input_tokens": 629, "output_tokens": 6}))
    assert out.getvalue().splitlines() == ["1 model call, 629 in / 6 out tokens",
                                           "2 model calls, 629 in / 6 out tokens"]
