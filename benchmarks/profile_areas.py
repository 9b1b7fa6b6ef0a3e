"""Where a model call's client CPU goes, by area, sampled: 200 concurrent 10-step runs.

The loops of ``overhead.py`` (bare aiohttp, thinkloop-lean, thinkloop with every default)
against the same loopback server. Each loop is first timed without a profiler (CPU µs per
model call, this process; median of ``--repeat``), then sampled by ``py-spy`` (an outside
sampler: it does not slow Python calls down the way cProfile does, so C and Python code keep
their true proportions) while it runs ``--rounds`` more batches of 200 runs.

A sample is charged to the innermost frame that belongs to an area (a thinkloop package or a
library); frames of the standard library and of asyncio's own machinery called from there
count with it (``loop.create_task`` called by the loop is the loop's cost). A sample whose
stack holds no such frame is the event loop's own work (``_run_once``, the selector). The
table gives each area's share of the samples times the loop's unprofiled CPU per call.

Needs ``py-spy`` on the PATH (``pip install py-spy``) and the right to trace this process.

Usage: python benchmarks/profile_areas.py [--repeat 3] [--rounds 8] [--rate 400]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import overhead  # the loops and the server live there

RUNS = 200
CALLS = RUNS * (overhead.STEPS + 1)

# (area, path fragments), first match wins: the innermost frame that matches any decides.
AREAS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("guards", ("thinkloop/guard/", "thinkloop/judgement/", "thinkloop/spotlight",
                "thinkloop/offload")),
    ("history pipeline", ("thinkloop/context/",)),
    ("trace (spans)", ("thinkloop/directspans", "thinkloop/tracing", "opentelemetry/")),
    ("records (store, checkpoints, run log)", (
        "thinkloop/store/", "thinkloop/runlog", "thinkloop/checkpoints", "aiosqlite/",
        "sqlite3/", "thinkloop/session", "thinkloop/runs.py", "thinkloop/lifetime")),
    ("model wire (encode, decode)", ("thinkloop/models/openai", "thinkloop/models/base",
                                     "thinkloop/models/retry", "thinkloop/models/pricing",
                                     "thinkloop/models/catalog", "thinkloop/models/wrappers",
                                     "orjson")),
    ("HTTP client", ("thinkloop/models/h1", "thinkloop/models/transport", "aiohttp/",
                     "multidict/", "yarl/", "propcache/", "httptools/")),
    ("events, handle", ("thinkloop/core/events", "thinkloop/loop/handle",
                        "thinkloop/events", "thinkloop/wakeups")),
    ("tools (call, validate)", ("thinkloop/tools/", "thinkloop/core/tool", "pydantic")),
    ("protocol (read reply)", ("thinkloop/protocols/",)),
    ("loop, hooks", ("thinkloop/loop/", "thinkloop/core/", "thinkloop/hooks/",
                     "thinkloop/agent", "thinkloop/")),
    ("bare loop, harness", ("benchmarks/overhead",)),
)
# Waits py-spy does not see as idle: a sample ending here is no CPU, and is left out.
IDLE = ("EpollSelector.select (", "aiosqlite/core.py:59)", "_worker (")
EVENT_LOOP = "asyncio event loop (no area below)"


def area_of(frame: str) -> str | None:
    for area, fragments in AREAS:
        if any(f in frame for f in fragments):
            return area
    return None


def charge(stack: str) -> str:
    """The area of the innermost frame in an area (py-spy's raw stacks are root first)."""
    for frame in reversed(stack.split(";")):
        name = area_of(frame)
        if name is not None:
            return name
    return EVENT_LOOP


def read_samples(path: str) -> Counter[str]:
    by_area: Counter[str] = Counter()
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        leaf = stack.rpartition(";")[2]
        if stack and count.isdigit() and not any(i in leaf for i in IDLE):
            by_area[charge(stack)] += int(count)
    return by_area


async def sampled(fn: Callable[[], Awaitable[None]], args: argparse.Namespace,
                  name: str) -> Counter[str]:
    if args.keep:
        path = str(Path(args.keep) / f"{name}.txt")
    else:
        with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as out:
            path = out.name
    spy = await asyncio.create_subprocess_exec(
        "py-spy", "record", "--pid", str(os.getpid()), "--rate", str(args.rate),
        "--format", "raw", "--full-filenames", "-o", path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await asyncio.sleep(1.0)  # py-spy attaches
        for _ in range(args.rounds):
            await overhead.timed(fn, RUNS, RUNS)
    finally:
        spy.send_signal(signal.SIGINT)
        await spy.wait()
    try:
        return read_samples(path)
    finally:
        if not args.keep:
            os.unlink(path)


async def measure(port: int, args: argparse.Namespace) -> dict[str, tuple[float, Counter[str]]]:
    async with overhead.Loops(f"http://127.0.0.1:{port}/v1") as loops:
        fns = {"bare aiohttp": loops.bare_aiohttp, "thinkloop-lean": loops.thinkloop_lean,
               "thinkloop": loops.thinkloop}
        for fn in fns.values():
            await overhead.timed(fn, 20, 20)
        cpu: dict[str, list[float]] = {name: [] for name in fns}
        for _ in range(args.repeat):  # interleaved, so drift hits all alike
            for name, fn in fns.items():
                await overhead.timed(fn, RUNS, RUNS)  # fill the pool again, untimed
                cpu[name].append((await overhead.timed(fn, RUNS, RUNS))[1] / CALLS * 1e6)
        return {name: (statistics.median(cpu[name]),
                       await sampled(fn, args, name)) for name, fn in fns.items()}


def table(res: dict[str, tuple[float, Counter[str]]]) -> None:
    names = list(res)
    areas = [a for a, _ in AREAS] + [EVENT_LOOP]
    print(f"{'area (µs per model call)':<40}" + "".join(f"{n:>16}" for n in names))
    for area in areas:
        row = []
        for name in names:
            per_call, samples = res[name]
            total = sum(samples.values()) or 1
            share = samples[area] / total
            row.append(f"{per_call * share:>9.0f} ({100 * share:>3.0f}%)")
        if any(res[n][1][area] for n in names):
            print(f"{area:<40}" + "".join(f"{r:>16}" for r in row))
    print(f"{'total CPU µs per call (no profiler)':<40}"
          + "".join(f"{res[n][0]:>16.0f}" for n in names))
    bare = res[names[0]][0]
    print(f"{'x bare aiohttp':<40}" + "".join(f"{res[n][0] / bare:>16.2f}" for n in names))
    print(f"{'samples':<40}" + "".join(f"{sum(res[n][1].values()):>16}" for n in names))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="unprofiled samples (median)")
    parser.add_argument("--rounds", type=int, default=8, help="batches of 200 runs sampled")
    parser.add_argument("--rate", type=int, default=400, help="py-spy samples per second")
    parser.add_argument("--port", type=overhead.port_arg, default="0")
    parser.add_argument("--keep", help="a folder to keep py-spy's raw stacks in, a file a loop")
    args = parser.parse_args()
    with overhead.serving(args.port):
        res = asyncio.run(measure(args.port, args))
    print(f"\nper model call, {RUNS} concurrent {overhead.STEPS}-step runs, CPU median of "
          f"{args.repeat}, load average {os.getloadavg()[0]:.2f}\n")
    table(res)


if __name__ == "__main__":
    main()
