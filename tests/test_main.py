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


def test_help_loads_neither_rich_nor_the_engine() -> None:
    # Issue 19: `thinkloop --help` starts quickly because these load with a command's first
    # output or its work, never with the help (benchmarks/startup.py times it).
    code = ("import sys; sys.argv = ['thinkloop', '--help']\n"
            "from thinkloop.cli.app import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = ['rich', 'asyncio', 'pydantic', 'thinkloop.store', 'thinkloop.events',\n"
            "         'thinkloop.settings']\n"
            "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert "Commands:" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr
