"""The gateway under load: N runs started at once over HTTP, each followed over SSE.

Three processes on loopback: a deterministic model server (``steps-3``: three ``echo`` tool
calls, then an answer; every reply delayed by ``--model-delay`` so runs overlap), the gateway
(``thinkloop.server.create_app`` under uvicorn, no auth, limits raised to N), and this client,
which starts N runs at once, follows each over SSE and measures:

* runs/s: N divided by the time from the first POST to the last run's end;
* event latency: receive time minus the event's own timestamp, p50 and p99 over all events
  (the client's own loop lag counts in it: its p99 is printed beside it, the lateness of a
  10 ms sleep in the client);
* memory per active run: (peak RSS of the gateway - its RSS after a warm-up run) / N;
* CPU per run: the gateway process's CPU time (its threads' too) over the runs / N, which
  the machine's load sways far less than runs/s; the client's own beside it.

The client shares the 2 cores with the gateway (not with the library baseline, which has no
client), so its own cost weighs on the gateway's runs/s and latency. By default it is the
project's own HTTP/1.1 client (``thinkloop.models.h1``: asyncio and httptools, a keep-alive
pool, SSE read a network read at a time, events decoded with orjson), as light as a fast
real client; ``--client aiohttp`` is the client of the figures before (aiohttp, SSE read
line by line, the json module), about 1.3x its CPU per run.

The baseline, measured in the same run, is the library alone: the same N runs started with
``Agent.start`` in one process against the same model server (runs/s, memory and CPU per
run).

Usage: python benchmarks/server.py [--runs 500] [--model-delay 0.2] [--repeat 3]
[--compare /path/to/other/checkout] [--as-served] [--tune-library] [--profile FILE]
[--memory-trace] [--client h1|aiohttp]

``--as-served``: the gateway under ``thinkloop serve``'s uvicorn configuration (its guarded
protocol: the connection budget, head timeout and cap; httptools when installed), not
uvicorn's defaults (httptools, unguarded). ``--http h11 httptools``: as served, once on each
parser, in turn (a gateway column each), to compare what the parser costs.

``--as-served`` also tunes the gateway's collector as ``thinkloop serve`` does
(``thinkloop.tuning.tune_gc``, when the checkout has it); ``--tune-library`` tunes the
library baseline's the same way, the fair comparison for that one cut.

``--compare TREE``: the gateway of another checkout (``TREE/src``) is measured too, in turn
with this one's and the library's, so before and after share the machine's load.

``--profile FILE``: a py-spy profile of the gateway while the runs go (speedscope JSON, or
collapsed stacks when FILE ends in ``.txt``; the GIL holder's samples: where its CPU goes).
``--memory-trace``: the gateway traces its allocations (tracemalloc: slower, so its runs/s
mean nothing) and prints what the active runs hold (a snapshot when the first run has ended
against one after the warm-up run), by line, on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import httpx
import orjson

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


def cpu_s(pid: int) -> float:
    """The process's CPU seconds so far, its threads' included (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def serve_gateway(port: int, runs: int, as_served: bool = False, http: str = "auto") -> None:
    """The gateway under uvicorn's defaults (httptools when installed), or ``as_served``:
    under ``thinkloop serve``'s uvicorn configuration (h11 and the connection budget, with
    the per-client cap raised to the load: every run comes from one client here)."""
    import uvicorn

    if os.environ.get("BENCH_TRACEMALLOC"):
        trace_on_signal()

    from thinkloop.server import GatewayConfig, create_app
    from thinkloop.tools.base import make_tool

    home = Path(tempfile.mkdtemp(prefix="tl-bench-"))
    agents = home / "agents.yaml"
    agents.write_text(AGENTS)
    config = GatewayConfig(no_auth=True, port=port, agents_file=agents, per_user_runs=runs,
                           max_runs=runs, store_url=str(home / "gateway.db"),
                           per_client_connections=runs * 2 + 10, keep_alive_s=60)
    app = create_app(config, tools=[make_tool(echo)])
    if as_served:
        from thinkloop.server.connections import uvicorn_config

        # (``http`` only when asked: an older checkout's uvicorn_config has no such option.)
        options = {} if http == "auto" else {"http": http}
        server = uvicorn.Server(uvicorn_config(app, config, **options))
        with contextlib.suppress(ImportError):  # an older checkout: thinkloop serve did not
            from thinkloop.api import tune_gc

            tune_gc()  # as thinkloop serve does
        server.run()
        return
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096,
                timeout_keep_alive=60)


