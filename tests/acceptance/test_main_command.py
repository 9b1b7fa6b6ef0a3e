"""The README's main command on the embedded local model, exactly as a new user types it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

CLI = [sys.executable, "-c", "from thinkloop.cli.app import main; main()"]


def test_the_main_command_ends_completed_with_84(smollm2_path: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("THINKLOOP_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    done = subprocess.run([*CLI, "run", "What is 12*7? Use the calculator.", "--json"],
                          capture_output=True, text=True, timeout=600, env=env,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    result = orjson.loads(done.stdout)
    assert result["model"] == "local"
    assert result["status"] == "completed"
    assert "84" in result["text"]
    assert result["usage"]["requests"] <= 3
    calls = [c for s in result["steps"] for c in s["tool_calls"]]
    assert calls and calls[0]["name"] == "calculator"
