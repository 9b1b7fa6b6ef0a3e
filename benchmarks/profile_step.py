"""Where a model call's client time goes: 200 concurrent 10-step runs, profiled.

The loops of ``overhead.py`` (bare aiohttp, thinkloop-lean, thinkloop with every default)
against the same loopback server. For each, per model call (200 runs x 11 calls):

* CPU us (gc off)   this process's CPU time with the collector disabled: the code's own cost
* CPU us (gc on)    the same with the collector on, as it runs by default
* gc us             time inside collections (gc on), and how many of each generation ran
* calls             Python function calls (cProfile, gc off), all and by group: thinkloop's
                    own code, aiohttp, asyncio, builtins (dict.get, isinstance, len...)

Counts do not depend on load; times do, so each loop is measured ``--repeat`` times,
interleaved, and the median shown. ``--against PYTHON`` profiles another install (e.g. the
previous commit's) in the same run, for a before/after table.

Usage: python benchmarks/profile_step.py [--repeat 5] [--against /path/to/python]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).parent))
import overhead  # the loops and the server live there

RUNS = 200
CALLS = RUNS * (overhead.STEPS + 1)


class GcClock:
    """Time spent in collections and how many of each generation ran, while entered."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.counts = [0, 0, 0]
        self._began = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._began
            self.counts[info["generation"]] += 1

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def group(filename: str) -> str:
    if "thinkloop" in filename:
        return "thinkloop"
    if any(lib in filename for lib in ("aiohttp", "multidict", "yarl", "propcache")):
        return "aiohttp"
    if "asyncio" in filename:
        return "asyncio"
    return "builtins" if filename == "~" else "other"


async def profile(fn: Callable[[], Awaitable[None]], repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {"cpu_off": [], "cpu_on": [], "gc": [], "gcn": []}
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            out["cpu_off"].append((await overhead.timed(fn, RUNS, RUNS))[1])
        finally:
            gc.enable()
        gc.collect()
        with GcClock() as clock:
            out["cpu_on"].append((await overhead.timed(fn, RUNS, RUNS))[1])
        out["gc"].append(clock.seconds)
        out["gcn"].append(clock.counts)
    gc.collect()
    gc.disable()
    profiler = cProfile.Profile()
    try:
        profiler.enable()
        await overhead.timed(fn, RUNS, RUNS)
        profiler.disable()
    finally:
        gc.enable()
    calls: Counter[str] = Counter()
    for (filename, _, _), row in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        calls[group(filename)] += row[1]
    return {"cpu_off": statistics.median(out["cpu_off"]) / CALLS * 1e6,
            "cpu_on": statistics.median(out["cpu_on"]) / CALLS * 1e6,
            "gc": statistics.median(out["gc"]) / CALLS * 1e6,
            "gcn": [statistics.median(c[g] for c in out["gcn"]) for g in range(3)],
            "calls": {k: v / CALLS for k, v in calls.items()}}


async def measure(port: int, repeat: int) -> dict[str, Any]:
    async with overhead.Loops(f"http://127.0.0.1:{port}/v1") as loops:
        fns = {"bare aiohttp": loops.bare_aiohttp, "thinkloop-lean": loops.thinkloop_lean,
               "thinkloop": loops.thinkloop}
        for fn in fns.values():
            await overhead.timed(fn, 20, 20)
        return {name: await profile(fn, repeat) for name, fn in fns.items()}


def table(title: str, res: dict[str, Any]) -> None:
    print(f"\n{title}\n")
    print(f"{'loop':<15} {'CPU us':>7} {'CPU us':>7} {'gc us':>6} {'gc runs':>11} "
          f"{'calls':>6} {'thinkloop':>9} {'aiohttp':>8} {'asyncio':>8} {'builtins':>8}")
    print(f"{'':<15} {'gc off':>7} {'gc on':>7} {'':>6} {'gen 0/1/2':>11}")
    for name, r in res.items():
        c = r["calls"]
        gcn = "/".join(f"{n:g}" for n in r["gcn"])
        print(f"{name:<15} {r['cpu_off']:>7.1f} {r['cpu_on']:>7.1f} {r['gc']:>6.1f} {gcn:>11} "
              f"{sum(c.values()):>6.0f} {c.get('thinkloop', 0):>9.0f} {c.get('aiohttp', 0):>8.0f} "
              f"{c.get('asyncio', 0):>8.0f} {c.get('builtins', 0):>8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--port", type=overhead.port_arg, default="0")
    parser.add_argument("--against", help="another interpreter to profile in the same run")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    other = None
    if args.against:
        argv = [args.against, __file__, "--json", "--repeat", str(args.repeat),
                "--port", "0"]
        other = subprocess.Popen(argv, stdout=subprocess.PIPE)
        # Run one after the other, not side by side: they would share the two cores.
        out = other.communicate()[0]
        other_res = orjson.loads(out.splitlines()[-1])
    with overhead.serving(args.port):
        res = asyncio.run(measure(args.port, args.repeat))
    if args.json:
        sys.stdout.write(orjson.dumps(res).decode() + "\n")
        return
    print(f"per model call, {RUNS} concurrent {overhead.STEPS}-step runs, median of "
          f"{args.repeat}, load average {os.getloadavg()[0]:.2f}")
    if other is not None:
        table(f"{args.against}", other_res)
    table(sys.executable, res)


if __name__ == "__main__":
    main()
