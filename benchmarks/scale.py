"""Scaling out: N runs through one gateway and 1, 2, 4 workers, against the library alone.

Processes on loopback: the deterministic model server (``steps-3``: three ``echo`` calls,
then an answer, each reply delayed by ``--model-delay``), a gateway (``thinkloop serve
--queue``), W workers (``thinkloop worker``; their ``echo`` tool is a plugin on their path),
the real Redis and PostgreSQL of 127.0.0.1, and this client. For each W the client starts N
runs at once over HTTP, follows each over SSE, and measures:

* runs/s: N divided by the time from the first POST to the last run's end;
* queue wait: the run's ``run.started`` timestamp (on its worker) minus the time its POST was
  sent, p50 and p99;
* event latency: receive time minus the event's own timestamp, p99 over all events; and
  where it goes: the same at Redis (a probe process reading every run's stream as the
  worker writes it: the worker's share), and how late this client's own loop wakes (a
  client starved of CPU reads late whatever the fleet does);
* CPU per run: the gateway's and workers' CPU time (``/proc``) over the batch, divided by N
  (and the gateway's part alone; and this client's, which shares the cores).

The probe shares the cores with the fleet it measures (it reads and parses every event of
every run once more), and on 2 cores a neighbour that wakes often makes every other process
dearer: it runs only with ``--probe`` (the "at Redis" column), and the CPU figures of those
rounds carry its load. How much a neighbour alone adds is measured in every round: the library
alone beside a process that spins 1 ms and sleeps 1 ms ("beside a spinner"), its own code
unchanged.

The baseline, measured in the same run and interleaved with the fleets, is the library
alone: the same N runs with ``Agent.start``, recorded in PostgreSQL as the workers record them
(run rows, checkpoints, audit log), on a worker's event loop (asyncio's), the collector tuned
as a worker tunes it; in one process, and in W processes at once (each N/W runs) beside a
fleet of W workers. "Queueing CPU per run" is the fleet's CPU per run minus the library's in
as many processes: what the queue, the Redis event streams, HTTP and SSE add, and not what W
processes cost by themselves (each records its runs in smaller batches; W interpreters share
the cores). Each fleet is set against the library of its own round, and the table gives the
median of those differences and their range (the machine's speed drifts between rounds by
more than the queueing costs, so a difference of medians from different rounds is noisier).
Against the library in one process it is shown too ("vs 1 proc", a difference of medians).

At most ``--active`` runs execute at once, in the fleet (``worker.concurrency`` is
``active // W``) and in the baseline alike; by default all 200 (each process holds its runs'
locks on one PostgreSQL connection, so 200 runs in progress fit PostgreSQL's default
``max_connections`` of 100).

On a machine with fewer cores than processes the ratio is bounded by the cores, not by the
design: read the CPU per run to extrapolate to N machines.

``--compare DIR`` also runs each fleet from another source tree (e.g. the last release's
``src``), interleaved with this one's in the same run, so both see the same machine load;
``--compare A,B`` runs each of several trees in turn (rows "(1: before)", "(2: before)").

``--repeat N`` runs each fleet N times, interleaved, and shows the median of each figure.

Usage: python benchmarks/scale.py [--runs 200] [--active 200] [--model-delay 0.2]
                                  [--workers 1,2,4] [--compare OTHER/src] [--repeat 1]
                                  [--probe]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import httpx

PG = os.environ.get("THINKLOOP_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("THINKLOOP_TEST_REDIS", "redis://127.0.0.1:6379/0")
AGENTS = """
agents:
  bench:
    model: openai:steps-3
    tools: none
    memory: false
    guards: false
    max_steps: 8
"""
PLUGIN = '''
def echo(text: str) -> str:
    """Repeat the text."""
    return text
'''
STREAM = {"Accept": "text/event-stream"}
CLI = [sys.executable, "-c", "from thinkloop.cli.app import main; main()"]
# --profile DIR: each fleet process under cProfile, its profile written to DIR/<pid>.prof
# when it stops (SIGTERM ends gateways and workers gracefully). Profiled from SIGUSR1 on,
# which the client sends after its warm-up run: the batch alone, not the imports and start.
# CPU time, not wall time: on a loaded machine a process waits for a core inside any call.
PROFILED = [sys.executable, "-c", """
import cProfile, os, signal, time
from thinkloop.cli.app import main
prof = cProfile.Profile(time.process_time)
signal.signal(signal.SIGUSR1, lambda *_: prof.enable())
try:
    main()
