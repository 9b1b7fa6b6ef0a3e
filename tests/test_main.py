"""``python -m thinkloop`` is the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import thinkloop


def test_python_m_thinkloop_runs_the_cli() -> None:
    done = subprocess.run([sys.executable, "-m", "thinkloop", "--help"], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "Usage: python -m thinkloop" in done.stdout
    for command in ("run", "sessions", "runs", "serve"):
        assert command in done.stdout


def test_python_m_thinkloop_reports_errors_like_the_command() -> None:
    done = subprocess.run([sys.executable, "-m", "thinkloop", "run", "hi", "--model", "nope:x"],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "error: unknown model provider 'nope'" in done.stderr


def test_the_package_is_typed() -> None:
    assert (Path(thinkloop.__file__).parent / "py.typed").is_file()
