"""``thinkloop config``: the effective settings and their sources, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from thinkloop.cli.app import app
from thinkloop.settings import env_names

runner = CliRunner()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for names in env_names().values():
        for name in names:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("THINKLOOP_HOME", str(tmp_path / "home"))
    (tmp_path / "thinkloop.toml").write_text(
        'model = "ollama:llama3.2"\ntimeout_s = 30\n[tools]\nshell_timeout_s = 5\n')
    return tmp_path


def test_config_json_names_each_source_and_masks_keys(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THINKLOOP_TIMEOUT_S", "45")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value-12345678")
    r = runner.invoke(app, ["config", "--json", "--set", "tools.shell_timeout_s=7"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["model"] == {"value": "ollama:llama3.2", "source": "thinkloop.toml"}
    assert out["timeout_s"] == {"value": 45.0, "source": "environment"}
    assert out["tools.shell_timeout_s"] == {"value": 7.0, "source": "argument"}
    assert out["tool_timeout_s"] == {"value": 60.0, "source": "default"}
    assert out["home"] == {"value": str(project / "home"), "source": "environment"}
    assert out["tools.workspace"]["value"] == str(project / "home" / "workspaces" / "thinkloop")
    assert out["models.openai_api_key"] == {"value": "****5678", "source": "environment"}
    assert "sk-secret" not in r.stdout


def test_config_table_and_errors(project: Path) -> None:
    r = runner.invoke(app, ["config"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:4]]
            for line in r.stdout.splitlines() if line.count("│") >= 4}
    assert rows["model"] == ["ollama:llama3.2", "thinkloop.toml"]
    assert rows["tools.shell_timeout_s"] == ["5.0", "thinkloop.toml"]
    assert rows["protocol"] == ["auto", "default"]
    bad = runner.invoke(app, ["config", "--set", "timeout_s"])
    assert bad.exit_code != 0 and "NAME=VALUE" in str(bad.exception)
