"""What each guard costs per model call: the default agent with one guard turned off at a time.

The agents run on the in-process store with ``step_parts.AtOnce`` (a model that answers in
process at once: no HTTP, no durable records), 200 concurrent 10-step runs, the collector off
while a batch is timed, so the figure is the guards' own work. Variants are interleaved (each
once per repeat, in turn); the figure is this process's CPU µs per model call, median of
``--repeat`` (the first repeat is a warm-up and not counted), and "over lean" is the
difference to the lean agent's median.

Usage: python benchmarks/guards_each.py [--repeat 6] [--only lean,default,-loops]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import overhead  # the echo tool lives there
from step_parts import AtOnce

from thinkloop import Agent
from thinkloop.guard import GuardSettings, LoopSettings, ProvenanceSettings

RUNS = 200
CALLS = RUNS * (overhead.STEPS + 1)


def variants() -> dict[str, GuardSettings | bool]:
    s = GuardSettings()
    return {
        "lean": False,
        "default": s,
        "-input": replace(s, input=replace(s.input, mode="off")),
        "-nudges/rounds": replace(s, nudges=replace(s.nudges, urgency=False, escalate_from=0,
                                                    hints=False)),
        "-loops": replace(s, loops=LoopSettings(dedup=False, detect_loops=False)),
        "-provenance": replace(s, provenance=ProvenanceSettings(enabled=False)),
        "-review": replace(s, review=replace(s.review, enabled=False)),
    }


async def measure(names: list[str], repeat: int) -> dict[str, list[float]]:
    every = variants()
    agents = {n: Agent(AtOnce(), tools=[overhead.echo], max_steps=overhead.STEPS + 2,
                       guard=every[n], store="memory") for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    # Each run's task is its own, as in overhead.py: the input guard's memo of texts seen
    # before must not make 200 runs of one prompt look cheaper than 200 users' prompts.
    tasks = itertools.count()
    for r in range(repeat):
        for name, agent in agents.items():
            async def run(agent: Agent = agent) -> None:
                result = await agent.run(f"go {next(tasks)}")
                assert result.status == "completed", result

            await asyncio.gather(*(run() for _ in range(RUNS)))  # untimed: caches, pools
            gc.collect()
            gc.disable()
            start = time.process_time()
            await asyncio.gather(*(run() for _ in range(RUNS)))
            if r:
                cpu[name].append((time.process_time() - start) / CALLS * 1e6)
            gc.enable()
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=6)
    parser.add_argument("--only", default=",".join(variants()),
                        help="comma-separated variants (lean and default always useful)")
    args = parser.parse_args()
    cpu = asyncio.run(measure(args.only.split(","), max(2, args.repeat)))
    base = statistics.median(cpu["lean"]) if "lean" in cpu else 0.0
    print(f"CPU µs per model call, {RUNS} concurrent {overhead.STEPS}-step runs, in-process "
          f"model and store, collector off, median of {max(2, args.repeat) - 1}")
    for name, samples in cpu.items():
        m = statistics.median(samples)
        print(f"{name:16s} {m:6.1f}  (+{m - base:5.1f} over lean)")


if __name__ == "__main__":
    main()
