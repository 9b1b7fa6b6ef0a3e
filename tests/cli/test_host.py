"""``thinkloop host`` as a person's side of the seed's container protocol: real processes
(the host, its bubblewrap-confined child), the loopback model server, a real webhook."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from tests.cli.conftest import END, OURS, START, Piped, clean_env
from tests.cli.conftest import seed_payload as seed_input

from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

SECRET = "sk-or-hostside-9c2b7e41"
HOST_ONLY = "host-only-credential-31f0"

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None,
                                reason="bubblewrap is not installed")


def seed_payload(base_url: str, prompt: str = "Weather today?") -> dict[str, Any]:
    return seed_input(base_url, prompt, SECRET)


def hosted(tmp: Path, payload: dict[str, Any], *args: str,
           markers: tuple[str, str] = (START, END), path: str | None = None,
           keep_open: bool = False) -> Piped:
    """``thinkloop host`` with its stdout read block by block."""
    environ = clean_env(THINKLOOP_HOME=str(tmp / "home"), HOST_TOKEN=HOST_ONLY)
    if path is not None:
        environ["PATH"] = path
    return Piped([sys.executable, "-m", "thinkloop", "host", "--data", str(tmp / "data"),
                  *args], payload, environ, markers, keep_open)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (bwrap, its namespace init, the Python inside)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        nxt = [c for c, p in parents.items() if p in frontier]
        found += nxt
        frontier = nxt
    return found


def test_a_run_in_bubblewrap_gets_its_secrets_only_through_the_payload(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.clear()
    server.enqueue(Reply(body=completion("Sunny all day.")))
    server.pause()  # the child waits for its model (no fixed delay) until looked at
    with hosted(tmp_path, seed_payload(server.base_url)) as host:
        try:
            attempt = host.next_block()
            assert attempt["type"] == "attempt" and attempt["attempt"] == 1
            while not server.held:  # the child is waiting for its model: look at it now
                time.sleep(0.05)
            children = descendants(host.proc.pid)
            assert len(children) >= 2  # bwrap and the Python process it confines
            seen = b""
            for pid in children:
                for name in ("cmdline", "environ"):
                    seen += Path(f"/proc/{pid}/{name}").read_bytes()
            assert b"thinkloop" in seen and b"--stdio" in seen
            assert SECRET.encode() not in seen and HOST_ONLY.encode() not in seen
            # Inside, a fresh mount namespace: the host's files are not there.
            python = children[-1]
            assert os.readlink(f"/proc/{python}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        finally:
            server.resume()
        final = host.next_block()
        assert host.finish() == 0
    assert final["status"] == "success" and final["result"] == "Sunny all day."
    assert final["newSessionId"]
    assert server.headers[0]["authorization"] == f"Bearer {SECRET}"
    # The group's data (its store, its sessions) is kept in its own folder on the host.
    assert (tmp_path / "data" / "family" / "thinkloop.db").is_file()


def test_the_confined_run_cannot_see_the_hosts_files(
    server: OpenAIServer, tmp_path: Path
) -> None:
    (tmp_path / "outside.txt").write_text("private")
    server.clear()
    server.enqueue(
        Reply(body=completion(tool_calls=[("shell", {"command": (
            f"hostname; test -e {tmp_path}/outside.txt && echo visible || echo hidden; "
            f"env | grep -q {HOST_ONLY} && echo leaked || echo clean; "
            # Every process's arguments and environment in the confinement (the agent's
            # too), searched for the model key without writing it in any argument.
            f"A={SECRET[:8]}; B={SECRET[8:]}; printf %s \"$A$B\" > /tmp/key; "
            "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null "
            "| grep -qaFf /tmp/key && echo proc-leak || echo proc-clean")})])),
        Reply(body=completion("Checked.")),
    )
    payload = {"task": "Look around.", "user": "ana", "model": "openai:fake", "tools": "shell",
               "approve": "auto",
               "secrets": {"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": server.base_url}}
    with hosted(tmp_path, payload, markers=OURS) as host:
        assert host.finish() == 0
    (out,) = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    # (a command's output reaches the model marked as outside content; the words stay whole)
    for word in ("thinkloop", "hidden", "clean", "proc-clean"):
        assert word in out
    assert "visible" not in out and "leaked" not in out and "proc-leak" not in out
    assert SECRET not in out  # the model key is the provider's, not the commands'


def test_the_persons_answer_reaches_the_confined_run_mid_run(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.clear()
    server.enqueue(
        Reply(body=completion(tool_calls=[("ask_human", {"question": "Which city?"})])),
        Reply(body=completion("Booked in Lisbon.")),
    )
    with hosted(tmp_path, seed_payload(server.base_url, "Book a table."), keep_open=True) as host:
        assert host.next_block()["type"] == "attempt"
        question = host.next_block()
        assert question["type"] == "question" and question["result"] == "Which city?"
        host.send({"type": "answer", "id": question["id"], "text": "Lisbon"})
        final = host.next_block()
        assert host.finish() == 0
    assert final["result"] == "Booked in Lisbon."
    (answer,) = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert "Lisbon" in answer


def test_a_killed_run_is_retried_and_then_succeeds(server: OpenAIServer, tmp_path: Path) -> None:
    server.clear()
    server.enqueue(Reply(body=completion("too late"), delay_s=8),
                   Reply(body=completion("Answered on the second try.")))
    with hosted(tmp_path, seed_payload(server.base_url), "--backoff", "0.2") as host:
        first = host.next_block()
        while not server.requests:
            time.sleep(0.05)
        os.kill(first["pid"], signal.SIGKILL)  # the run's process dies mid-run
        retry = host.next_block()
        assert retry["type"] == "retry" and retry["attempt"] == 1
        assert retry["delay_s"] == 0.2 and "killed (signal 9)" in retry["error"]
        second = host.next_block()
        assert second["type"] == "attempt" and second["attempt"] == 2
        final = host.next_block()
        assert host.finish() == 0
    assert final["status"] == "success" and final["result"] == "Answered on the second try."
    # Both attempts were the same conversation: the host gave the session its id up front.
    assert final["newSessionId"] == retry["newSessionId"]
    assert not any(b.get("type") == "notification" for b in host.blocks)


def test_a_retried_run_is_given_the_follow_ups_its_killed_attempt_had(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """The person answered the first attempt's question, then its process died: the retry
    asks again and gets the same answer, once, without the person writing it again."""
    ask = Reply(body=completion(tool_calls=[("ask_human", {"question": "Which city?"})]))
    server.clear()
    server.enqueue(ask, Reply(body=completion("too late"), delay_s=8),
                   ask, Reply(body=completion("Booked in Lisbon.")))
    with hosted(tmp_path, seed_payload(server.base_url, "Book a table."), "--backoff", "0.2",
              keep_open=True) as host:
        first = host.next_block()
        question = host.next_block()
        assert question["type"] == "question"
        host.send({"type": "answer", "id": question["id"], "text": "Lisbon"})
        while len(server.requests) < 2:  # the answer reached the run and its model
            time.sleep(0.05)
        os.kill(first["pid"], signal.SIGKILL)
        assert host.next_block()["type"] == "retry"
        assert host.next_block()["type"] == "attempt"
        again = host.next_block()
        assert again["type"] == "question" and again["id"] != question["id"]
        final = host.next_block()  # nobody answered this time: the replayed answer did
        assert host.finish() == 0
    assert final["status"] == "success" and final["result"] == "Booked in Lisbon."
    assert len(server.requests) == 4
    retried = server.requests[3]["messages"]
    answers = [m["content"] for m in retried if m["role"] == "tool"]
    assert len(answers) == 1 and "Lisbon" in answers[0]
    # Given once: it answered the question and did not come back as a turn of its own.
    assert not any(m["role"] == "user" and "Lisbon" in str(m["content"]) for m in retried)
    assert [b.get("type") for b in host.blocks].count("question") == 2


def test_an_answer_read_from_the_ipc_folder_reaches_the_retry_too(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """The answer came as a file in the IPC folder's input/, then the process died: the
    retry reads it again, once, and the folder is empty when the run has succeeded."""
    ipc = tmp_path / "data" / "family" / "ipc"  # in the group's folder: the run sees it
    ask = Reply(body=completion(tool_calls=[("ask_human", {"question": "Red or white?"})]))
    server.clear()
    server.enqueue(ask, Reply(body=completion("too late"), delay_s=8),
                   ask, Reply(body=completion("Ordered red.")))
    payload = {**seed_payload(server.base_url, "Order wine."), "ipcDir": str(ipc)}
    with hosted(tmp_path, payload, "--backoff", "0.2", keep_open=True) as host:
        first = host.next_block()
        assert host.next_block()["type"] == "question"
        (ipc / "input").mkdir(parents=True, exist_ok=True)
        (ipc / "input" / "tmp").write_text(json.dumps({"type": "message", "text": "red"}))
        (ipc / "input" / "tmp").rename(ipc / "input" / "0001.json")
        while len(server.requests) < 2:  # the answer reached the run and its model
            time.sleep(0.05)
        os.kill(first["pid"], signal.SIGKILL)
        assert host.next_block()["type"] == "retry"
        assert host.next_block()["type"] == "attempt"
        assert host.next_block()["type"] == "question"
        final = host.next_block()
        assert host.finish() == 0
    assert final["result"] == "Ordered red."
    answers = [m["content"] for m in server.requests[3]["messages"] if m["role"] == "tool"]
    assert len(answers) == 1 and "red" in answers[0]
    assert not list((ipc / "input").iterdir())


class Hook(BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        Hook.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_the_host_gives_up_after_its_retries_and_notifies(tmp_path: Path) -> None:
    hook = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    Hook.received.clear()
    url = f"http://127.0.0.1:{hook.server_address[1]}/notify"
    try:
        # No model answers at this address: every attempt fails and exits 1.
        with hosted(tmp_path, seed_payload("http://127.0.0.1:9/v1"), "--retries", "2",
                  "--backoff", "0.1", "--notify-url", url) as host:
            code = host.finish()
    finally:
        hook.shutdown()
        hook.server_close()
    assert code == 1
    kinds = [b.get("type", b["status"]) for b in host.blocks]
    assert kinds.count("attempt") == 3  # the first try and two retries
    assert [b["delay_s"] for b in host.blocks if b.get("type") == "retry"] == [0.1, 0.2]
    note = host.blocks[-1]
    assert note["type"] == "notification" and note["status"] == "error"
    assert "failed 3 time(s)" in note["error"] and "[redacted]" in note["error"]
    (sent,) = Hook.received
    assert sent["type"] == "message" and sent["text"] == note["error"]
    assert sent["recipient"] == "123@g.us" and sent["meta"] == {"attempts": 3}
    assert SECRET not in json.dumps(host.blocks) + "".join(host.stderr)


def test_a_bad_payload_is_not_retried(tmp_path: Path) -> None:
    with hosted(tmp_path, {"prompt": ""}, "--retries", "3", "--backoff", "0.1") as host:
        assert host.finish() == 1
    (only,) = host.blocks
    assert only["status"] == "error" and only["retry"] is False
    assert "prompt: String should have at least 1 character" in only["error"]


def test_a_container_engine_gets_no_secret_in_its_arguments(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """No container daemon here: a stand-in ``docker`` on PATH records what the host asks of
    it and runs the image's command (``thinkloop run --stdio``) itself."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "docker-call.json"
    fake = bin_dir / "docker"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "call = {'argv': sys.argv[1:], 'env': dict(os.environ)}\n"
        f"json.dump(call, open({str(record)!r}, 'w'))\n"
        "data = sys.argv[sys.argv.index('-v') + 1].split(':')[0]\n"
        "os.environ.update(THINKLOOP_HOME=data, THINKLOOP_TOOLS_SANDBOX='none')\n"
        f"py = {sys.executable!r}\n"
        "os.execv(py, [py, '-m', 'thinkloop', 'run', '--stdio'])\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    server.clear()
    server.enqueue(Reply(body=completion("From the container.")))
    with hosted(tmp_path, seed_payload(server.base_url), "--image", "thinkloop:test",
              path=f"{bin_dir}:{os.environ['PATH']}") as host:
        assert host.finish() == 0
    assert host.blocks[-1]["result"] == "From the container."
    call = json.loads(record.read_text())
    argv = call["argv"]
    assert argv[:3] == ["run", "--rm", "-i"]
    assert argv[-4:] == ["thinkloop:test", "thinkloop", "run", "--stdio"]
    assert {"--cap-drop", "ALL", "no-new-privileges", "THINKLOOP_HOME=/data"} <= set(argv)
    assert f"{tmp_path / 'data' / 'family'}:/data" in argv
    assert SECRET not in json.dumps(call) and HOST_ONLY not in json.dumps(call)
