"""How long ``thinkloop serve`` takes to exit on Ctrl-C (SIGINT), idle or after one run.

Each round starts ``thinkloop serve --no-auth`` with a fresh ``THINKLOOP_HOME`` on a free port,
optionally runs one task through ``POST /v1/runs`` (read to its end through the run's event
stream), waits ``--settle`` seconds (the run's post-turn jobs, e.g. embedding its episode,
run meanwhile), then sends SIGINT and times the exit. ``--src`` measures another checkout's
``src`` (e.g. a copy of main's) in the same rounds, interleaved, for a before/after robust to
load. The model is ``THINKLOOP_MODEL`` (default ``local``: SmolLM2 through llama.cpp).

Usage: python benchmarks/serve_exit.py [--rounds 3] [--settle 30] [--idle] [--src DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_run(base: str, token: str) -> str:
    """Start a run and read its events to the end; the last event's type."""
    headers = {"X-Thinkloop-Token": token, "content-type": "application/json"}
    request = urllib.request.Request(base + "/v1/runs", json.dumps(
        {"task": "Say hi in one word."}).encode(), headers)
    with urllib.request.urlopen(request, timeout=60) as r:
        run_id = json.load(r)["id"]
    last = ""
    events = urllib.request.Request(f"{base}/v1/runs/{run_id}/events", headers=headers)
    with urllib.request.urlopen(events, timeout=600) as r:
        for line in r:
            if line.startswith(b"data: "):
                last = json.loads(line[6:]).get("type", last)
    return last


def measure(src: str, settle_s: float, idle: bool) -> float:
    """Seconds from SIGINT to the process's exit."""
    port = _port()
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "THINKLOOP_HOME": home, "PYTHONPATH": src,
               "THINKLOOP_MODEL": os.environ.get("THINKLOOP_MODEL", "local")}
        proc = subprocess.Popen([sys.executable, "-m", "thinkloop", "serve", "--no-auth",
                                 "--port", str(port)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        token_file = Path(home) / "gateway" / f"{port}.token"
        deadline = time.monotonic() + 120
        while not token_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start: {proc.communicate()[1]!r}")
            time.sleep(0.1)
        time.sleep(0.5)  # the token file comes just before the socket listens
        if not idle:
            last = _one_run(f"http://127.0.0.1:{port}", token_file.read_text())
            print(f"  run ended with {last}", file=sys.stderr)
        time.sleep(settle_s)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=600)
        return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=30.0,
                        help="seconds between the run's end and SIGINT")
    parser.add_argument("--idle", action="store_true", help="no run: start, then SIGINT")
    parser.add_argument("--src", action="append", default=[],
                        help="another checkout's src directory, measured interleaved")
    args = parser.parse_args()
    sources = [str(Path(__file__).resolve().parents[1] / "src"), *args.src]
    seen: dict[str, list[float]] = {s: [] for s in sources}
    print(f"load before: {os.getloadavg()[0]:.2f}")
    for _ in range(args.rounds):
        for src in sources:
            seen[src].append(measure(src, args.settle, args.idle))
            print(f"  {src}: exit {seen[src][-1]:.2f}s", file=sys.stderr)
    for src, times in seen.items():
        print(f"{src}: median exit {statistics.median(times):.2f}s over {len(times)} "
              f"({', '.join(f'{t:.2f}' for t in times)})")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
