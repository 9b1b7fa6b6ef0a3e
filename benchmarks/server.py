"""The gateway under load: N runs started at once over HTTP, each followed over SSE.

Three processes on loopback: a deterministic model server (``steps-3``: three ``echo`` tool
calls, then an answer; every reply delayed by ``--model-delay`` so runs overlap), the gateway
(``thinkloop.server.create_app`` under uvicorn, no auth, limits raised to N), and this client,
which starts N runs at once, follows each over SSE and measures:

* runs/s: N divided by the time from the first POST to the last run's end;
* event latency: receive time minus the event's own timestamp, p50 and p99 over all events;
* memory per active run: (peak RSS of the gateway - its RSS after a warm-up run) / N.

The baseline, measured in the same run, is the library alone: the same N runs started with
``Agent.start`` in one process against the same model server (runs/s and memory per run).

Usage: python benchmarks/server.py [--runs 500] [--model-delay 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx

AGENTS = """
agents:
  bench:
    model: openai:steps-3
    tools: none
    memory: false
    guards: false
    max_steps: 8
"""


def echo(text: str) -> str:
    """Repeat the text.

    Args:
        text: what to repeat
    """
    return text


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the processes -------------------------------------------------------------------------

def serve_model(port: int, delay_s: float) -> None:
    """The loopback OpenAI-compatible server, every automatic reply delayed by ``delay_s``."""
    from thinkloop.testing.openai_server import OpenAIServer

    async def main() -> None:
        server = await OpenAIServer(port, record=False, delay_s=delay_s).serve()
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def serve_gateway(port: int, runs: int) -> None:
    import uvicorn

    from thinkloop.server import GatewayConfig, create_app
    from thinkloop.tools.base import make_tool

    home = Path(tempfile.mkdtemp(prefix="tl-bench-"))
    agents = home / "agents.yaml"
    agents.write_text(AGENTS)
    config = GatewayConfig(no_auth=True, port=port, agents_file=agents, per_user_runs=runs,
                           max_runs=runs, store_url=str(home / "gateway.db"))
    uvicorn.run(create_app(config, tools=[make_tool(echo)]), host="127.0.0.1", port=port,
                log_level="warning", backlog=4096, timeout_keep_alive=60)


def direct(runs: int) -> None:
    """The baseline: the same runs through the library alone, in this process."""
    from thinkloop.agent import Agent
    from thinkloop.tools.base import make_tool

    async def main() -> dict[str, float]:
        agent = Agent("openai:steps-3", tools=[make_tool(echo)], guard=False, max_steps=8)
        idle = rss_mb(os.getpid())
        peak = idle
        t0 = time.perf_counter()
        handles = [agent.start(f"task {i}", events=False, stream_model=False)
                   for i in range(runs)]

        async def watch() -> None:
            nonlocal peak
            while True:
                peak = max(peak, rss_mb(os.getpid()))
                await asyncio.sleep(0.05)

        watcher = asyncio.create_task(watch())
        results = await asyncio.gather(*(h.result() for h in handles))
        elapsed = time.perf_counter() - t0
        watcher.cancel()
        assert all(r.status == "completed" for r in results), {r.status for r in results}
        return {"runs_per_s": runs / elapsed, "mb_per_run": (peak - idle) / runs}

    print(json.dumps(asyncio.run(main())))


# --- the client ----------------------------------------------------------------------------

async def follow(session: aiohttp.ClientSession, base: str, run_id: str, lat: list[float],
                 stats: dict[str, int] | None = None) -> str:
    """Read the run's SSE stream to its end; a dropped connection is resumed with
    Last-Event-ID, as any SSE client does (counted in ``stats``)."""
    last = 0
    while True:
        headers = {"Last-Event-ID": str(last)} if last else {}
        try:
            async with session.get(f"{base}/v1/runs/{run_id}/events", headers=headers) as r:
                event_type = ""
                async for raw in r.content:
                    line = raw.decode().rstrip("\r\n")
                    if line.startswith("event:"):
                        event_type = line[6:].strip()
                    elif line.startswith("data:"):
                        data = json.loads(line[5:])
                        if event_type == "end":
                            return str(data["status"])
                        lat.append(time.time() - data["ts"])
                        last = data["id"]
        except aiohttp.ClientError:
            if stats is not None:
                stats["reconnects"] = stats.get("reconnects", 0) + 1


async def drive(base: str, runs: int, gateway_pid: int, token: str) -> dict[str, float]:
    connector = aiohttp.TCPConnector(limit=runs * 2 + 10)
    timeout = aiohttp.ClientTimeout(total=600)
    headers = {"X-Thinkloop-Token": token}  # a --no-auth gateway's process token
    async with aiohttp.ClientSession(connector=connector, timeout=timeout,
                                     headers=headers) as session:
        body = {"agent": "bench", "task": "warm up", "stream": False}
        async with session.post(f"{base}/v1/runs", json=body) as r:
            warm = (await r.json())["id"]
        await follow(session, base, warm, [])
        idle = rss_mb(gateway_pid)
        peak = idle
        latencies: list[float] = []
        stats: dict[str, int] = {}

        async def one(i: int) -> str:
            body = {"agent": "bench", "task": f"task {i}", "stream": False}
            async with session.post(f"{base}/v1/runs", json=body) as r:
                r.raise_for_status()
                run_id = (await r.json())["id"]
            return await follow(session, base, run_id, latencies, stats)

        async def watch() -> None:
            nonlocal peak
            while True:
                peak = max(peak, rss_mb(gateway_pid))
                await asyncio.sleep(0.05)

        watcher = asyncio.create_task(watch())
        t0 = time.perf_counter()
        statuses = await asyncio.gather(*(one(i) for i in range(runs)))
        elapsed = time.perf_counter() - t0
        watcher.cancel()
    bad = [s for s in statuses if s != "completed"]
    assert not bad, f"{len(bad)} runs did not complete: {set(bad)}"
    latencies.sort()
    return {"runs_per_s": runs / elapsed, "events": len(latencies),
            "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
            "mb_per_run": (peak - idle) / runs, "idle_mb": idle,
            "reconnects": stats.get("reconnects", 0)}


def wait_up(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url} exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            httpx.get(url, timeout=1)
            return
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--model-delay", type=float, default=0.2)
    parser.add_argument("--role", choices=["client", "model", "gateway", "direct"],
                        default="client", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "model":
        return serve_model(args.port, args.model_delay)
    if args.role == "gateway":
        return serve_gateway(args.port, args.runs)
    if args.role == "direct":
        return direct(args.runs)

    model_port, gw_port = free_port(), free_port()
    env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1",
           "OPENAI_API_KEY": "bench", "THINKLOOP_HOME": tempfile.mkdtemp(prefix="tl-home-")}
    me = [sys.executable, __file__, "--runs", str(args.runs), "--model-delay",
          str(args.model_delay)]
    model = subprocess.Popen([*me, "--role", "model", "--port", str(model_port)], env=env)
    gateway = subprocess.Popen([*me, "--role", "gateway", "--port", str(gw_port)], env=env)
    try:
        wait_up(f"http://127.0.0.1:{gw_port}/healthz", gateway)
        time.sleep(0.5)
        token = (Path(env["THINKLOOP_HOME"]) / "gateway" / f"{gw_port}.token").read_text()
        gw = asyncio.run(drive(f"http://127.0.0.1:{gw_port}", args.runs, gateway.pid,
                               token.strip()))
        base = json.loads(subprocess.run([*me, "--role", "direct"], env=env, check=True,
                                         capture_output=True, text=True).stdout)
    finally:
        for p in (gateway, model):
            p.terminate()
            p.wait(20)
    steps = 4  # model calls per run: three echo steps and the answer
    print(f"{args.runs} runs at once, {steps} model calls each, model reply delay "
          f"{args.model_delay:g}s ({os.cpu_count()} cores)\n")
    print(f"{'':28}{'gateway (HTTP+SSE)':>20}{'library alone':>16}{'ratio':>8}")
    print(f"{'runs/s':28}{gw['runs_per_s']:>20.1f}{base['runs_per_s']:>16.1f}"
          f"{gw['runs_per_s'] / base['runs_per_s']:>8.2f}")
    print(f"{'memory per active run (MB)':28}{gw['mb_per_run']:>20.3f}"
          f"{base['mb_per_run']:>16.3f}")
    print(f"{'event latency p50 (ms)':28}{gw['p50_ms']:>20.1f}")
    print(f"{'event latency p99 (ms)':28}{gw['p99_ms']:>20.1f}")
    print(f"{'events delivered':28}{gw['events']:>20d}")
    print(f"{'SSE reconnects (resumed)':28}{gw['reconnects']:>20d}")
    print(f"{'gateway idle RSS (MB)':28}{gw['idle_mb']:>20.1f}")


if __name__ == "__main__":
    main()
