"""What confinement costs one container-mode run: ``thinkloop run --stdio`` started directly,
through ``thinkloop host --engine none`` and through ``thinkloop host`` (bubblewrap).

Each figure is the median wall time of N fresh runs of one model call against the loopback
OpenAI-compatible server (an instant reply), measured interleaved so that load from other
processes spreads over the three alike. The host adds its own interpreter and the blocks'
relay; bubblewrap adds the namespaces and mounts.

Usage: python benchmarks/host.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from thinkloop.testing.openai_server import OpenAIServer

MODES = {
    "run --stdio (no host)": ["run", "--stdio"],
    "host --engine none": ["host", "--engine", "none"],
    "host (bubblewrap)": ["host", "--engine", "bwrap"],
}


def once(args: list[str], payload: str, env: dict[str, str], data: str) -> float:
    extra = ["--data", data] if args[0] == "host" else []
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "thinkloop", *args, *extra], input=payload,
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    took = time.perf_counter() - start
    if proc.returncode != 0 or "done after 0 steps" not in proc.stdout:
        raise SystemExit(f"{args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-2000:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    with OpenAIServer() as server, tempfile.TemporaryDirectory() as tmp:
        payload = json.dumps({"task": "hi", "user": "bench", "model": "openai:steps-0",
                              "secrets": {"OPENAI_API_KEY": "sk-bench-0000",
                                          "OPENAI_BASE_URL": server.base_url}})
        env = {**os.environ, "THINKLOOP_HOME": f"{tmp}/home",
               "THINKLOOP_TOOLS_WORKSPACE": f"{tmp}/ws"}
        times: dict[str, list[float]] = {name: [] for name in MODES}
        for _ in range(runs):
            for name, args in MODES.items():
                times[name].append(once(args, payload, env, f"{tmp}/data"))
    base = statistics.median(times["run --stdio (no host)"])
    print(f"one run, one model call, median of {runs} (os.cpu_count()={os.cpu_count()})\n")
    print(f"{'':28}{'wall s':>8}{'vs direct':>11}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:28}{med:8.2f}{med / base:10.2f}x")


if __name__ == "__main__":
    main()
