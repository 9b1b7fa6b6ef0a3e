"""Many concurrent runs in one process, all waiting on a slow model.

N runs of the default agent (guards, history pipeline, in-process store) are started while a
probe measures how late the event loop wakes it every millisecond; then every run waits on
the model (a scripted model that awaits one shared ``asyncio.Event``), memory is read, the
event is set and every run finishes. Two ways to start them, side by side:

* start loop     ``agent.start(task)`` N times in one go: every run takes its first step in
                 the same loop iteration, and the loop stalls for the whole batch
* no freeze      ``await agent.start_many(tasks, freeze=False)``: runs are admitted in slices
                 that yield, each slice sized so that the loop stays responsive; but CPython's
                 full collections walk every waiting run (about 8 passes while 10k start)
* start_many     ``await agent.start_many(tasks)``: the same, and each admitted slice is kept
                 out of full collections until the runs are done (``FreezeHold``)
                 (goal: no stall over 50 ms)

The loop lag is how late a coroutine sleeping 1 ms wakes; the histogram counts the probes per
bucket. Beside the worst lag, "its CPU" is the CPU time the process used over that probe's
interval: on a loaded machine a lag with little CPU behind it is time the process waited for
a core, not work of its own. "max CPU" is the most CPU time between any two probes (while
starting and while waiting): the process's longest stall of its own, whatever the load.
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
from thinkloop.agent import AgentOptions
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
    """Wakes every millisecond and records how late the loop let it run, and how much CPU
    the process used in that time: a late wake with little CPU behind it was the machine's
    scheduler (the process waited for a core), one with as much CPU was the process's own
    work (a stall of the code)."""

    def __init__(self) -> None:
        self.lags_ms: list[float] = []
        self.cpu_ms: list[float] = []  # the process's CPU time over each probe's interval
        self._task: asyncio.Task[None] | None = None

    async def _probe(self) -> None:
        while True:
            before, cpu = time.perf_counter(), time.process_time()
            await asyncio.sleep(0.001)
            self.lags_ms.append(max((time.perf_counter() - before) * 1000 - 1.0, 0.0))
            self.cpu_ms.append((time.process_time() - cpu) * 1000)

    @property
    def worst(self) -> tuple[float, float]:
        """The worst lag and the CPU the process used over it (ms)."""
        if not self.lags_ms:
            return 0.0, 0.0
        i = max(range(len(self.lags_ms)), key=self.lags_ms.__getitem__)
        return self.lags_ms[i], self.cpu_ms[i]

    @property
    def max_cpu(self) -> float:
        """The most CPU the process spent between two probes (ms): the code's longest stall,
        whatever the machine's load (the probe's own 1 ms sleep aside)."""
        return max(self.cpu_ms, default=0.0)

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


class FullPasses:
    """Times the collector's full passes (generation 2) while it is entered."""

    def __init__(self) -> None:
        self.ms: list[float] = []
        self._began = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.ms.append((time.perf_counter() - self._began) * 1000)

    def __enter__(self) -> FullPasses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


async def churn(seconds: float) -> None:
    """Keep allocating while the runs wait, as a server would: objects that live for a while
    (up to 50,000 small lists, dropped together) are what makes the collector's full passes
    come round. A ring replacing one object by another would not: CPython counts
    allocations net of deallocations."""
    live: list[list[int]] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        live.extend([i] for i in range(2_000))
        if len(live) >= 50_000:
            live = []
        await asyncio.sleep(0)


def rss_kb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024


Starter = Callable[[Agent, list[str]], Awaitable[list[RunHandle]]]
STARTERS: dict[str, Starter]


async def start_loop(agent: Agent, tasks: list[str]) -> list[RunHandle]:
    return [agent.start(t, events=False) for t in tasks]


async def no_freeze(agent: Agent, tasks: list[str]) -> list[RunHandle]:
    return await agent.start_many(tasks, events=False, freeze=False)


async def start_many(agent: Agent, tasks: list[str]) -> list[RunHandle]:
    return await agent.start_many(tasks, events=False)


STARTERS = {"start loop": start_loop, "no freeze": no_freeze, "start_many": start_many}


