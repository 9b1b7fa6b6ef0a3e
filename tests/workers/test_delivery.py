"""A scheduled run executing on a worker follows the delivery policy: its answer, and its
``send_message``, reach a person only where its schedule says (``deliver_to``), through the
gateway that serves that chat channel; a message anywhere else is refused and sent nowhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from tests.workers.conftest import Fleet, free_port

from thinkloop.channels.webhook import SIGNATURE, TIMESTAMP, sign
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

SECRET = "s3cret-for-the-test"
NOTIFIER = """
  notifier:
    model: openai:fake
    tools: [send_message]
    memory: false
    approve: auto
    guards: false
"""


class Receiver(BaseHTTPRequestHandler):
    posts: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        ok = self.headers[SIGNATURE] == sign(SECRET, self.headers[TIMESTAMP], body)
        self.posts.append({**json.loads(body), "signed": ok})
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    Receiver.posts = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/hook", Receiver.posts
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def chat_fleet(tmp_path: Path, receiver: tuple[str, list[dict[str, Any]]]) -> Iterator[Fleet]:
    with OpenAIServer() as model:
        f = Fleet(tmp_path, model)
        f.agents.write_text(f.agents.read_text() + NOTIFIER)
        f.env.update({"THINKLOOP_CHANNELS_WEBHOOK_URL": receiver[0],
                      "THINKLOOP_CHANNELS_WEBHOOK_SECRET": SECRET,
                      "THINKLOOP_CHANNELS_WEBHOOK_PORT": "0"})
        try:
            port = free_port()
            proc = f._spawn(["serve", "--no-auth", "--port", str(port), "--agents",
                             str(f.agents), "--channel", "webhook"])
            f.gateways.append((proc, f"http://127.0.0.1:{port}"))
            f.worker("w1")
            f.wait_ready()
            yield f
        finally:
            f.stop()


def _texts(posts: list[dict[str, Any]], chat: str) -> list[str]:
    return [p["text"] for p in posts if p["type"] == "message" and p["chat"] == chat]


def test_a_scheduled_run_on_a_worker_delivers_only_where_its_schedule_says(
        chat_fleet: Fleet, receiver: tuple[str, list[dict[str, Any]]]) -> None:
    f, posts = chat_fleet, receiver[1]
    f.model.enqueue(
        Reply(body=completion(tool_calls=[("send_message", {
            "text": "psst, elsewhere", "recipient": "webhook:room-9"})])),
        Reply(body=completion(tool_calls=[("send_message", {
            "text": "halfway there", "recipient": "room-1"})])),
        Reply(body=completion("All done: 3 tickets closed.")))
    r = f.post(f.g1 + "/v1/schedules", timeout=10, json={
        "cron": "* * * * * */2", "task": "close tickets", "agent": "notifier",
        "deliver_to": ["webhook:room-1"], "priority": 3})
    assert r.status_code == 201, r.text
    made = r.json()
    assert (made["deliver_to"], made["priority"]) == (["webhook:room-1"], 3)
    deadline = time.monotonic() + 60
    while not any(s["fired"] for s in httpx.get(f.g1 + "/v1/schedules", timeout=10)
                  .json()["schedules"]):
        assert time.monotonic() < deadline, f.logs()
        time.sleep(0.1)
    f.delete(f"{f.g1}/v1/schedules/{made['id']}", timeout=10)
    while "All done: 3 tickets closed." not in _texts(posts, "room-1"):
        assert time.monotonic() < deadline, f"{posts}\n{f.logs()}"
        time.sleep(0.1)
    time.sleep(1)  # anything else on its way arrives too
    assert _texts(posts, "room-1").count("halfway there") == 1
    assert _texts(posts, "room-1").count("All done: 3 tickets closed.") == 1
    assert not [p for p in posts if p.get("chat") != "room-1"]  # room-9 got nothing
    assert all(p["signed"] for p in posts)
    # The model was told why its first message went nowhere.
    refused = [m["content"] for req in f.model.requests for m in req["messages"]
               if m.get("role") == "tool" and "send refused" in str(m.get("content"))]
    assert refused and "only where its schedule says (webhook:room-1)" in refused[0]


def test_a_delivery_target_is_platform_and_chat(chat_fleet: Fleet) -> None:
    r = chat_fleet.post(chat_fleet.g1 + "/v1/schedules", timeout=10, json={
        "cron": "0 9 * * *", "task": "x", "agent": "notifier", "deliver_to": ["room 1"]})
    assert r.status_code == 400 and "delivery target" in r.text


def test_the_hosts_give_up_notice_reaches_a_chat_through_the_gateway_serving_it(
        chat_fleet: Fleet, receiver: tuple[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    """``thinkloop host --notify webhook:{chat}`` on the fleet's queue: the notice goes the way
    a scheduled run's answer does, to the gateway that serves the channel, which sends it."""
    posts = receiver[1]
    # No model answers at this address: both attempts fail, and the host gives up.
    payload = {"prompt": "Weather?", "groupFolder": "family", "chatJid": "room-7",
               "secrets": {"OPENROUTER_API_KEY": "sk-or-unused-key-123",
                           "OPENROUTER_BASE_URL": "http://127.0.0.1:9/v1"}}
    proc = subprocess.run(
        [sys.executable, "-m", "thinkloop", "host", "--engine", "none", "--retries", "1",
         "--backoff", "0.1", "--data", str(tmp_path / "host-data"),
         "--notify", "webhook:{chat}"],
        input=json.dumps(payload), env=chat_fleet.env, capture_output=True, text=True,
        timeout=120)
    assert proc.returncode == 1, proc.stderr
    note = json.loads(proc.stdout.strip().splitlines()[-2])
    assert note["type"] == "notification" and "failed 2 time(s)" in note["error"]
    deadline = time.monotonic() + 60
    while not _texts(posts, "room-7"):
        assert time.monotonic() < deadline, f"{posts}\n{chat_fleet.logs()}"
        time.sleep(0.1)
    assert _texts(posts, "room-7") == [note["error"]]
    assert all(p["signed"] for p in posts)


def test_a_chat_notice_without_the_queue_is_one_clear_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THINKLOOP_")}
    env["THINKLOOP_HOME"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "thinkloop", "host", "--notify", "telegram:42"],
                          input="{}", env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "needs the run queue" in proc.stderr
