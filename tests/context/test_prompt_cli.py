"""``thinkloop prompt``: the sections a run would send, with sizes, and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from thinkloop.cli.prompt import prompt
from thinkloop.context.tokens import heuristic_count


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> typer.Typer:
    monkeypatch.setenv("THINKLOOP_HOME", str(tmp_path))
    monkeypatch.setenv("THINKLOOP_MODEL", "openai:gpt-4o-mini")
    cli = typer.Typer()
    cli.command("prompt")(prompt)
    cli.command("other")(lambda: None)  # two commands, so "prompt" is a subcommand
    return cli


def test_json_lists_sections_with_token_sizes(app: typer.Typer, tmp_path: Path) -> None:
    (tmp_path / "agents" / "scout").mkdir(parents=True)
    (tmp_path / "agents" / "scout" / "MISSION.md").write_text("Find bargains.")
    result = CliRunner().invoke(app, ["prompt", "--agent", "scout", "--user", "bo", "--json"])
    assert result.exit_code == 0, result.output
    sections = json.loads(result.stdout)
    names = [s["name"] for s in sections]
    # tool_guidance: how to use ask_human (the CLI's default tools include it); safety: the
    # browser and web tools bring outside content into the run; sandbox: the shell's limits.
    assert names == ["identity", "first_run", "tool_guidance", "safety", "sandbox",
                     "user_identity", "current_time", "runtime", "tools (sent natively)"]
    assert all(s["tokens"] == heuristic_count(s["text"]) for s in sections)
    assert "Find bargains." in sections[0]["text"] and "- Name: scout" in sections[0]["text"]
    assert "at most 256 processes" in sections[4]["text"]
    assert sections[7]["text"] == "Runtime: agent=scout model=openai:gpt-4o-mini mode=full"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["MISSION.md", "agents", "scout"]


def test_minimal_mode_and_rich_output(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["prompt", "--mode", "minimal", "--no-tools"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for name in ("identity", "current_time", "runtime"):
        assert f"{name} (" in out and " tokens)" in out
    assert "first_run" not in out and "mode=minimal" in out and "total" in out


def test_bad_mode_is_rejected(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["prompt", "--mode", "tiny"])
    assert result.exit_code == 2
