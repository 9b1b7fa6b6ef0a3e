"""Many concurrent runs in one process, all waiting on a slow model.

N runs of the default agent (guards, history pipeline, in-process store) are started while a
probe measures how late the event loop wakes it every millisecond; then every run waits on
the model (a scripted model that awaits one shared ``asyncio.Event``), memory is read, the
event is set and every run finishes. Two ways to start them, side by side:

* start loop     ``agent.start(task)`` N times in one go: every run takes its first step in
                 the same loop iteration, and the loop stalls for the whole batch
* start_many     ``await agent.start_many(tasks)``: runs are admitted in slices that yield,
                 each slice sized so that the loop stays responsive (goal: no stall over 50 ms)

Memory per waiting run is the growth of the resident set (and of the Python heap, from
tracemalloc with ``--tracemalloc``) over N, after a collection (goal: under 8 KB).

Usage: python benchmarks/scale_one.py [--runs 10000 100000] [--skip-loop-over 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import orjson

from thinkloop import Agent, RunHandle
from thinkloop.models.base import ModelSettings
from thinkloop.types import Message, ModelResponse, TextDelta, ToolSpec, Usage

GOAL_KB = 8.0
GOAL_STALL_MS = 50.0
BUCKETS_MS = (1, 5, 10, 20, 50, 100, 500, 1000)


class SlowModel:
    """Every call waits for ``release`` to be set, then answers."""

    name = "slow:scripted"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.waiting = 0

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec],
                       settings: ModelSettings) -> ModelResponse:
        self.waiting += 1
        await self.release.wait()
        return ModelResponse(Message.assistant("done"), Usage(1, 10, 2), "stop", self.name)

    async def stream(self, messages: Sequence[Message], tools: Sequence[ToolSpec],
                     settings: ModelSettings) -> AsyncIterator[TextDelta | ModelResponse]:
        yield await self.complete(messages, tools, settings)


class LagProbe:
    """Wakes every millisecond and records how late the loop let it run."""

    def __init__(self) -> None:
        self.lags_ms: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _probe(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            self.lags_ms.append(max((time.perf_counter() - before) * 1000 - 1.0, 0.0))

    def __enter__(self) -> LagProbe:
        self._task = asyncio.get_running_loop().create_task(self._probe())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()

    def histogram(self) -> str:
        counts = [0] * (len(BUCKETS_MS) + 1)
        for lag in self.lags_ms:
            counts[next((i for i, b in enumerate(BUCKETS_MS) if lag < b), len(BUCKETS_MS))] += 1
        labels = [f"<{b}" for b in BUCKETS_MS] + [f">={BUCKETS_MS[-1]}"]
        return " ".join(f"{label}:{n}" for label, n in zip(labels, counts, strict=True) if n)


def rss_kb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024


Starter = Callable[[Agent, list[str]], Awaitable[list[RunHandle]]]
STARTERS: dict[str, Starter]


async def start_loop(agent: Agent, tasks: list[str]) -> list[RunHandle]:
    return [agent.start(t, events=False) for t in tasks]


async def start_many(agent: Agent, tasks: list[str]) -> list[RunHandle]:
    return await agent.start_many(tasks, events=False)


STARTERS = {"start loop": start_loop, "start_many": start_many}


async def one(n: int, starter: Starter, use_tracemalloc: bool) -> dict[str, Any]:
    model = SlowModel()
    agent = Agent(model, store="memory", plugins=False, tracing=False, max_steps=3)
    warm = agent.start("warm up", events=False)  # first-use costs (classifier, prompt) out
    model.release.set()
    await warm.result()
    model.release.clear()
    model.waiting = 0
    tasks = [f"task {i}: say done" for i in range(n)]
    gc.collect()
    if use_tracemalloc:
        tracemalloc.start()
    heap0, rss0 = (tracemalloc.get_traced_memory()[0] if use_tracemalloc else 0), rss_kb()
    t0 = time.perf_counter()
    with LagProbe() as probe:
        handles = await starter(agent, tasks)
        while model.waiting < n:  # noqa: ASYNC110 (polling keeps the model a plain double)
            await asyncio.sleep(0.005)
        started_s = time.perf_counter() - t0
    gc.collect()
    heap1, rss1 = (tracemalloc.get_traced_memory()[0] if use_tracemalloc else 0), rss_kb()
    if use_tracemalloc:
        tracemalloc.stop()
    model.release.set()
    results = [await h.result() for h in handles]
    assert all(r.status == "completed" for r in results), {r.status for r in results}
    await agent.aclose()
    return {"n": n, "start_s": started_s, "rss_kb": (rss1 - rss0) / n,
            "heap_kb": (heap1 - heap0) / 1024 / n if use_tracemalloc else None,
            "max_lag": max(probe.lags_ms, default=0.0),
            "p50_lag": statistics.median(probe.lags_ms) if probe.lags_ms else 0.0,
            "hist": probe.histogram()}


def report(name: str, r: dict[str, Any]) -> None:
    heap = f"{r['heap_kb']:>8.2f}" if r["heap_kb"] is not None else f"{'-':>8}"
    kb_ok = "yes" if r["rss_kb"] < GOAL_KB else "no"
    lag_ok = "yes" if r["max_lag"] <= GOAL_STALL_MS else "no"
    print(f"{name:<11} {r['n']:>7} {r['start_s']:>8.2f} {r['rss_kb']:>8.2f} {heap} {kb_ok:>4} "
          f"{r['max_lag']:>9.1f} {r['p50_lag']:>7.2f} {lag_ok:>4}  {r['hist']}")


def in_fresh_process(n: int, name: str, use_tracemalloc: bool) -> dict[str, Any]:
    # One process per row: the resident set of a process that already ran 100k runs would
    # hide the next row's growth in pages it freed.
    argv = [sys.executable, __file__, "--one", str(n), name]
    if use_tracemalloc:
        argv.append("--tracemalloc")
    out = subprocess.run(argv, check=True, capture_output=True).stdout
    result: dict[str, Any] = orjson.loads(out.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--skip-loop-over", type=int, default=20_000,
                        help="only start_many above this many runs (the plain loop stalls "
                             "for tens of seconds)")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--one", nargs=2, metavar=("N", "STARTER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        n, name = int(args.one[0]), args.one[1]
        r = asyncio.run(one(n, STARTERS[name], args.tracemalloc))
        sys.stdout.write(orjson.dumps(r).decode() + "\n")
        return
    print(f"\n{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; goals: "
          f"< {GOAL_KB:g} KB per waiting run, no loop stall over {GOAL_STALL_MS:g} ms\n")
    print(f"{'start':<11} {'runs':>7} {'start s':>8} {'RSS KB':>8} {'heap KB':>8} {'<8K':>4} "
          f"{'max lag':>9} {'p50 lag':>7} {'<50':>4}  loop lag histogram (ms: probes)")
    for n in args.runs:
        for name in STARTERS:
            if name == "start loop" and n > args.skip_loop_over:
                continue
            report(name, in_fresh_process(n, name, args.tracemalloc))
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
