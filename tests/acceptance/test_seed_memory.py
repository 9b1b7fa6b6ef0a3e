"""Memory that keeps enough, in the seeds' terms (issue 36): UrchinLoop's 30 messages kept
verbatim after a compaction, reasoning blocks kept out of the history sent back, and a huge
tool result going into history truncated with a way to page through the rest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from thinkloop import Agent, AgentOptions, tool
from thinkloop.testing.openai_server import OpenAIServer

from .conftest import calls, say


@tool
def stock(item: int) -> str:
    """The stock level of one item."""
    return f"item {item}: 3 in stock"


def _sent(llm: OpenAIServer, i: int) -> str:
    """The history of request ``i`` (the system prompt explains the format, THINK included)."""
    return orjson.dumps([m for m in llm.requests[i]["messages"] if m["role"] != "system"]).decode()


@pytest.mark.parametrize("protocol", ["tags", "native"])
async def test_reasoning_blocks_are_absent_from_the_next_request(
        llm: OpenAIServer, protocol: str, tmp_path: Path) -> None:
    if protocol == "tags":  # UrchinLoop's own format
        first = say('<<THINK>>secret plan A<</THINK>>\n<<TOOL:stock:{"item": 1}>>')
    else:
        first = calls(("stock", {"item": 1}), text="<think>secret plan A</think>")
    llm.enqueue(first, say("<<THINK>>secret plan B<</THINK>>Item 1 has 3."), say("Fine."))
    async with Agent(tools=[stock], store=str(tmp_path / "t.db"),
                     options=AgentOptions(protocol=protocol)) as agent:
        result = await agent.run("How many of item 1?", session="s")
        assert result.text == "Item 1 has 3."
        await agent.run("Thanks. Anything else?", session="s")
    assert len(llm.requests) == 3
    for i in (1, 2):  # within the run, and in the next run on the session
        assert "secret plan" not in _sent(llm, i)
        assert "THINK" not in _sent(llm, i) and "<think>" not in _sent(llm, i)
    assert "item 1: 3 in stock" in _sent(llm, 2)  # the rest of the history is all there
    if protocol == "tags":  # the tool tag the model wrote stays: it is the history
        assert '<<TOOL:stock:{\\"item\\": 1}>>' in _sent(llm, 1)


async def test_after_an_auto_compaction_the_30_most_recent_messages_stay_verbatim(
        llm: OpenAIServer, tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    async with Agent("compat:steps-0", memory=True, store=db) as agent:
        for i in range(26):  # 52 messages: past the 50 that trigger a compaction
            await agent.run(f"question {i}", session="s")
        await agent.sessions.drain()
        kept = await agent.store.load("s")
        info = await agent.store.session_info("s")  # type: ignore[attr-defined]
    assert info.compactions == 1
    assert len(kept) == 30
    assert [m.content for m in kept[::2]] == [f"question {i}" for i in range(11, 26)]
    assert all(m.content == "done after 0 steps" for m in kept[1::2])


PAGE = "".join(f"[line {i:05d}] the quick brown fox jumps over the lazy dog\n"
               for i in range(1800))  # 102,600 characters


@tool(trusted_output=False)
def fetch_page(url: str) -> str:
    """A web page's text (outside content, as web_fetch's is)."""
    return PAGE


async def test_a_100k_character_page_goes_into_history_truncated_with_a_way_to_page_on(
        llm: OpenAIServer, tmp_path: Path) -> None:
    assert len(PAGE) > 100_000
    llm.enqueue(calls(("fetch_page", {"url": "https://example.org/report"})),
                calls(("read_more", {"ref": "out1", "offset": 16000})),
                say("The report has 1800 lines."))
    async with Agent(tools=[fetch_page], store=str(tmp_path / "t.db")) as agent:
        result = await agent.run("Summarise https://example.org/report", session="s")
        assert result.status == "completed", result.error
        history = await agent.store.load("s")
    first = next(m for m in llm.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert first.startswith('<untrusted_content source="fetch_page"')  # the page marked whole
    first = first.replace("^", " ")
    assert len(first) < 20_000  # about 4000 tokens, not the whole page
    assert "[line 00000]" in first and "[line 00300]" not in first
    assert ('[Output truncated: showing characters 0-16000 of 102600' in first
            and 'call read_more with ref="out1" and offset=16000' in first)
    offered = [[t["function"]["name"] for t in r["tools"]] for r in llm.requests]
    assert offered[0] == ["fetch_page"]  # read_more only once there is something to read
    assert offered[1] == ["fetch_page", "read_more"]
    second = [m for m in llm.requests[2]["messages"] if m["role"] == "tool"][-1]["content"]
    assert second.startswith('<untrusted_content source="fetch_page"')  # outside content
    second = second.replace("^", " ")  # datamarked: spaces read as ^
    assert PAGE[16000:32000] in second  # the next page
    assert 'ref="out1" and offset=32000' in second
    stored = [m.content for m in history if m.role == "tool"]
    assert len(stored[0]) < 20_000 and "[line 00300]" not in stored[0]


async def test_truncated_output_is_readable_only_from_its_own_session(
        llm: OpenAIServer, tmp_path: Path) -> None:
    llm.enqueue(calls(("fetch_page", {"url": "https://example.org/a"})),
                say("It starts: [line 00000] the quick brown fox jumps over the lazy dog"),
                calls(("read_more", {"ref": "out1", "offset": 16000})),
                say("There is no truncated output out1 to read."))
    async with Agent(tools=[fetch_page], store=str(tmp_path / "t.db")) as agent:
        await agent.run("Read https://example.org/a", session="alice")
        await agent.run("Read on from out1", session="mallory")
    denied = [m for m in llm.requests[3]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "Error: no truncated output 'out1' to read" in denied.replace("^", " ")
    assert "[line 00300]" not in orjson.dumps(llm.requests[3]["messages"]).decode()


def _users(request: dict[str, object]) -> list[str]:
    return [m["content"] for m in request["messages"]  # type: ignore[attr-defined]
            if m["role"] == "user"]


async def test_the_history_turn_limit_is_set_from_agent(
        llm: OpenAIServer, tmp_path: Path) -> None:
    async with Agent("compat:steps-0", store=str(tmp_path / "t.db"),
                     options=AgentOptions(history_turns=2)) as agent:
        for i in range(4):
            await agent.run(f"question {i}", session="s")
        kept = await agent.store.load("s")
    assert _users(llm.requests[-1]) == ["question 2", "question 3"]
    assert len(kept) == 8  # the session itself keeps every message


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_the_history_turn_limit_is_set_from_the_cli_and_the_settings(
        llm: OpenAIServer, tmp_path: Path, how: str) -> None:
    env = {**os.environ, "THINKLOOP_HOME": str(tmp_path / "home"),
           "THINKLOOP_MODEL": "compat:steps-0"}
    extra = ["--history-turns", "1"] if how == "flag" else []
    if how == "environment":
        env["THINKLOOP_HISTORY_TURNS"] = "1"
    for i in range(2):
        done = subprocess.run([sys.executable, "-m", "thinkloop", "run", f"question {i}",
                               "--session", "s", "--tools", "none", *extra],
                              capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
    # The runs' own requests (memory's post-turn summaries are side calls of their own).
    runs = [r for r in llm.requests if _users(r)[-1:] and _users(r)[-1].startswith("question")]
    assert _users(runs[-1]) == ["question 1"]  # without the limit: question 0 too


def _store_backends() -> object:
    """tests/store's backend fixtures (SQLite, and PostgreSQL in a schema of its own)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "store" / "conftest.py"
    spec = importlib.util.spec_from_file_location("_seed_memory_backends", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_backends = _store_backends()
backend = _backends.backend  # type: ignore[attr-defined]
store_url = _backends.store_url  # type: ignore[attr-defined]


async def test_checkpoints_are_pruned_to_the_last_n_runs_of_a_session(
        llm: OpenAIServer, store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THINKLOOP_KEEP_CHECKPOINTS", "2")
    for i in range(4):
        llm.enqueue(calls(("stock", {"item": i})), say(f"Item {i}: 3 in stock."))
    async with Agent(tools=[stock], store=store_url) as agent:
        for i in range(4):
            await agent.run(f"Stock of item {i}?", session="s")
        await agent.run("Stock of item 9?", session="other")  # another session's: its own
        runs = sorted(await agent.store.list_runs(session="s"),  # type: ignore[attr-defined]
                      key=lambda r: r.started_at)
        kept = [len(await agent.store.checkpoints(r.id)) for r in runs]  # type: ignore[attr-defined]
        other = await agent.store.list_runs(session="other")  # type: ignore[attr-defined]
        assert await agent.store.checkpoints(other[0].id)  # type: ignore[attr-defined]
    assert len(kept) == 4
    assert kept[:2] == [0, 0] and all(kept[2:])