def trace_on_signal() -> None:
    """Trace allocations; on SIGUSR1 take a snapshot, and print the growth since the last
    one (the first after the warm-up run, the second when the first run has ended) by line
    on stderr."""
    import signal
    import tracemalloc

    tracemalloc.start(1)
    snaps: list[tracemalloc.Snapshot] = []

    def snap(*_: object) -> None:
        snaps.append(tracemalloc.take_snapshot())
        if len(snaps) < 2:
            tracemalloc.reset_peak()
            return
        now, peak = tracemalloc.get_traced_memory()
        print(f"tracemalloc: traced {now / 1024:.0f} KB now, peak {peak / 1024:.0f} KB since "
              "the first snapshot", file=sys.stderr)
        stats = snaps[-1].compare_to(snaps[-2], "lineno")
        total = sum(s.size_diff for s in stats)
        print(f"tracemalloc: {total / 1024:.0f} KB more", file=sys.stderr)
        for s in stats[:40]:
            print(f"{s.size_diff / 1024:10.1f} KB {s.count_diff:+8d}  {s.traceback}",
                  file=sys.stderr)

    signal.signal(signal.SIGUSR1, snap)


def direct(runs: int, tune: bool = False) -> None:
    """The baseline: the same runs through the library alone, in this process (``tune``:
    with the collector tuned as ``thinkloop serve`` tunes it)."""
    from thinkloop.agent import Agent
    from thinkloop.tools.base import make_tool

    async def main() -> dict[str, float]:
        agent = Agent("openai:steps-3", tools=[make_tool(echo)], guard=False, max_steps=8)
        if tune:
            from thinkloop.tuning import tune_gc

            tune_gc()
        idle = rss_mb(os.getpid())
        peak = idle
        cpu0 = time.process_time()
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
        cpu = time.process_time() - cpu0
        watcher.cancel()
        assert all(r.status == "completed" for r in results), {r.status for r in results}
        return {"runs_per_s": runs / elapsed, "mb_per_run": (peak - idle) / runs,
                "cpu_ms_per_run": cpu * 1000 / runs}

    factory = uvloop_factory()  # the loop the gateway's uvicorn runs on ("auto")
    with asyncio.Runner(loop_factory=factory) as runner:
        print(json.dumps({**runner.run(main()), "uvloop": float(factory is not None)}))


def uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it is installed (uvicorn's ``loop="auto"`` picks it then): the
    library baseline runs on the same loop as the gateway."""
    try:
        uvloop = importlib.import_module("uvloop")  # optional: no stubs needed
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


# --- the client ----------------------------------------------------------------------------

class AiohttpClient:
    """The runs started and followed with aiohttp (``--client aiohttp``: the figures before
    the light client)."""

    def __init__(self, base: str, runs: int, token: str) -> None:
        self.base = base
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=runs * 2 + 10),
            timeout=aiohttp.ClientTimeout(total=600),
            headers={"X-Thinkloop-Token": token})  # a --no-auth gateway's process token

    async def start(self, body: dict[str, object]) -> str:
        async with self.session.post(f"{self.base}/v1/runs", json=body) as r:
            r.raise_for_status()
            return str((await r.json())["id"])

    async def follow(self, run_id: str, lat: list[float],
                     stats: dict[str, int] | None = None) -> str:
        """Read the run's SSE stream to its end; a dropped connection is resumed with
        Last-Event-ID, as any SSE client does (counted in ``stats``)."""
        last = 0
        while True:
            headers = {"Last-Event-ID": str(last)} if last else {}
            try:
                async with self.session.get(f"{self.base}/v1/runs/{run_id}/events",
                                            headers=headers) as r:
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

    async def aclose(self) -> None:
        await self.session.close()


class H1Client:
    """The runs started and followed with the project's own HTTP/1.1 client
    (``thinkloop.models.h1``: asyncio and httptools, keep-alive pool), the default: a
    client as light as a fast real one, so that the client's own CPU (200 SSE streams
    parsed on the same 2 cores) weighs less on the gateway's figures. An event's data is
    told from the end frame's by its ``ts`` (the end frame has none)."""

    def __init__(self, base: str, runs: int, token: str) -> None:
        from thinkloop.models.h1 import H1Transport

        self.base = base
        self.http = H1Transport()
        self.headers = {"x-thinkloop-token": token}

    async def start(self, body: dict[str, object]) -> str:
        raw = await self.http.post(f"{self.base}/v1/runs", orjson.dumps(body),
                                   {**self.headers, "content-type": "application/json"}, 600)
        return str(orjson.loads(raw)["id"])

    async def follow(self, run_id: str, lat: list[float],
                     stats: dict[str, int] | None = None) -> str:
        from thinkloop.core.errors import ModelConnectionError

        last = 0
        while True:
            url = f"{self.base}/v1/runs/{run_id}/events" + (f"?after={last}" if last else "")
            try:
                async for batch in self.http.get_sse_batches(url, self.headers, 600):
                    now = time.time()
                    for text in batch:
                        data = orjson.loads(text)
                        if "ts" not in data:
                            return str(data["status"])
                        lat.append(now - data["ts"])
                        last = data["id"]
            except ModelConnectionError:
                if stats is not None:
                    stats["reconnects"] = stats.get("reconnects", 0) + 1

    async def aclose(self) -> None:
        await self.http.aclose()


Client = H1Client | AiohttpClient
CLIENTS: dict[str, type[Client]] = {"h1": H1Client, "aiohttp": AiohttpClient}


async def drive(base: str, runs: int, gateway_pid: int, token: str,
                profile: str | None = None, trace: bool = False,
                client_kind: str = "h1") -> dict[str, float]:
    client = CLIENTS[client_kind](base, runs, token)
    try:
        warm = await client.start({"agent": "bench", "task": "warm up", "stream": False})
        await client.follow(warm, [])
        return await measure_runs(client, runs, gateway_pid, profile, trace)
    finally:
        await client.aclose()


async def measure_runs(client: Client, runs: int, gateway_pid: int,
                       profile: str | None, trace: bool) -> dict[str, float]:
    idle = peak = rss_mb(gateway_pid)
    latencies: list[float] = []
    stats: dict[str, int] = {}
    started, ended = 0, list[str]()
    if trace:
        os.kill(gateway_pid, signal.SIGUSR1)  # the snapshot after the warm-up run

    async def one(i: int) -> str:
        nonlocal started
        run_id = await client.start({"agent": "bench", "task": f"task {i}", "stream": False})
        started += 1
        status = await client.follow(run_id, latencies, stats)
        ended.append(run_id)
        if trace and len(ended) == 1 and started == runs:  # all started, the first ended
            os.kill(gateway_pid, signal.SIGUSR1)
        return status

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, rss_mb(gateway_pid))
            await asyncio.sleep(0.05)

    lags: list[float] = []

    async def lag() -> None:
        """The client's own loop lag: how late a 10 ms sleep wakes (an event read late
        by the client counts in its latency too)."""
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - t - 0.01)

    watcher = asyncio.create_task(watch())
    lagger = asyncio.create_task(lag())
    cpu0, mine0 = cpu_s(gateway_pid), time.process_time()
    async with spying(gateway_pid, profile):
        t0 = time.perf_counter()
        statuses = await asyncio.gather(*(one(i) for i in range(runs)))
        elapsed = time.perf_counter() - t0
    cpu, mine = cpu_s(gateway_pid) - cpu0, time.process_time() - mine0
    watcher.cancel()
    lagger.cancel()
    bad = [s for s in statuses if s != "completed"]
    lags.sort()
    assert not bad, f"{len(bad)} runs did not complete: {set(bad)}"
    latencies.sort()
    return {"runs_per_s": runs / elapsed, "events": len(latencies),
            "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
            "mb_per_run": (peak - idle) / runs, "idle_mb": idle,
            "cpu_ms_per_run": cpu * 1000 / runs, "reconnects": stats.get("reconnects", 0),
            "client_cpu_ms_per_run": mine * 1000 / runs,
            "client_lag_p99_ms": lags[int(len(lags) * 0.99) - 1] * 1000 if lags else 0.0}


