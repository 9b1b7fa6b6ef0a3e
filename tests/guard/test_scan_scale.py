"""Scans grow linearly with the text and run off the event loop (issue 30: one 96 KB
single-line file froze the process for 44 s, and through the gateway one user's file read
stalled another user's requests for 43 s)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace

import pytest

from thinkloop.agent import Agent, AgentOptions
from thinkloop.guard import GuardSettings, ReviewSettings
from thinkloop.guard.classifier import Classifier
from thinkloop.guard.scan import scan_input
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.tools.base import tool

# Single lines of the shapes that made a scan quadratic: one long word, a long number, a
# repeated markdown-image opener, word-like runs, and plain prose.
LINES: dict[str, Callable[[int], str]] = {
    "word": lambda n: "y" * n,
    "number": lambda n: "1" * n,
    "image-openers": lambda n: "![" * (n // 2),
    "percent": lambda n: "%41" * (n // 3),
    "prose": lambda n: "the quick brown fox jumps over it " * (n // 33),
}


def _seconds(fn: Callable[[str], object], text: str) -> float:
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("shape", LINES)
def test_a_scan_grows_linearly_with_one_long_line(shape: str) -> None:
    """8 times the text takes about 8 times as long (quadratic: 64 times)."""
    make = LINES[shape]
    small, big = make(16 * 1024), make(128 * 1024)
    for fn in (scan_input, Classifier.load().scan):
        ratio = _seconds(fn, big) / max(_seconds(fn, small), 1e-4)
        assert ratio < 30, f"{fn}: {ratio:.0f}x for 8x the text"


@tool(trusted_output=False)
def read_big() -> str:
    """Reads a large one-line file (outside content: scanned)."""
    return "ai " * 350_000  # a megabyte: cut to the tool output cap, then scanned


async def test_a_big_scan_never_stalls_the_other_coroutines() -> None:
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    answer = "The file holds the word 'ai' repeated about 350,000 times on one line: ai ai ai."
    model = ScriptedModel([reply("", call("read_big")), answer])
    # The default guards (the input guard scans the output), less the answer's review.
    guard = replace(GuardSettings(), review=ReviewSettings(enabled=False))
    # No observation cap: the whole output is scanned (the cap would page it first).
    agent = Agent(model, tools=[read_big], store="memory", max_steps=4, guard=guard,
                  options=AgentOptions(observation_max_tokens=0))
    Classifier.load()  # loaded once per process (a server has it from its first request)
    tick = asyncio.create_task(ticker())
    start = time.perf_counter()
    result = await agent.run("read the big file and tell me what it holds")
    took = time.perf_counter() - start
    done.set()
    await tick
    assert result.status == "completed", result.error
    assert took > 0.2  # the scan was real work ...
    assert max(gaps) < 0.1, f"the event loop stalled for {max(gaps):.3f}s"  # ... off the loop
