"""What uvicorn's HTTP parser costs the gateway per request: ``thinkloop serve``'s guarded
protocol on h11 and on httptools, in turn, in the same run.

Each round starts the gateway as served (``benchmarks/server.py --role gateway --http X``:
the connection budget, head timeout and head cap of ``thinkloop.server.connections``) and
sends it ``--requests`` keep-alive ``GET /healthz`` over ``--connections`` connections; the
figure is the gateway process's CPU time (its threads' too) per request. The request is the
cheapest the gateway answers, so the parser and uvicorn's framing are most of it.

Usage: python benchmarks/server_parser.py [--requests 4000] [--connections 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from server import cpu_s, free_port, wait_up

SERVER = str(Path(__file__).with_name("server.py"))


def one(http: str, requests: int, connections: int) -> float:
    """CPU microseconds per request of a gateway on ``http``."""
    port = free_port()
    env = {**os.environ, "THINKLOOP_HOME": tempfile.mkdtemp(prefix="tl-parser-"),
           "OPENAI_API_KEY": "bench"}
    gateway = subprocess.Popen([sys.executable, SERVER, "--role", "gateway", "--port",
                                str(port), "--http", http], env=env)
    try:
        wait_up(f"http://127.0.0.1:{port}/healthz", gateway)
        time.sleep(0.5)

        async def drive() -> None:
            connector = aiohttp.TCPConnector(limit=connections)
            async with aiohttp.ClientSession(connector=connector) as session:
                async def client() -> None:
                    for _ in range(requests // connections):
                        async with session.get(f"http://127.0.0.1:{port}/healthz") as r:
                            await r.read()

                await asyncio.gather(*(client() for _ in range(connections)))

        cpu0 = cpu_s(gateway.pid)
        asyncio.run(drive())
        return (cpu_s(gateway.pid) - cpu0) * 1e6 / requests
    finally:
        gateway.terminate()
        gateway.wait(20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    found: dict[str, list[float]] = {"h11": [], "httptools": []}
    loads = [os.getloadavg()[0]]
    for _ in range(args.repeat):
        for http, cells in found.items():
            cells.append(one(http, args.requests, args.connections))
        loads.append(os.getloadavg()[0])
    base = statistics.median(found["h11"])
    print(f"{args.requests} GET /healthz over {args.connections} connections, as served; "
          f"medians of {args.repeat} ({os.cpu_count()} cores, load {min(loads):.1f}-"
          f"{max(loads):.1f})\n")
    print(f"{'parser':<12}{'CPU us/request':>16}{'ratio to h11':>14}  each round")
    for http, cells in found.items():
        print(f"{http:<12}{statistics.median(cells):>16.0f}"
              f"{statistics.median(cells) / base:>14.2f}  " + " ".join(f"{c:.0f}" for c in cells))


if __name__ == "__main__":
    main()
