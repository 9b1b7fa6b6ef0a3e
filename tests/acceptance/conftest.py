"""Acceptance: realistic tasks with every default on, against the loopback OpenAI server.

The server is scripted like a competent model: new arguments each step, sometimes a repeat,
sometimes a malformed call. Agents are built as a user builds them (``Agent("compat:...")``,
or the ``thinkloop`` CLI), with the model found through ``THINKLOOP_BASE_URL``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import pytest_asyncio
from tests.store.conftest import fresh_store_url

from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

MODEL = "compat:competent"


@pytest.fixture(scope="session")
def _server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
def llm(_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> Iterator[OpenAIServer]:
    """The scripted model, reached the way a user reaches one: through the environment."""
    _server.clear()
    monkeypatch.setenv("THINKLOOP_BASE_URL", _server.base_url)
    monkeypatch.setenv("THINKLOOP_MODEL", MODEL)
    monkeypatch.setenv("THINKLOOP_TOOLS_WORKSPACE", str(tmp_path / "workspace"))
    yield _server
    _server.clear()


def calls(*named: tuple[str, dict[str, Any]], text: str | None = None) -> Reply:
    """A native reply that calls these tools."""
    return Reply(body=completion(text, tool_calls=list(named)))


def say(text: str) -> Reply:
    return Reply(body=completion(text))


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or ()]


def run_python(code: str, *, env: dict[str, str] | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (a user's script), with this process's environment."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def loads(line: str) -> Any:
    return orjson.loads(line)


@pytest_asyncio.fixture(loop_scope="function", params=["sqlite", "postgres"])
async def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A durable store shared by several agents or processes: SQLite, then PostgreSQL."""
    async with fresh_store_url(request.param, tmp_path / "shared.db") as url:
        yield url
