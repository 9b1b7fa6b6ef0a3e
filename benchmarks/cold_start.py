"""A cold start like a warm one: the first run of a new process, default agent against lean.

Each sample is a fresh Python process (nothing imported, nothing cached in memory) that builds
one agent against the deterministic loopback model server (its own process, started once) and
times its first ``agent.run`` (10 tool steps + the answer) and then a second run, in wall
seconds and in the process's CPU seconds (all its threads). The same process also times the
import of thinkloop and the agent's construction. Ratios are taken within one round (default
and lean sampled back to back), then the median over rounds.

* default  ``Agent(model, tools=[echo])``: every default guard, the history pipeline, policy
* lean     the same with ``guard=False``

Goal: the default agent's first run within 2x the lean agent's first run.

Usage: python benchmarks/cold_start.py [--rounds 7] [--profile default]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

from overhead import start_server

from server import free_port

CHILD = textwrap.dedent("""
    import asyncio, cProfile, json, pstats, sys, time
    t0, c0 = time.perf_counter(), time.process_time()
    from thinkloop import Agent, tool
    from thinkloop.models.openai_compat import OpenAICompatModel
    imported, imported_cpu = time.perf_counter() - t0, time.process_time() - c0

    @tool
    async def echo(text: str) -> str:
        \"\"\"Echo the text back.\"\"\"
        return text

    async def main() -> dict[str, float]:
        t, c = time.perf_counter(), time.process_time()
        model = OpenAICompatModel("steps-10", base_url=sys.argv[1], api_key="x")
        # guard=True: every default guard; False: the lean agent.
        agent = Agent(model, tools=[echo], max_steps=12, guard=sys.argv[2] == "default")
        out = {"import": imported, "import cpu": imported_cpu,
               "build": time.perf_counter() - t, "build cpu": time.process_time() - c}
        for label in ("first", "second"):
            prof = cProfile.Profile() if label == "first" and len(sys.argv) > 3 else None
            t, c = time.perf_counter(), time.process_time()
            if prof:
                prof.enable()
            result = await agent.run("go")
            if prof:
                prof.disable()
                stats = pstats.Stats(prof, stream=sys.stderr)
                stats.sort_stats("cumulative").print_stats(45)
            assert result.status == "completed", result
            out[f"{label} run"] = time.perf_counter() - t
            out[f"{label} run cpu"] = time.process_time() - c
        await agent.aclose()
        await model.aclose()
        return out

    print(json.dumps(asyncio.run(main())))
""")


def sample(base_url: str, variant: str, home: str) -> dict[str, float]:
    env = {**os.environ, "THINKLOOP_HOME": home}
    out = subprocess.run([sys.executable, "-c", CHILD, base_url, variant], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def profile(base_url: str, variant: str, home: str) -> None:
    """Print the 40 most expensive functions (cumulative) of one cold first run."""
    env = {**os.environ, "THINKLOOP_HOME": home}
    subprocess.run([sys.executable, "-c", CHILD, base_url, variant, "profile"], env=env,
                   check=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--profile", choices=["default", "lean"])
    args = ap.parse_args()


    port = free_port()
    server = start_server(port)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        with tempfile.TemporaryDirectory() as home:
            if args.profile:
                profile(base, args.profile, home)
                return
            sample(base, "lean", home)  # warm the OS file cache, not measured
            rows: dict[str, list[dict[str, float]]] = {"default": [], "lean": []}
            ratios: list[float] = []
            cpu_ratios: list[float] = []
            for _ in range(args.rounds):
                d, lean = sample(base, "default", home), sample(base, "lean", home)
                rows["default"].append(d)
                rows["lean"].append(lean)
                ratios.append(d["first run"] / lean["first run"])
                cpu_ratios.append(d["first run cpu"] / lean["first run cpu"])
    finally:
        server.terminate()
        server.wait()
    print(f"load average at the end: {os.getloadavg()[0]:.1f}; {args.rounds} rounds, medians\n")
    keys = list(rows["default"][0])
    print("| agent | " + " | ".join(f"{k} (ms)" for k in keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name, samples in rows.items():
        cells = [f"{statistics.median(s[k] for s in samples) * 1e3:.1f}" for k in keys]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\ndefault first run / lean first run (median of per-round ratios): "
          f"{statistics.median(ratios):.2f}x wall, {statistics.median(cpu_ratios):.2f}x CPU "
          "(goal 2x)")


if __name__ == "__main__":
    main()