async def one(n: int, starter: Starter, use_tracemalloc: bool, wait_s: float
              ) -> dict[str, Any]:
    model = SlowModel()
    agent = Agent(model, store="memory", plugins=False, max_steps=3,
                  options=AgentOptions(tracing=False))
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
    with LagProbe() as probe, FullPasses() as passes:
        handles = await starter(agent, tasks)
        while model.waiting < n:  # noqa: ASYNC110 (polling keeps the model a plain double)
            await asyncio.sleep(0.005)
        started_s = time.perf_counter() - t0
    gc.collect()
    heap1, rss1 = (tracemalloc.get_traced_memory()[0] if use_tracemalloc else 0), rss_kb()
    if use_tracemalloc:
        tracemalloc.stop()
    with LagProbe() as waiting, FullPasses() as waiting_passes:
        await churn(wait_s)
    model.release.set()
    results = [await h.result() for h in handles]
    assert all(r.status == "completed" for r in results), {r.status for r in results}
    await agent.aclose()
    return {"n": n, "start_s": started_s, "rss_kb": (rss1 - rss0) / n,
            "heap_kb": (heap1 - heap0) / 1024 / n if use_tracemalloc else None,
            "max_lag": max(probe.lags_ms, default=0.0), "max_lag_cpu": probe.worst[1],
            "max_cpu": max(probe.max_cpu, waiting.max_cpu),
            "p50_lag": statistics.median(probe.lags_ms) if probe.lags_ms else 0.0,
            "hist": probe.histogram(), "full_passes": len(passes.ms),
            "max_pass": max(passes.ms, default=0.0),
            "wait_max_lag": max(waiting.lags_ms, default=0.0),
            "wait_passes": len(waiting_passes.ms)}


HEADER = (f"{'start':<11} {'runs':>7} {'start s':>8} {'RSS KB':>8} {'heap KB':>8} {'<8K':>4} "
          f"{'max lag':>8} {'its CPU':>7} {'max CPU':>7} {'p50 lag':>7} {'<50':>4} "
          f"{'full GCs':>8} {'max GC':>7} "
          f"{'wait lag':>8} {'wait GCs':>8}  loop lag histogram while starting (ms: probes)")


def report(name: str, r: dict[str, Any]) -> None:
    heap = f"{r['heap_kb']:>8.2f}" if r["heap_kb"] is not None else f"{'-':>8}"
    kb_ok = "yes" if r["rss_kb"] < GOAL_KB else "no"
    lag_ok = "yes" if max(r["max_lag"], r["wait_max_lag"]) <= GOAL_STALL_MS else "no"
    print(f"{name:<11} {r['n']:>7} {r['start_s']:>8.2f} {r['rss_kb']:>8.2f} {heap} {kb_ok:>4} "
          f"{r['max_lag']:>8.1f} {r['max_lag_cpu']:>7.1f} {r['max_cpu']:>7.1f} "
          f"{r['p50_lag']:>7.2f} {lag_ok:>4} {r['full_passes']:>8} "
          f"{r['max_pass']:>7.1f} {r['wait_max_lag']:>8.1f} {r['wait_passes']:>8}  {r['hist']}")


def in_fresh_process(n: int, name: str, use_tracemalloc: bool, wait_s: float
                     ) -> dict[str, Any]:
    # One process per row: the resident set of a process that already ran 100k runs would
    # hide the next row's growth in pages it freed.
    argv = [sys.executable, __file__, "--one", str(n), name, "--wait", str(wait_s)]
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
                        help="only start_many above this many runs (the plain loop and "
                             "full collections stall for tens of seconds)")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--wait", type=float, default=2.0,
                        help="seconds the runs wait while the process keeps allocating")
    parser.add_argument("--one", nargs=2, metavar=("N", "STARTER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        n, name = int(args.one[0]), args.one[1]
        r = asyncio.run(one(n, STARTERS[name], args.tracemalloc, args.wait))
        sys.stdout.write(orjson.dumps(r).decode() + "\n")
        return
    print(f"\n{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; goals: "
          f"< {GOAL_KB:g} KB per waiting run, no loop stall over {GOAL_STALL_MS:g} ms\n")
    print(HEADER)
    for n in args.runs:
        for name in STARTERS:
            if name != "start_many" and n > args.skip_loop_over:
                continue
            report(name, in_fresh_process(n, name, args.tracemalloc, args.wait))
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
