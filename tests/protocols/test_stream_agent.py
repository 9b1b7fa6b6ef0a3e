"""Streaming a run under text protocols (issue 11 item 5): through ``agent.stream`` against the
loopback OpenAI server, text chunks carry only prose, calls arrive as tool_call chunks, the
tool runs and the run completes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from thinkloop import Agent, tool
from thinkloop.agent import AgentOptions
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion, stream_events

ANSWER = "SOL trades at 142.5 USD."
SCRIPTS = {
    "xml": ["I'll look up the price first.\n<tool_call>\n{\"name\": \"lookup_price\", "
            "\"arguments\": {\"symbol\": \"SOL\"}}\n</tool_call>",
            "<think>I have it.</think>\n" + ANSWER],
    "tags": ["<<THINK>>I need the price.<</THINK>>\nI'll look up the price first.\n"
             "<<TOOL:lookup_price:SOL>>", ANSWER],
    "json": ['{"reasoning": "I need the price.", "tools": [{"name": "lookup_price", '
             '"arguments": {"symbol": "SOL"}}], "completed": false}',
             '{"reasoning": "I have it.", "tools": [], "completed": true, "answer": "'
             + ANSWER + '"}'],
    # auto on a model that writes its calls as text (Qwen3-Coder on a server without a parser)
    "auto": ["I'll look up the price first.\n<tool_call>\n<function=lookup_price>\n"
             "<parameter=symbol>\nSOL\n</parameter>\n</function>\n</tool_call>", ANSWER],
}
MARKUP = ("<tool_call", "</tool_call", "<function", "<parameter", "<<TOOL", "<<THINK", "<think",
          '"tools"', '"name"', "lookup_price")


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@pytest.mark.parametrize("protocol", ["xml", "tags", "json", "auto"])
async def test_streamed_text_chunks_hold_no_markup(server: OpenAIServer, protocol: str) -> None:
    server.clear()
    for content in SCRIPTS[protocol]:
        body = completion(content, model="Qwen3-Coder-30B-A3B-Instruct")
        server.enqueue(Reply(sse=stream_events(body)))
    ran: list[str] = []

    @tool
    def lookup_price(symbol: str) -> str:
        """Look up the current USD price of a token."""
        ran.append(symbol)
        return "142.5 USD"

    model = OpenAICompatModel("Qwen3-Coder-30B-A3B-Instruct", base_url=server.base_url,
                              api_key="sk-test")
    agent = Agent(model, tools=[lookup_price], options=AgentOptions(protocol=protocol))
    try:
        events = [e async for e in agent.stream("What does SOL cost?")]
    finally:
        await model.aclose()
    chunks = [e.payload for e in events if e.type == "chunk"]
    text = "".join(c["content"] for c in chunks if c["kind"] == "text")
    calls = [json.loads(c["content"]) for c in chunks if c["kind"] == "tool_call"]
    assert not [m for m in MARKUP if m in text], text
    expected = ANSWER if protocol == "json" else f"I'll look up the price first. {ANSWER}"
    assert " ".join(text.split()) == expected
    assert calls == [{"name": "lookup_price", "arguments": {"symbol": "SOL"}}]
    assert ran == ["SOL"]
    done: dict[str, Any] = next(e.payload for e in events if e.type == "run.completed")
    assert done["status"] == "completed"
    assert all(r["stream"] for r in server.requests)


def test_the_cli_prints_no_markup_under_xml(server: OpenAIServer) -> None:
    server.clear()
    for content in ["Let me compute that.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": "
                    "{\"expression\": \"12*7\"}}\n</tool_call>", "12*7 = 84"]:
        server.enqueue(Reply(sse=stream_events(completion(content))))
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "THINKLOOP_MODEL")}
    proc = subprocess.run(
        [sys.executable, "-c", "from thinkloop.cli.app import main; main()", "run",
         "What is 12*7? Use the calculator.", "--model", "openai:fake", "--protocol", "xml"],
        capture_output=True, text=True, timeout=120,
        env={**env, "OPENAI_BASE_URL": server.base_url, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    # The CLI shows a spinner and the steps while the model streams, and the answer once on
    # stdout; interim prose is not printed (cli/render.py), so markup could only leak through
    # the step lines or the answer.
    shown = proc.stdout + proc.stderr
    assert proc.stdout.startswith("12*7 = 84\n") and "-> 84" in proc.stderr
    assert "<tool_call" not in shown and '"arguments"' not in shown, shown
