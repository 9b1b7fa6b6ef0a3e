"""``thinkloop serve`` as a new user starts it: a real process, the default agent, no keys on
loopback, and the openai client calling it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai

from thinkloop.testing.openai_server import OpenAIServer, Reply, completion


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_no_auth_default_agent_page_and_openai_client(tmp_path: Path) -> None:
    port = free_port()
    with OpenAIServer() as model:
        model.enqueue(Reply(body=completion(tool_calls=[("calculator", {"expression": "12*7"})])),
                      Reply(body=completion("12*7 = 84")))
        env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY",)}
        env.update({"THINKLOOP_HOME": str(tmp_path), "THINKLOOP_MODEL": "openai:fake",
                    "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "sk-test"})
        env.pop("THINKLOOP_DATABASE_URL", None)
        proc = subprocess.Popen(
            [sys.executable, "-c", "from thinkloop.cli.app import main; main()", "serve",
             "--no-auth", "--port", str(port)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(base + "/healthz", timeout=1).json()["status"] == "ok":
                        break
                except httpx.HTTPError:
                    pass
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, "serve did not come up"
                time.sleep(0.2)
            page = httpx.get(base + "/")
            assert page.status_code == 200 and "<title>thinkloop</title>" in page.text
            agents = httpx.get(base + "/v1/agents").json()["agents"]
            assert [a["name"] for a in agents] == ["default"]
            # A program that changes state shows the process's token: from the file only the
            # person can read (as Authorization, the openai client's api_key), else 403.
            token_file = tmp_path / "gateway" / f"{port}.token"
            assert token_file.stat().st_mode & 0o777 == 0o600
            refused = httpx.post(base + "/v1/runs", json={"task": "hi"})
            assert refused.status_code == 403, refused.text
            assert "X-Thinkloop-Token" in refused.json()["error"]["message"]
            oai = openai.OpenAI(base_url=base + "/v1", api_key=token_file.read_text(),
                                max_retries=0, timeout=120)
            reply = oai.chat.completions.create(
                model="default", messages=[{"role": "user", "content": "What is 12*7?"}])
            assert reply.choices[0].message.content == "12*7 = 84"
            # The default agent is `thinkloop run`'s: its built-in tools were offered.
            offered = {t["function"]["name"] for t in model.requests[0]["tools"]}
            assert {"calculator", "shell", "read_file", "web_fetch"} <= offered
        finally:
            # Ctrl-C: the server stops; the run's post-turn memory jobs (the default agent has
            # memory) finish first, which may take a while on a loaded machine.
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
        assert proc.returncode == 0, err
        assert "Traceback" not in err
        assert not token_file.exists()  # gone with the process that made it


# `serve`, then (Ctrl-C ended it and everything closed) what the interpreter's collections at
# exit would walk: every object tracked by the collector and not frozen.
_SERVE_THEN_COUNT = """
import gc, sys
from thinkloop.cli.app import main
try:
    main()
finally:
    print("tracked at exit:", len(gc.get_objects()), file=sys.stderr)
"""


def test_serve_leaves_nothing_for_the_collections_at_exit(tmp_path: Path) -> None:
    """The interpreter's last collections walk every object still tracked: with the
    embedding model's torch loaded that was ~1.3 s of a Ctrl-C, to free memory the OS takes
    back anyway. Once everything is closed, serve freezes what is left (atexit still runs)."""
    port = free_port()
    env = {**os.environ, "THINKLOOP_HOME": str(tmp_path), "THINKLOOP_MODEL": "openai:fake",
           "OPENAI_API_KEY": "sk-test"}
    env.pop("THINKLOOP_DATABASE_URL", None)
    proc = subprocess.Popen([sys.executable, "-c", _SERVE_THEN_COUNT, "serve", "--no-auth",
                             "--port", str(port)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "gateway" / f"{port}.token").exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "serve did not come up"
            time.sleep(0.2)
        assert httpx.get(f"http://127.0.0.1:{port}/v1/agents", timeout=30).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    tracked = int(err.split("tracked at exit: ")[1].split()[0])
    assert tracked < 100, err  # the frame and list of the count itself: a few dozen at most
    assert not (tmp_path / "gateway" / f"{port}.token").exists()  # the lifespan's end ran
