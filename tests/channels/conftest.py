"""The channels' tests: a real Bot API stand-in (tests/channels/telegram_api.py) driven by
python-telegram-bot, the loopback OpenAI-compatible server as the model, a SQLite store."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from thinkloop.testing.openai_server import OpenAIServer

MISSING = [m for m in ("telegram", "aiolimiter", "aiohttp", "yaml")
           if importlib.util.find_spec(m) is None]
collect_ignore_glob = ["test_*.py"] if MISSING else []

AGENTS = """
agents:
  default:
    model: openai:fake
    tools: [calculator, send_message, ask_human, read_file]
    memory: false
    max_steps: 8
  shell:
    model: openai:fake
    tools: [shell, calculator, send_message]
    memory: false
    max_steps: 6
"""


async def until(predicate: Any, timeout_s: float = 15.0, what: Any = None) -> None:
    """Wait until ``predicate()`` holds; fail naming ``what()`` (what was seen) if it never does."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen in time; seen: {what() if what else '-'}")
        await asyncio.sleep(0.02)


@pytest.fixture(scope="module")
def model() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "agents.yaml").write_text(AGENTS)
    return tmp_path


def env_for(model: OpenAIServer, home: Path, **channel: Any) -> dict[str, str]:
    """The environment a user sets: the model endpoint and THINKLOOP_CHANNELS_TELEGRAM_*."""
    env = {"OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "sk-test",
           "THINKLOOP_HOME": str(home), "THINKLOOP_TOOLS_SANDBOX": "none"}
    # Nobody may talk to an agent until allowed: these tests allow everyone unless they test
    # the allow list itself.
    for platform in ("TELEGRAM", "EMAIL", "SLACK", "DISCORD"):
        env[f"THINKLOOP_CHANNELS_{platform}_ALLOW_USERS"] = '["*"]'
    for key, value in channel.items():
        raw = value if isinstance(value, str) else json.dumps(value)
        env[f"THINKLOOP_CHANNELS_TELEGRAM_{key.upper()}"] = raw
    return env


@pytest.fixture
async def store(home: Path) -> AsyncIterator[Any]:
    from thinkloop.store.sqlite import SQLiteStore

    db = SQLiteStore(home / "thinkloop.db")
    try:
        yield db
    finally:
        await db.aclose()
