"""What the durable run records cost per model call: the lean agent on SQLite against itself
on the in-process store, and the bare aiohttp loop, at 1 and 200 concurrent 10-step runs.

``thinkloop-lean`` records each run in SQLite (the default store: the run's row, its audit
log, its trace, a checkpoint before every model call and around every tool call);
``lean, memory store`` is the same agent with ``store="memory"``, which keeps the same
records in this process's memory. Their difference is what making the records durable costs.
Samples are interleaved (each loop once per repeat, in turn), so drift hits all alike; the
figure is this process's CPU µs per model call, median of ``--repeat``.

``--split`` adds the SQLite agent without its stored trace (``tracing=False``) and without its
checkpoints (``checkpoints=False``), and prints what each of the two costs a call (the full
SQLite agent's CPU minus that agent's, per repeat): where the records' cost lies.

Usage: python benchmarks/records_cost.py [--repeat 5] [--runs 200] [--split]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import overhead  # the loops and the server live there

from thinkloop import Agent
from thinkloop.agent import AgentOptions
from thinkloop.store import open_store

SPLIT = {"SQLite, no trace": AgentOptions(tracing=False),
         "SQLite, no checkpoints": AgentOptions(checkpoints=False)}


async def measure(port: int, args: argparse.Namespace) -> dict[str, dict[int, list[float]]]:
    calls_per_run = overhead.STEPS + 1
    with tempfile.TemporaryDirectory() as tmp:
        async with overhead.Loops(f"http://127.0.0.1:{port}/v1") as loops:
            sqlite = open_store(f"{tmp}/runs.db")
            on_disk = Agent(loops.model, tools=[overhead.echo], max_steps=overhead.STEPS + 2,
                            guard=False, store=sqlite)
            in_memory = Agent(loops.model, tools=[overhead.echo],
                              max_steps=overhead.STEPS + 2, guard=False, store="memory")

            async def run(agent: Agent) -> None:
                result = await agent.run("go")
                assert result.status == "completed", result

            fns = {"bare aiohttp": loops.bare_aiohttp,
                   "lean, memory store": lambda: run(in_memory),
                   "lean, SQLite store": lambda: run(on_disk)}
            for name, options in SPLIT.items() if args.split else ():
                part = Agent(loops.model, tools=[overhead.echo], max_steps=overhead.STEPS + 2,
                             guard=False, store=sqlite, options=options)
                fns[name] = functools.partial(run, part)
            for fn in fns.values():
                await overhead.timed(fn, 20, 20)
            cpu: dict[str, dict[int, list[float]]] = {n: {1: [], args.runs: []} for n in fns}
            for _ in range(args.repeat):
                for conc, runs in ((1, args.seq_runs), (args.runs, args.runs)):
                    for name, fn in fns.items():
                        secs = (await overhead.timed(fn, runs, conc))[1]
                        cpu[name][conc].append(secs / (runs * calls_per_run) * 1e6)
            await sqlite.aclose()
            return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seq-runs", type=int, default=20)
    parser.add_argument("--port", type=overhead.port_arg, default="0")
    parser.add_argument("--split", action="store_true",
                        help="also the SQLite agent without its trace, without checkpoints")
    args = parser.parse_args()
    with overhead.serving(args.port):
        cpu = asyncio.run(measure(args.port, args))
    print(f"\nCPU µs per model call, {overhead.STEPS}-step runs, median of {args.repeat} "
          f"(interleaved), load average {os.getloadavg()[0]:.2f}\n")
    print(f"{'loop':<22}{'1 at a time':>14}{'x bare':>8}{f'{args.runs} at once':>14}{'x bare':>8}")
    bare = {c: statistics.median(v) for c, v in cpu["bare aiohttp"].items()}
    for name, by in cpu.items():
        m = {c: statistics.median(v) for c, v in by.items()}
        print(f"{name:<22}" + "".join(f"{m[c]:>14.0f}{m[c] / bare[c]:>8.2f}" for c in m))
    mem, sql = cpu["lean, memory store"], cpu["lean, SQLite store"]
    rows = {"durable records": mem}
    rows |= {f"  of which {'the trace' if 'trace' in n else 'checkpoints'}": cpu[n]
             for n in SPLIT if n in cpu}
    for label, less in rows.items():
        print(f"{label:<22}" + "".join(
            f"{statistics.median(s - m for s, m in zip(sql[c], less[c], strict=True)):>14.0f}"
            f"{'':>8}" for c in less))


if __name__ == "__main__":
    main()
