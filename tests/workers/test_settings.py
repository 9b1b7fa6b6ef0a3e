"""A queue needs PostgreSQL: with the SQLite store, ``serve --queue`` and ``worker`` stop at
once with one line saying so (nothing else starts)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from thinkloop.errors import ConfigError
from thinkloop.settings import load_settings
from thinkloop.workers.connect import check_store


def _thinkloop(args: list[str], home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("THINKLOOP_")}
    return subprocess.run(
        [sys.executable, "-c", "from thinkloop.cli.app import main; main()", *args],
        env={**clean, "THINKLOOP_HOME": str(home), **env}, capture_output=True, text=True,
        timeout=60)


def test_serve_with_a_queue_and_the_sqlite_store_is_one_clear_error(tmp_path: Path) -> None:
    done = _thinkloop(["serve", "--no-auth", "--port", "0", "--queue",
                       "redis://127.0.0.1:6379/0"], tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: a queue needs the PostgreSQL store (workers on other machines share it): set "
        "THINKLOOP_DATABASE_URL=postgresql://..."]


def test_a_worker_without_a_queue_says_what_to_set(tmp_path: Path) -> None:
    done = _thinkloop(["worker"], tmp_path,
                      THINKLOOP_DATABASE_URL="postgresql://postgres@127.0.0.1:5432/test")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: no queue: set THINKLOOP_QUEUE_URL=redis://HOST:6379/0 or --queue"]


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379", "127.0.0.1:6379"])
def test_the_queue_is_a_redis_url(url: str, tmp_path: Path) -> None:
    settings = load_settings({"queue_url": url, "home": str(tmp_path),
                              "database_url": "postgresql://x@127.0.0.1/test"}, env={})
    with pytest.raises(ConfigError, match="the queue is a redis:// URL"):
        check_store(settings)


def test_settings_read_the_worker_group_from_the_environment(tmp_path: Path) -> None:
    settings = load_settings(env={"THINKLOOP_QUEUE_URL": "redis://q:6379/1",
                                  "THINKLOOP_WORKER_CONCURRENCY": "8",
                                  "THINKLOOP_WORKER_LEASE_S": "5",
                                  "THINKLOOP_HOME": str(tmp_path)})
    assert settings.queue_url == "redis://q:6379/1"
    assert (settings.worker.concurrency, settings.worker.lease_s) == (8, 5.0)
    assert load_settings(env={"THINKLOOP_HOME": str(tmp_path)}).worker.concurrency == 64
