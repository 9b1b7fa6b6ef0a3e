"""Client CPU per streamed chunk: a lean agent streams a long answer and its events are read.

One loopback server in a subprocess answers every request with a text of ``--chunks``
8-character SSE events (the test server's token-sized pieces, each a chunked-body part
written on its own). Each sample runs ``--runs`` runs (``--concurrency`` at a time) through
``agent.start()`` (the streaming path the gateway and the CLI take), reading every event,
and reports this process's CPU per streamed SSE event; the same answer fetched without
streaming (``agent.run``) is the baseline measured in the same repeat.

Usage: python benchmarks/stream_chunks.py [--chunks 400] [--runs 50] [--concurrency 1 50]
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

import overhead  # port_arg

from thinkloop import Agent
from thinkloop.models.openai_compat import OpenAICompatModel

SERVER = """
import sys
import thinkloop.testing.openai_server as s
text = "abcdefgh" * int(sys.argv[1])
s.auto_reply = lambda request: s.completion(text, model="m")
sys.argv = [sys.argv[0], "--port", sys.argv[2]]
s.main()
"""


def start_server(chunks: int, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(chunks), str(port)],
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()
    return proc


async def cpu_of(runs: int, concurrency: int, one: object) -> float:
    sem = asyncio.Semaphore(concurrency)

    async def go() -> None:
        async with sem:
            await one()  # type: ignore[operator]

    cpu = time.process_time()
    await asyncio.gather(*(go() for _ in range(runs)))
    return time.process_time() - cpu


async def measure(args: argparse.Namespace) -> None:
    model = OpenAICompatModel("m", base_url=f"http://127.0.0.1:{args.port}/v1", api_key="x")
    agent = Agent(model, guard=False)

    async def streamed() -> None:
        async for _ in agent.start("go"):
            pass

    async def whole() -> None:
        await agent.run("go")

    await cpu_of(10, 10, streamed)
    await cpu_of(10, 10, whole)
    for conc in args.concurrency:
        per: dict[str, list[float]] = {"stream": [], "whole": []}
        for _ in range(args.repeat):
            per["stream"].append(await cpu_of(args.runs, conc, streamed))
            per["whole"].append(await cpu_of(args.runs, conc, whole))
        s, w = statistics.median(per["stream"]), statistics.median(per["whole"])
        events = args.runs * (args.chunks + 3)
        print(f"concurrency {conc:>4}: streamed {s / args.runs * 1e3:7.2f} ms/run, "
              f"whole {w / args.runs * 1e3:7.2f} ms/run, "
              f"streaming costs {(s - w) / events * 1e6:6.1f} µs per SSE event "
              f"({s / events * 1e6:.1f} µs all in)")
    await model.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=400)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 50])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--port", type=overhead.port_arg, default="0")
    args = parser.parse_args()
    os.environ.setdefault("THINKLOOP_HOME", tempfile.mkdtemp())
    server = start_server(args.chunks, args.port)
    try:
        asyncio.run(measure(args))
    finally:
        server.terminate()
        server.wait()
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
