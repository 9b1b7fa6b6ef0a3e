"""``thinkloop worker`` leaves nothing for the interpreter's exit collections, as ``serve``
does: once the worker has stopped (runs handed back, stores closed) what is left is frozen."""

from __future__ import annotations

from pathlib import Path

import pytest

import thinkloop.api
import thinkloop.workers.connect
import thinkloop.workers.worker
from thinkloop.cli.serve import worker


@pytest.fixture
def stopped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """What happened, in order: the worker served and stopped, and what was frozen."""
    seen: list[str] = []
    monkeypatch.setenv("THINKLOOP_HOME", str(tmp_path))
    monkeypatch.setenv("THINKLOOP_QUEUE_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setattr(thinkloop.workers.connect, "check_store", lambda settings: None)
    monkeypatch.setattr(thinkloop.api, "freeze_for_exit", lambda: seen.append("frozen"),
                        raising=False)
    return seen


def test_the_worker_freezes_what_is_left_once_it_has_stopped(
    stopped: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def serve_worker(settings: object, agents: object, name: object) -> None:
        stopped.append("served")

    monkeypatch.setattr(thinkloop.workers.worker, "serve_worker", serve_worker)
    worker(name="w1")
    assert stopped == ["served", "frozen"]


def test_a_worker_that_fails_is_frozen_too(
    stopped: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def serve_worker(settings: object, agents: object, name: object) -> None:
        stopped.append("served")
        raise RuntimeError("the queue went away")

    monkeypatch.setattr(thinkloop.workers.worker, "serve_worker", serve_worker)
    with pytest.raises(RuntimeError, match="the queue went away"):
        worker(name="w1")
    assert stopped == ["served", "frozen"]