@contextlib.asynccontextmanager
async def spying(pid: int, profile: str | None) -> AsyncIterator[None]:
    """py-spy on ``pid`` into ``profile`` while inside (nothing when None)."""
    if profile is None:
        yield
        return
    spy = await asyncio.create_subprocess_exec(
        # --gil: only the thread holding the GIL is sampled; without it a thread waiting for
        # the GIL back after a socket send counted as busy in the send (11% of the samples
        # at 800 runs "in" the SSE writes, against 1-2% with --gil).
        "py-spy", "record", "--pid", str(pid), "--rate", "200", "--gil", "--nonblocking",
        "--format",
        "raw" if profile.endswith(".txt") else "speedscope", "-o", profile,
        stdout=subprocess.DEVNULL)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        await spy.wait()


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
    parser.add_argument("--profile", metavar="FILE",
                        help="py-spy the gateway into FILE (.txt: collapsed stacks)")
    parser.add_argument("--memory-trace", action="store_true",
                        help="tracemalloc the gateway: what the active runs hold")
    parser.add_argument("--as-served", action="store_true",
                        help="run the gateway under thinkloop serve's uvicorn configuration")
    parser.add_argument("--http", nargs="+", choices=["auto", "h11", "httptools"],
                        help="as served, on each of these parsers in turn")
    parser.add_argument("--tune-library", action="store_true",
                        help="the library baseline with the collector tuned too (tune_gc)")
    parser.add_argument("--repeat", type=int, default=1, help="measure N times: medians")
    parser.add_argument("--client", choices=sorted(CLIENTS), default="h1",
                        help="the benchmark's own HTTP client (h1: thinkloop.models.h1)")
    parser.add_argument("--compare", metavar="TREE",
                        help="also measure the gateway of another checkout (its src/), in turn")
    parser.add_argument("--role", choices=["client", "model", "gateway", "direct"],
                        default="client", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "model":
        return serve_model(args.port, args.model_delay)
    if args.role == "gateway":
        return serve_gateway(args.port, args.runs, args.as_served or bool(args.http),
                             (args.http or ["auto"])[0])
    if args.role == "direct":
        return direct(args.runs, args.tune_library)

    model_port = free_port()
    env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1",
           "OPENAI_API_KEY": "bench"}
    if args.memory_trace:
        env["BENCH_TRACEMALLOC"] = "1"
    me = [sys.executable, __file__, "--runs", str(args.runs), "--model-delay",
          str(args.model_delay), *(["--as-served"] if args.as_served else []),
          *(["--tune-library"] if args.tune_library else [])]
    model = subprocess.Popen([*me, "--role", "model", "--port", str(model_port)], env=env)
    # Each measurement: a fresh THINKLOOP_HOME (the default store starts empty), in turn.
    trees: dict[str, tuple[str | None, str | None]] = (
        {http: (None, http) for http in args.http} if args.http
        else {"gateway": (None, None), **({"before": (args.compare, None)} if args.compare
                                          else {})})
    found: dict[str, list[dict[str, float]]] = {k: [] for k in [*trees, "library"]}
    loads = [os.getloadavg()[0]]
    try:
        for _ in range(args.repeat):
            for name, (tree, http) in trees.items():
                found[name].append(measure_gateway(me, env, tree, args, http))
            home = {**env, "THINKLOOP_HOME": tempfile.mkdtemp(prefix="tl-home-")}
            found["library"].append(json.loads(subprocess.run(
                [*me, "--role", "direct"], env=home, check=True, capture_output=True,
                text=True).stdout))
            loads.append(os.getloadavg()[0])
    finally:
        model.terminate()
        model.wait(20)
    report(args, found, loads)


