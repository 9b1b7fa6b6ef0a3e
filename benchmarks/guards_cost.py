"""What the guards (everything ``guard=True`` turns on) cost per model call: the default agent
against the lean one (``guard=False``), on the in-process store and on SQLite, with the bare
aiohttp loop as the floor, at ``--runs`` concurrent 10-step runs.

The records (run row, audit log, trace, checkpoints) are the same for both agents on one
store, so "default - lean" on the memory store is the guards' own cost without the durable
records' noise, and on SQLite what the guards add to a durable run (their events written
too). Samples are interleaved (each loop once per repeat, in turn); the figure is this
process's CPU µs per model call, median of ``--repeat``; differences are taken within each
repeat, then the median.

``--at-once``: the agents' model answers in process at once (``step_parts.AtOnce``: no HTTP,
no bare loop), so the figure is the loop's own work, without the transport's noise.

Usage: python benchmarks/guards_cost.py [--repeat 5] [--runs 200] [--at-once]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import overhead  # the loops and the server live there
from step_parts import AtOnce

from thinkloop import Agent
from thinkloop.store import open_store


async def measure(port: int, args: argparse.Namespace) -> dict[str, list[float]]:
    calls = args.runs * (overhead.STEPS + 1)
    with tempfile.TemporaryDirectory() as tmp:
        async with overhead.Loops(f"http://127.0.0.1:{port}/v1") as loops:
            sqlite = open_store(f"{tmp}/runs.db")

            def agent(guard: bool, store: object) -> Callable[[], Awaitable[None]]:
                model = AtOnce() if args.at_once else loops.model
                a = Agent(model, tools=[overhead.echo], max_steps=overhead.STEPS + 2,
                          guard=guard, store=store)  # type: ignore[arg-type]

                async def run() -> None:
                    result = await a.run(loops.task())
                    assert result.status == "completed", result

                return run

            bare = {} if args.at_once else {"bare aiohttp": loops.bare_aiohttp}
            fns = {**bare,
                   "lean, memory": agent(False, "memory"),
                   "default, memory": agent(True, "memory"),
                   "lean, SQLite": agent(False, sqlite),
                   "default, SQLite": agent(True, sqlite)}
            for fn in fns.values():
                await overhead.timed(fn, 20, 20)
            cpu: dict[str, list[float]] = {n: [] for n in fns}
            for _ in range(args.repeat):
                for name, fn in fns.items():
                    # Fill the pool again untimed (it drops connections idle for a round of
                    # the other loops), as overhead.py does.
                    await overhead.timed(fn, args.runs, args.runs)
                    secs = (await overhead.timed(fn, args.runs, args.runs))[1]
                    cpu[name].append(secs / calls * 1e6)
            await sqlite.aclose()
            return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--port", type=overhead.port_arg, default="0")
    parser.add_argument("--at-once", action="store_true",
                        help="a model that answers in process at once (no HTTP, no bare loop)")
    args = parser.parse_args()
    with overhead.serving(args.port):
        cpu = asyncio.run(measure(args.port, args))
    med = statistics.median
    print(f"\nCPU µs per model call, {args.runs} concurrent {overhead.STEPS}-step runs, median "
          f"of {args.repeat} (interleaved), load average {os.getloadavg()[0]:.2f}\n")
    print(f"{'loop':<18}{'µs/call':>9}{'x bare':>8}")
    bare = cpu.get("bare aiohttp")
    for name, v in cpu.items():
        times = "" if bare is None else \
            f"{med([a / b for a, b in zip(v, bare, strict=True)]):>8.2f}"
        print(f"{name:<18}{med(v):>9.0f}{times}")
    print()
    for store in ("memory", "SQLite"):
        d, lean = cpu[f"default, {store}"], cpu[f"lean, {store}"]
        gap = med([a - b for a, b in zip(d, lean, strict=True)])
        ratio = med([a / b for a, b in zip(d, lean, strict=True)])
        print(f"default - lean, {store:<7}{gap:>9.0f} µs/call  (default x lean {ratio:.2f})")


if __name__ == "__main__":
    main()
