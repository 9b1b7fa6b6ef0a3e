"""A tool an installed package registers (entry point group ``thinkloop.tools``) is there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from thinkloop.testing.openai_server import OpenAIServer

from .conftest import calls, say

CLI = [sys.executable, "-c", "from thinkloop.cli.app import main; main()"]
PLUGIN = '''
def weather(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: the city name
    """
    return f"{city}: 4 C, light snow"
'''


@pytest.fixture
def installed_plugin(tmp_path: Path) -> dict[str, str]:
    """A distribution on the import path, as pip would leave it."""
    site = tmp_path / "site"
    (site / "weatherplug").mkdir(parents=True)
    (site / "weatherplug" / "__init__.py").write_text(PLUGIN)
    info = site / "weatherplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: weatherplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[thinkloop.tools]\nweather = weatherplug:weather\n")
    return {**os.environ, "PYTHONPATH": str(site)}


def test_thinkloop_tools_lists_an_installed_plugin_tool(installed_plugin: dict[str, str]) -> None:
    done = subprocess.run([*CLI, "tools", "--json"], capture_output=True, text=True,
                          env=installed_plugin, timeout=120)
    listed = {t["name"]: t for t in orjson.loads(done.stdout)}
    assert listed["weather"]["description"] == "Today's weather in a city."
    assert listed["weather"]["needs"] == "installed plugin (thinkloop.tools)"


def test_a_run_calls_the_plugin_tool(llm: OpenAIServer, installed_plugin: dict[str, str]) -> None:
    llm.enqueue(calls(("weather", {"city": "Oslo"})), say("Oslo: 4 C with light snow."))
    done = subprocess.run([*CLI, "run", "What is the weather in Oslo?", "--tools", "none",
                           "--json"], capture_output=True, text=True, env=installed_plugin,
                          timeout=120, stdin=subprocess.DEVNULL)
    result = orjson.loads(done.stdout)
    assert result["status"] == "completed", done.stderr
    assert result["steps"][0]["results"][0]["content"] == "Oslo: 4 C, light snow"
    assert [t["function"]["name"] for t in llm.requests[0]["tools"]] == ["weather"]


def test_a_broken_plugin_is_skipped_and_thinkloop_tools_names_it(
    installed_plugin: dict[str, str],
) -> None:
    site = Path(installed_plugin["PYTHONPATH"])
    (site / "weatherplug-0.1.dist-info" / "entry_points.txt").write_text(
        "[thinkloop.tools]\nweather = weatherplug:weather\ngone = weatherplug:missing\n"
        "[thinkloop.hooks]\naudit = weatherplug:nothing_here\n")
    done = subprocess.run([*CLI, "tools", "--json"], capture_output=True, text=True,
                          env=installed_plugin, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "weather" in {t["name"] for t in orjson.loads(done.stdout)}
    assert "plugin gone (thinkloop.tools) failed to load and is skipped" in done.stderr
    assert "plugin audit (thinkloop.hooks) failed to load and is skipped" in done.stderr