def measure_gateway(me: list[str], env: dict[str, str], tree: str | None,
                    args: argparse.Namespace, http: str | None = None) -> dict[str, float]:
    """One gateway process (from ``tree``'s source when given; on the parser ``http`` when
    given) under the load, then gone."""
    port = free_port()
    env = {**env, "THINKLOOP_HOME": tempfile.mkdtemp(prefix="tl-home-")}
    if tree is not None:
        # before what was on the path (the tree's thinkloop first; uvloop, say, still found)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(Path(tree) / "src"), env.get("PYTHONPATH")) if p)
    gateway = subprocess.Popen([*me, "--role", "gateway", "--port", str(port),
                                *(["--http", http] if http else [])], env=env)
    try:
        wait_up(f"http://127.0.0.1:{port}/healthz", gateway)
        time.sleep(0.5)
        token = (Path(env["THINKLOOP_HOME"]) / "gateway" / f"{port}.token").read_text()
        return asyncio.run(drive(f"http://127.0.0.1:{port}", args.runs, gateway.pid,
                                 token.strip(), args.profile, args.memory_trace, args.client))
    finally:
        gateway.terminate()
        gateway.wait(20)


def report(args: argparse.Namespace, found: dict[str, list[dict[str, float]]],
           loads: list[float]) -> None:
    def med(name: str, key: str) -> float:
        return statistics.median(m[key] for m in found[name])

    def ratio(name: str) -> float:
        return statistics.median(g["runs_per_s"] / b["runs_per_s"]
                                 for g, b in zip(found[name], found["library"], strict=True))

    gws = [n for n in found if n != "library"]
    steps = 4  # model calls per run: three echo steps and the answer
    print(f"{args.runs} runs at once, {steps} model calls each, model reply delay "
          f"{args.model_delay:g}s ({os.cpu_count()} cores); medians of {args.repeat}, "
          f"load {min(loads):.1f}-{max(loads):.1f}"
          + (f"; before: {args.compare}" if args.compare else "")
          + ("; as served" if args.as_served or args.http else "")
          + ("; library with tune_gc" if args.tune_library else "")
          + ("; uvloop (gateway and library)" if med("library", "uvloop") else "")
          + f"; client {args.client}\n")
    print(f"{'':28}" + "".join(f"{n:>14}" for n in gws) + f"{'library':>14}")
    print(f"{'runs/s':28}" + "".join(f"{med(n, 'runs_per_s'):>14.1f}" for n in [*gws, "library"]))
    print(f"{'runs/s ratio to library':28}" + "".join(f"{ratio(n):>14.2f}" for n in gws))
    print(f"{'CPU per run (ms)':28}"
          + "".join(f"{med(n, 'cpu_ms_per_run'):>14.2f}" for n in [*gws, "library"]))
    print(f"{'CPU ratio to library':28}" + "".join(
        f"{med(n, 'cpu_ms_per_run') / med('library', 'cpu_ms_per_run'):>14.2f}" for n in gws))
    print(f"{'memory per active run (MB)':28}"
          + "".join(f"{med(n, 'mb_per_run'):>14.3f}" for n in [*gws, "library"]))
    print(f"{'memory ratio to library':28}" + "".join(
        f"{med(n, 'mb_per_run') / med('library', 'mb_per_run'):>14.2f}" for n in gws))
    for key, label in (("p50_ms", "event latency p50 (ms)"), ("p99_ms", "event latency p99 (ms)"),
                       ("client_lag_p99_ms", "client loop lag p99 (ms)"),
                       ("client_cpu_ms_per_run", "client CPU per run (ms)"),
                       ("events", "events delivered"), ("reconnects", "SSE reconnects"),
                       ("idle_mb", "gateway idle RSS (MB)")):
        print(f"{label:28}" + "".join(f"{med(n, key):>14.1f}" for n in gws))
    print("\neach run (runs/s ratio, memory ratio, p99 ms):")
    for n in gws:
        cells = [f"{g['runs_per_s'] / b['runs_per_s']:.2f} {g['mb_per_run'] / b['mb_per_run']:.2f} "
                 f"{g['p99_ms']:.0f}" for g, b in zip(found[n], found["library"], strict=True)]
        print(f"  {n}: " + " | ".join(cells))

if __name__ == "__main__":
    main()
