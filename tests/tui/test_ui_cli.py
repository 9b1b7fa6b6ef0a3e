"""``thinkloop ui`` on the command line: its options, and one clear error for a bad one."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_cli import thinkloop


def test_ui_help_names_both_places() -> None:
    proc = thinkloop("ui", "--help")
    assert proc.returncode == 0, proc.stderr
    for option in ("--gateway", "--key", "--agent", "--agents", "--session", "--operator",
                   "--light"):
        assert option in proc.stdout


def test_a_missing_agents_file_is_one_error(tmp_path: Path) -> None:
    proc = thinkloop("ui", "--agents", str(tmp_path / "nope.yaml"))
    assert proc.returncode == 2
    assert "nope.yaml: no such file" in proc.stderr and "Traceback" not in proc.stderr