finally:
    prof.disable()
    prof.dump_stats(os.path.join(os.environ["BENCH_PROFILE"], f"{os.getpid()}.prof"))
"""]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (and its reaped children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[max(0, int(len(values) * q) - 1)] if values else float("nan")


def plugin_site(root: Path) -> Path:
    site = root / "site"
    dist = site / "bench_echo-1.0.dist-info"
    dist.mkdir(parents=True)
    (site / "bench_echo.py").write_text(PLUGIN)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bench-echo\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[thinkloop.tools]\necho = bench_echo:echo\n")
    return site


# --- the library alone -----------------------------------------------------------------------

def direct(runs: int, db: str, active: int) -> None:
    from thinkloop.agent import Agent
    from thinkloop.api import tune_gc
    from thinkloop.tools.base import make_tool

    def echo(text: str) -> str:
        """Repeat the text."""
        return text

    async def main() -> dict[str, float]:
        agent = Agent("openai:steps-3", tools=[make_tool(echo)], guard=False, max_steps=8,
                      store=db)
        await agent.run("warm up")
        # As a worker does once it has started (workers/worker.py): a host of many runs
        # tunes the collector, and the baseline must not pay a GC cost the workers do not.
        tune_gc()
        before = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        slots = asyncio.Semaphore(active)

        async def one(i: int) -> Any:
            async with slots:
                return await agent.start(f"task {i}", events=False, stream_model=False)

        results = await asyncio.gather(*(one(i) for i in range(runs)))
        elapsed = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_SELF)
        await agent.aclose()
        assert all(r.status == "completed" for r in results), {r.status for r in results}
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        return {"runs_per_s": runs / elapsed, "cpu_ms_per_run": cpu / runs * 1000}

    # On asyncio's own loop, as a worker runs (docs/scaling.md: uvloop measured, not taken).
    print(json.dumps(asyncio.run(main())))


# --- where event latency goes: at Redis, in the client --------------------------------------

def probe(prefix: str) -> None:
    """Follow every active run's stream in Redis until SIGTERM; print the latencies at Redis
    (read time minus the event's timestamp) as JSON."""
    import signal

    from redis.asyncio import Redis

    async def main() -> list[float]:
        redis = Redis.from_url(REDIS)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        last: dict[bytes, bytes] = {}
        lat: list[float] = []
        while not stop.is_set():
            for run in await redis.smembers(f"{prefix}:active"):
                last.setdefault(b"%s:ev:%s" % (prefix.encode(), run), b"0-0")
            if not last:
                await asyncio.sleep(0.01)
                continue
            got = await redis.xread(dict(last), count=1000, block=20)
            now = time.time()
            for key, entries in got or ():
                for eid, fields in entries:
                    last[key] = eid
                    if b"e" in fields:
                        lat.append(now - json.loads(fields[b"e"])["ts"])
                    else:
                        last.pop(key, None)  # ended: stop reading it
        await redis.aclose()
        return lat

    lat = asyncio.run(main())
    print(json.dumps({"redis_p50_ms": pct(lat, 0.5) * 1000, "redis_p99_ms": pct(lat, 0.99) * 1000,
                      "n": len(lat)}))


# A neighbour on the cores: spins 1 ms, sleeps 1 ms (half a core, and a wake-up per ms, as a
# busy gateway, Redis or client is to a worker beside it).
NEIGHBOUR = """
import time
while True:
    t = time.perf_counter()
    while time.perf_counter() - t < 0.001:
        pass
    time.sleep(0.001)
"""


async def lag_probe(lags: list[float], every_s: float = 0.01) -> None:
    """How late this loop wakes a coroutine sleeping ``every_s``."""
    while True:
        t0 = time.perf_counter()
        await asyncio.sleep(every_s)
        lags.append(time.perf_counter() - t0 - every_s)


# --- a fleet -----------------------------------------------------------------------------------

async def frames(r: aiohttp.ClientResponse, sent: float, lat: list[float],
                 waits: list[float], seen: list[int]) -> str | None:
    """Read an SSE response of a run's events: its end status, or None if it was cut
    (``seen[0]``: the last event's id)."""
    kind = ""
    async for raw in r.content:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data = json.loads(line[5:])
            if kind == "end":
                return str(data["status"])
            lat.append(time.time() - data["ts"])
            if data["type"] == "run.started" and data["id"] == 1:
                waits.append(data["ts"] - sent)
            seen[0] = data["id"]
    return None


async def follow(session: aiohttp.ClientSession, base: str, run_id: str, sent: float,
                 lat: list[float], waits: list[float], seen: list[int] | None = None) -> str:
    seen = seen or [0]
    while True:
        headers = {"Last-Event-ID": str(seen[0])} if seen[0] else {}
        with contextlib.suppress(aiohttp.ClientError):
            async with session.get(f"{base}/v1/runs/{run_id}/events", headers=headers) as r:
                status = await frames(r, sent, lat, waits, seen)
                if status is not None:
                    return status


async def drive(base: str, runs: int, pids: list[int], token: str,
                profiled: bool = False) -> dict[str, float]:
    connector = aiohttp.TCPConnector(limit=runs * 2 + 10)
    # The --no-auth gateway's token (from its file): a program that starts runs sends it.
    async with aiohttp.ClientSession(connector=connector, headers={"X-Thinkloop-Token": token},
                                     timeout=aiohttp.ClientTimeout(total=900)) as session:
        async def one(i: int, lat: list[float], waits: list[float]) -> str:
            body = {"agent": "bench", "task": f"task {i}", "stream": False}
            sent = time.time()
            seen = [0]
            # One request: the POST answers with the run's stream (a tree without that
            # answers 202 and its id, and the stream is a second request).
            async with session.post(f"{base}/v1/runs", json=body, headers=STREAM) as r:
                r.raise_for_status()
                if r.content_type != "text/event-stream":
                    run_id = (await r.json())["id"]
                else:
                    run_id = r.headers["Location"].rsplit("/", 1)[1]
                    with contextlib.suppress(aiohttp.ClientError):
                        status = await frames(r, sent, lat, waits, seen)
                        if status is not None:
                            return status
            return await follow(session, base, run_id, sent, lat, waits, seen)

        async def warm(i: int) -> str:
            body = {"agent": "bench", "task": f"warm {i}", "stream": False}
            async with session.post(f"{base}/v1/runs", json=body) as r:
                run_id = (await r.json())["id"]
            await follow(session, base, run_id, time.time(), [], [])
            async with session.get(f"{base}/v1/runs/{run_id}") as r:
                return str((await r.json()).get("worker"))

        # Warm up every worker (its agent built, its connections open): a worker's first run
        # builds its agent, which one warm-up run left to the batch on all but one worker.
        warmed: set[str] = set()
        for rnd in range(30):
            if len(warmed) >= len(pids) - 1:
                break
            warmed.update(await asyncio.gather(*(warm(rnd * 10 + k) for k in range(len(pids)))))
        if profiled:  # the profiles cover the batch from here
            for p in pids:
                os.kill(p, signal.SIGUSR1)
        cpu0 = [cpu_s(p) for p in pids]
        own0 = time.process_time()
        lat: list[float] = []
        waits: list[float] = []
        lags: list[float] = []
        lagging = asyncio.get_running_loop().create_task(lag_probe(lags))
        t0 = time.perf_counter()
        statuses = await asyncio.gather(*(one(i, lat, waits) for i in range(runs)))
        elapsed = time.perf_counter() - t0
        cpu = [cpu_s(p) - c for p, c in zip(pids, cpu0, strict=True)]
        own = time.process_time() - own0
        lagging.cancel()
    bad = [s for s in statuses if s != "completed"]
    assert not bad, f"{len(bad)} runs did not complete: {set(bad)}"
    return {"runs_per_s": runs / elapsed, "wait_p50_ms": statistics.median(waits) * 1000,
            "wait_p99_ms": pct(waits, 0.99) * 1000, "lat_p99_ms": pct(lat, 0.99) * 1000,
            "cpu_ms_per_run": sum(cpu) / runs * 1000,
            "gateway_ms_per_run": cpu[0] / runs * 1000,  # the first pid is the gateway's
            "client_lag_p99_ms": pct(lags, 0.99) * 1000,
            "client_ms_per_run": own / runs * 1000}


def library(procs: int, runs: int, active: int, db: str, env: dict[str, str],
            neighbour: bool = False) -> dict[str, float]:
    """The library alone: ``runs`` runs in ``procs`` processes at once (each its share), as W
    workers share them; their CPU summed per run (``neighbour``: beside :data:`NEIGHBOUR`)."""
    if neighbour:
        spin = subprocess.Popen([sys.executable, "-c", NEIGHBOUR])
        try:
            return library(procs, runs, active, db, env)
        finally:
            spin.kill()
            spin.wait()
    share = runs // procs
    children = [subprocess.Popen(
        [sys.executable, __file__, "--role", "direct", "--runs", str(share), "--active",
         str(max(1, active // procs)), "--db", db], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(procs)]
    got = [json.loads(c.communicate(timeout=600)[0]) for c in children]
    if any(c.returncode for c in children):
        raise RuntimeError("a library-alone process failed")
    elapsed = max(share / g["runs_per_s"] for g in got)
    return {"runs_per_s": share * procs / elapsed,
            "cpu_ms_per_run": sum(g["cpu_ms_per_run"] for g in got) / procs}


def wait_ready(base: str, workers: int, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise RuntimeError("a fleet process exited")
        with contextlib.suppress(httpx.HTTPError, ValueError):
            if httpx.get(base + "/healthz", timeout=2).json().get("workers", 0) >= workers:
                return
        time.sleep(0.2)
    raise RuntimeError("the fleet did not come up")


def fleet(workers: int, runs: int, active: int, env: dict[str, str],
          root: Path, probe: bool = False) -> dict[str, float]:
    schema, prefix = "bench_" + uuid.uuid4().hex[:8], "bench-" + uuid.uuid4().hex[:8]
    env = {**env, "THINKLOOP_DATABASE_URL": f"{PG}?schema={schema}",
           "THINKLOOP_QUEUE_URL": REDIS, "THINKLOOP_WORKER_PREFIX": prefix,
           "THINKLOOP_GATEWAY_PER_USER_RUNS": str(runs + 10),
           "THINKLOOP_GATEWAY_MAX_RUNS": str(runs + 10),
           # One client address opens a POST and an SSE stream per run.
           "THINKLOOP_GATEWAY_PER_CLIENT_CONNECTIONS": str(runs * 2 + 20),
           "THINKLOOP_WORKER_CONCURRENCY": str(max(1, active // workers))}
    port = free_port()
    agents = str(root / "agents.yaml")
    log = open(root / f"fleet-{workers}.log", "ab")  # noqa: SIM115 (closed with the procs)
    cli = PROFILED if env.get("BENCH_PROFILE") else CLI
    procs = [subprocess.Popen([*cli, "serve", "--no-auth", "--port", str(port), "--agents",
                               agents], env=env, stdout=log, stderr=log)]
    procs += [subprocess.Popen([*cli, "worker", "--agents", agents, "--name", f"w{i}"],
                               env=env, stdout=log, stderr=log) for i in range(workers)]
    base = f"http://127.0.0.1:{port}"
    watcher: subprocess.Popen[str] | None = None
    try:
        wait_ready(base, workers, procs)
        token = (Path(env["THINKLOOP_HOME"]) / "gateway" / f"{port}.token").read_text()
        if probe:
            watcher = subprocess.Popen([sys.executable, __file__, "--role", "probe",
                                        "--prefix", prefix], env=env, stdout=subprocess.PIPE,
                                       text=True)
        got = asyncio.run(drive(base, runs, [p.pid for p in procs], token,
                               bool(env.get("BENCH_PROFILE"))))
        got["redis_p99_ms"] = float("nan")
        if watcher is not None:
            watcher.terminate()
            got.update(json.loads(watcher.communicate(timeout=30)[0]))
        return got
    finally:
        if watcher is not None and watcher.poll() is None:
            watcher.kill()
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
        log.close()
        asyncio.run(cleanup(schema, prefix))


async def cleanup(schema: str, prefix: str) -> None:
    import asyncpg
    from redis.asyncio import Redis

    conn = await asyncpg.connect(PG)
    await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    await conn.close()
    redis = Redis.from_url(REDIS)
    keys = [k async for k in redis.scan_iter(match=f"{prefix}:*", count=1000)]
    for i in range(0, len(keys), 500):
        await redis.delete(*keys[i:i + 500])
    await redis.aclose()


def paired(fleets: list[dict[str, float]], alone: list[dict[str, float]]
           ) -> dict[str, float]:
    """Queueing CPU per run, each fleet against the library alone of its own round (the
    machine's speed drifts between rounds, by more than the queueing costs): the median of
    those differences, and their least and greatest."""
    diffs = [f["cpu_ms_per_run"] - a["cpu_ms_per_run"] for f, a in zip(fleets, alone,
                                                                         strict=True)]
    return {"queueing": statistics.median(diffs), "queueing_lo": min(diffs),
            "queueing_hi": max(diffs)}


def table(args: argparse.Namespace, bases: dict[int, dict[str, float]],
          rows: list[tuple[str, dict[str, float]]], beside: dict[str, float]) -> None:
    print(f"{args.runs} runs started at once, at most {args.active} executing; 4 model calls "
          f"each (3 echo steps + answer), model reply delay {args.model_delay:g}s; "
          f"medians of {args.repeat}; "
          f"{os.cpu_count()} cores; Redis and PostgreSQL local\n")
    head = (f"{'':24}{'runs/s':>8}{'ratio':>7}{'wait p50':>10}{'wait p99':>10}"
            f"{'event p99':>11}{'at Redis':>10}{'client lag':>12}{'CPU/run':>9}{'gateway':>9}"
            f"{'client':>8}{'queueing':>10}{'range':>11}{'vs 1 proc':>11}")
    print(head + "\n" + " " * 24 + f"{'':>15}{'ms':>10}{'ms':>10}{'ms':>11}{'p99 ms':>10}"
          f"{'p99 ms':>12}{'ms':>9}{'ms':>9}{'ms':>8}{'ms/run':>10}{'ms/run':>11}{'ms/run':>11}")
    one = bases[1]
    libraries = [("library alone" + (f", {procs} procs" if procs > 1 else ""), b, "-", "-")
                 for procs, b in sorted(bases.items())]
    # Beside a neighbour: what it adds to the library's own CPU (paired as the fleets are).
    libraries.append(("library beside a spinner", beside, f"{beside['queueing']:.1f}",
                      f"{beside['queueing_lo']:>6.1f} to{beside['queueing_hi']:>5.1f}"))
    for name, b, added, spread in libraries:
        print(f"{name:24}{b['runs_per_s']:>8.1f}{b['runs_per_s'] / one['runs_per_s']:>7.2f}"
              f"{'-':>10}{'-':>10}{'-':>11}{'-':>10}{'-':>12}{b['cpu_ms_per_run']:>9.1f}"
              f"{'-':>9}{'-':>8}{added:>10}{spread:>11}{'-':>11}")
    for name, r in rows:
        print(f"{name:24}{r['runs_per_s']:>8.1f}"
              f"{r['runs_per_s'] / one['runs_per_s']:>7.2f}{r['wait_p50_ms']:>10.0f}"
              f"{r['wait_p99_ms']:>10.0f}{r['lat_p99_ms']:>11.1f}{r['redis_p99_ms']:>10.1f}"
              f"{r['client_lag_p99_ms']:>12.1f}{r['cpu_ms_per_run']:>9.1f}"
              f"{r['gateway_ms_per_run']:>9.1f}{r['client_ms_per_run']:>8.1f}"
              f"{r['queueing']:>10.1f}"
              f"{r['queueing_lo']:>6.1f} to{r['queueing_hi']:>5.1f}"
              f"{r['cpu_ms_per_run'] - one['cpu_ms_per_run']:>11.1f}")
    print("\nratio: runs/s against the library alone in one process. event p99: at the client "
          "(receive time minus the event's timestamp); at Redis: the same when a probe reads it "
          "from the run's stream (the worker's share; --probe only, nan without); client lag: "
          "how late the client's loop wakes. CPU/run: the gateway's and workers' CPU per run "
          "(gateway: its part; client: this client's own, on the same cores). "
          "queueing: that minus the library's in as many processes as workers (each its share "
          "of the runs, at once), so what W processes cost by themselves (smaller batches of "
          "records each, W interpreters on the cores) is not counted as queueing; each fleet "
          "against the library of its own round, the median of those differences (range: "
          "their least and greatest); vs 1 proc: medians, minus the library's in one process. "
          "The library alone records its runs in the same PostgreSQL and tunes the collector "
          "as a worker does. Beside a spinner: the library alone in one process beside one "
          "that spins 1 ms and sleeps 1 ms; its queueing column is what that neighbour adds to "
          "the library's own CPU per run (paired by round). With "
          f"{os.cpu_count()} cores shared by every process the ratio is bounded by the cores.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--active", type=int, default=200)
    parser.add_argument("--model-delay", type=float, default=0.2)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--repeat", type=int, default=1, help="run each fleet this many "
                        "times (interleaved) and show the medians")
    parser.add_argument("--compare", default="", help="another source tree's src directory "
                        "(several: comma-separated, each run in turn)")
    parser.add_argument("--raw", action="store_true", help="print each fleet's figures "
                        "(stderr), not only the medians")
    parser.add_argument("--probe", action="store_true", help="also read every run's stream "
                        "in Redis as it is written (the 'at Redis' column); the probe shares "
                        "the cores, so the CPU figures of those rounds carry its load")
    parser.add_argument("--profile", default="", help="write each fleet process's cProfile "
                        "here (gateway and workers)")
    parser.add_argument("--role", choices=["client", "direct", "probe"], default="client",
                        help=argparse.SUPPRESS)
    parser.add_argument("--db", default="", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "direct":
        return direct(args.runs, args.db, args.active)
    if args.role == "probe":
        return probe(args.prefix)
    root = Path(tempfile.mkdtemp(prefix="tl-scale-"))
    (root / "agents.yaml").write_text(AGENTS)
    model_port = free_port()
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("THINKLOOP_")},
           "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1", "OPENAI_API_KEY": "bench",
           "THINKLOOP_HOME": str(root / "home"),
           "PYTHONPATH": os.pathsep.join([src, str(plugin_site(root))])}
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        env["BENCH_PROFILE"] = str(Path(args.profile).resolve())
    model = subprocess.Popen([sys.executable, "-m", "thinkloop.testing.openai_server", "--port",
                              str(model_port), "--delay-ms", str(args.model_delay * 1000)],
                             env=env, stdout=subprocess.DEVNULL)
    schema = "bench_" + uuid.uuid4().hex[:8]
    try:
        time.sleep(1.0)
        runs: dict[str, list[dict[str, float]]] = {}
        alone: dict[int, list[dict[str, float]]] = {}
        beside: list[dict[str, float]] = []  # the library in one process beside a spinner
        db = f"{PG}?schema={schema}"
        for _ in range(args.repeat):
            for w in map(int, args.workers.split(",")):
                name = f"{w} worker" + ("s" if w > 1 else "")
                # The library alone, interleaved with the fleets (the machine's speed drifts
                # by a third within minutes here): in one process, and in W at once.
                for procs in sorted({1, w}):
                    if procs == 1 and len(alone.get(1, [])) > len(alone.get(w, [])):
                        continue  # one baseline in one process per round
                    alone.setdefault(procs, []).append(
                        library(procs, args.runs, args.active, db, env))
                    if procs == 1:
                        beside.append(library(1, args.runs, args.active, db, env, True))
                for k, tree in enumerate(filter(None, args.compare.split(","))):
                    other = {**env, "PYTHONPATH": env["PYTHONPATH"].replace(src, tree)}
                    label = " (before)" if "," not in args.compare else f" ({k + 1}: before)"
                    runs.setdefault(name + label, []).append(
                        fleet(w, args.runs, args.active, other, root, args.probe))
                runs.setdefault(name, []).append(
                    fleet(w, args.runs, args.active, env, root, args.probe))
        if args.raw:  # every fleet's figures, not only their medians
            for name, rs in runs.items():
                for r in rs:
                    print(name, json.dumps({k: round(v, 1) for k, v in r.items()}),
                          file=sys.stderr)
        rows = [(name, {**{k: statistics.median(r[k] for r in rs) for k in rs[0]},
                        **paired(rs, alone[int(name.split()[0])])})
                for name, rs in runs.items()]
        bases = {procs: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
                 for procs, rs in alone.items()}
        spun = {**{k: statistics.median(r[k] for r in beside) for k in beside[0]},
                **paired(beside, alone[1])}
    finally:
        model.terminate()
        model.wait(10)
        asyncio.run(cleanup(schema, "bench-none"))
    table(args, bases, rows, spun)


if __name__ == "__main__":
    main()
