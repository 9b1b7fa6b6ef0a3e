"""tune_gc: opt-in collector tuning for processes hosting many runs (issue 19)."""

from __future__ import annotations

import gc
import subprocess
import sys

from thinkloop.tuning import tune_gc


def test_tune_gc_freezes_start_up_objects_and_returns_the_old_thresholds() -> None:
    before = gc.get_threshold()
    try:
        assert tune_gc(12_345) == before
        assert gc.get_threshold() == (12_345, before[1], before[2])
        assert gc.get_freeze_count() > 1000  # the imported modules, classes and functions
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_importing_thinkloop_leaves_the_collector_alone() -> None:
    code = ("import gc; before = gc.get_threshold(); "
            "import thinkloop.tuning, thinkloop.agent; "
            "print(gc.get_threshold() == before, gc.get_freeze_count())")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.split() == ["True", "0"]
