"""``thinkloop worker`` runs on uvloop when it is installed (as the gateway's uvicorn does
with ``loop="auto"``), on asyncio's own loop when it is not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.workers.conftest import PG_DSN, REDIS_URL, SRC

# The worker command as a user runs it, its serve_worker replaced by one that says which
# loop runs it (nothing connects: the command's own checks need only the settings).
PROGRAM = """
import asyncio, sys
if sys.argv.pop(1) == "without":
    sys.modules["uvloop"] = None  # not installed
import thinkloop.workers.worker as w

async def serve_worker(*args):
    print("loop:", type(asyncio.get_running_loop()).__module__)

w.serve_worker = serve_worker
from thinkloop.cli.app import main
main()
"""


def _worker_loop(uvloop: str, home: Path) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("THINKLOOP_")}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, uvloop, "worker"],
        env={**clean, "PYTHONPATH": str(SRC), "THINKLOOP_HOME": str(home),
             "THINKLOOP_DATABASE_URL": PG_DSN, "THINKLOOP_QUEUE_URL": REDIS_URL},
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return next(line for line in done.stdout.splitlines() if line.startswith("loop:"))


def test_the_worker_runs_on_uvloop_when_it_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("uvloop")
    assert _worker_loop("with", tmp_path) == "loop: uvloop"


def test_without_uvloop_the_worker_runs_on_asyncio(tmp_path: Path) -> None:
    assert _worker_loop("without", tmp_path).startswith("loop: asyncio")
