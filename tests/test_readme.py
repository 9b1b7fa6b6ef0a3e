"""The README and the docs run as written: every Python example is a complete program, run
here offline.

Each ```python block is written to a file and run in a fresh interpreter against the loopback
OpenAI-compatible server (``openai:...`` models reach it through ``OPENAI_BASE_URL``) with an
isolated home and workspace, so no example can rot or reach the network. The environment
variable table is checked against the settings classes, and the exit-code table against the
CLI.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from thinkloop.settings import env_names
from thinkloop.testing.openai_server import OpenAIServer

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
CLI_PAGE = ROOT / "docs" / "cli.md"  # the settings and exit-code tables
_BLOCK = re.compile(r"^( *)```python\n(.*?)^\1```", re.S | re.M)


def examples() -> list[str]:
    """Every ```python block of the README and the docs (list items' indented ones too),
    dedented."""
    return [textwrap.dedent(code) for page in PAGES
            for _, code in _BLOCK.findall(page.read_text())]


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(record=False) as srv:
        yield srv


def test_there_are_examples_and_each_is_a_complete_program() -> None:
    blocks = examples()
    assert len(blocks) >= 5
    for code in blocks:
        compile(code, "README.md", "exec")  # no top-level await, no fragments
        assert "..." not in code.replace('"..."', ""), code
        assert "import" in code, code


@pytest.mark.parametrize("index", range(len(examples())))
def test_example_runs_offline(index: int, server: OpenAIServer, tmp_path: Path) -> None:
    code = examples()[index]
    script = tmp_path / f"example_{index}.py"
    script.write_text(code)
    drop = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "THINKLOOP_MODEL", "THINKLOOP_DATABASE_URL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(OPENAI_API_KEY="sk-offline", OPENAI_BASE_URL=server.base_url,
               THINKLOOP_HOME=str(tmp_path / "home"),
               THINKLOOP_TOOLS_WORKSPACE=str(tmp_path / "ws"))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{code}\n--- stderr ---\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr


def test_every_setting_is_in_the_environment_table() -> None:
    text = CLI_PAGE.read_text()
    names = [n for names in env_names().values() for n in names]
    rows = "\n".join(line.split("|")[1] for line in text.splitlines() if line.startswith("| `"))
    missing = [n for n in names if f"`{n}`" not in rows]
    assert not missing, f"the environment table (docs/cli.md) lacks {missing}"
