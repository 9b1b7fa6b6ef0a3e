"""Container mode in the seed's own terms: its payload on stdin and its markers on stdout,
``send_message``/``send_voice`` as output blocks, and ``ask_human`` answered mid-run by a
follow-up JSON line on stdin (or a file in the IPC folder). Real processes, against the
loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.cli.conftest import END, OURS, START, Piped, clean_env, read_blocks
from tests.cli.conftest import seed_payload as seed_input

from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

SECRET = "sk-or-container-5d8e1f"
CMD = [sys.executable, "-c", "from thinkloop.cli.app import main; main()", "run", "--stdio"]


def env(tmp_path: Path) -> dict[str, str]:
    return clean_env(THINKLOOP_HOME=str(tmp_path / "home"),
                     THINKLOOP_TOOLS_WORKSPACE=str(tmp_path / "ws"))


def seed_payload(server: OpenAIServer, prompt: str, **more: Any) -> dict[str, Any]:
    return seed_input(server.base_url, prompt, SECRET, **more)


def blocks(lines: list[str], markers: tuple[str, str] = (START, END)) -> list[dict[str, Any]]:
    return read_blocks(lines, markers)


def stdio_child(payload: dict[str, Any], environ: dict[str, str],
          markers: tuple[str, str] = (START, END)) -> Piped:
    """``thinkloop run --stdio`` with stdin kept open, read block by block."""
    return Piped(CMD, payload, environ, markers)


def test_the_seeds_payload_in_and_its_markers_out(server: OpenAIServer, tmp_path: Path) -> None:
    server.clear()
    server.enqueue(
        Reply(body=completion(tool_calls=[("send_message", {"text": "On it, checking now."})])),
        Reply(body=completion("The weather today is sunny.")),
    )
    proc = subprocess.run(CMD, input=json.dumps(seed_payload(server, "Weather today?")),
                          capture_output=True, text=True, timeout=120, env=env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    got = blocks(proc.stdout.splitlines())
    # send_message reached the host as a block of its own, with no approval asked.
    assert got[0]["type"] == "message" and got[0]["result"] == "On it, checking now."
    final = got[-1]
    assert final["status"] == "success" and final["result"] == "The weather today is sunny."
    session = final["newSessionId"]
    assert session and all(b["newSessionId"] == session for b in got)
    assert {b["status"] for b in got} <= {"success", "error"}  # the seed's two statuses
    # The seed's backend detection: OpenRouter with its key, its model, the named persona.
    request = server.requests[0]
    assert request["model"] == "fake-model"
    assert server.headers[0]["authorization"] == f"Bearer {SECRET}"
    assert "You are Andy" in request["messages"][0]["content"]
    assert SECRET not in proc.stdout + proc.stderr
    assert OURS[0] not in proc.stdout

    # The next container start with the returned session id continues the conversation.
    server.clear()
    server.enqueue(Reply(body=completion("You asked about the weather.")))
    proc = subprocess.run(
        CMD, input=json.dumps(seed_payload(server, "What did I ask?", sessionId=session)),
        capture_output=True, text=True, timeout=120, env=env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert blocks(proc.stdout.splitlines())[-1]["newSessionId"] == session
    contents = [m.get("content") for m in server.requests[0]["messages"]]
    assert "Weather today?" in contents and "The weather today is sunny." in contents


def test_a_bad_seed_payload_is_one_error_block_between_its_markers(tmp_path: Path) -> None:
    proc = subprocess.run(CMD, input=json.dumps({"prompt": "hi", "sessionID": "x"}),
                          capture_output=True, text=True, timeout=120, env=env(tmp_path))
    assert proc.returncode == 1
    (final,) = blocks(proc.stdout.splitlines())
    assert final["status"] == "error" and final["result"] is None
    assert "sessionID: Extra inputs are not permitted" in final["error"]
    assert final["retry"] is False  # a host should not retry what can never work


def test_ask_human_is_answered_by_a_follow_up_line_mid_run(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.clear()
    server.enqueue(
        Reply(body=completion(tool_calls=[("ask_human", {"question": "Which city?"})])),
        Reply(body=completion("Booked a table in Lisbon.")),
    )
    with stdio_child(seed_payload(server, "Book me a table for tonight."),
                     env(tmp_path)) as child:
        question = child.next_block()
        assert question["type"] == "question" and question["result"] == "Which city?"
        assert child.proc.poll() is None  # the run is waiting for the person, mid-run
        assert len(server.requests) == 1
        child.send({"type": "answer", "id": question["id"], "text": "Lisbon"})
        final = child.next_block()
        assert final["status"] == "success" and final["result"] == "Booked a table in Lisbon."
        assert child.finish() == 0
    (answer,) = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert "Lisbon" in answer


def test_a_follow_up_message_is_the_next_turn_and_voice_is_a_block(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.clear()
    server.enqueue(
        Reply(body=completion(tool_calls=[("send_voice", {"text": "Good morning!"})]),
              delay_s=0.5),
        Reply(body=completion("Said good morning.")),
        Reply(body=completion("It is 9am.")),
    )
    payload = {"task": "Greet me by voice.", "session": "chat-9", "model": "openai:fake",
               "idle_timeout_s": 30,
               "secrets": {"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": server.base_url}}
    with stdio_child(payload, env(tmp_path), markers=OURS) as child:
        voice = child.next_block()
        assert voice["type"] == "voice" and voice["result"] == "Good morning!"
        assert child.next_block()["result"] == "Said good morning."
        child.send({"type": "message", "text": "What time is it?"})
        final = child.next_block()
        assert final["result"] == "It is 9am." and final["session_id"] == "chat-9"
        assert child.finish() == 0  # stdin closed: the process ends
    contents = [m.get("content") for m in server.requests[2]["messages"]]
    assert "Greet me by voice." in contents and contents[-1] == "What time is it?"


def test_ask_human_through_the_ipc_folder(server: OpenAIServer, tmp_path: Path) -> None:
    ipc = tmp_path / "ipc"
    server.clear()
    server.enqueue(
        Reply(body=completion(tool_calls=[("ask_human", {"question": "Red or white?"})])),
        Reply(body=completion("Ordered red.")),
    )
    with stdio_child(seed_payload(server, "Order wine.", ipcDir=str(ipc)),
                     env(tmp_path)) as child:
        assert child.next_block()["type"] == "question"
        # The seed's host watcher finds the question as a file in messages/ ...
        (msg,) = sorted((ipc / "messages").glob("*.json"))
        doc = json.loads(msg.read_text())
        assert doc == {**doc, "type": "message", "chatJid": "123@g.us", "text": "Red or white?"}
        # ... and answers with a file in input/, written whole and then renamed.
        (ipc / "input").mkdir()
        (ipc / "input" / "tmp").write_text(json.dumps({"type": "message", "text": "red"}))
        (ipc / "input" / "tmp").rename(ipc / "input" / "0001.json")
        assert child.next_block()["result"] == "Ordered red."
        assert child.finish() == 0
    assert not list((ipc / "input").iterdir())  # consumed


def test_ask_human_with_the_input_closed_is_an_error_the_model_reads(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.clear()
    server.enqueue(
        Reply(body=completion(tool_calls=[("ask_human", {"question": "Which city?"})])),
        Reply(body=completion("I could not ask you (no answer came), so I picked Porto.")),
    )
    proc = subprocess.run(CMD, input=json.dumps(seed_payload(server, "Book a table.")),
                          capture_output=True, text=True, timeout=120, env=env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    got = blocks(proc.stdout.splitlines())
    assert got[0]["type"] == "question"
    assert got[-1]["result"] == "I could not ask you (no answer came), so I picked Porto."
    (result,) = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert "the host closed its input" in result
