"""Per-step overhead of the loop against a zero-latency loopback server.

Three (four) loops run the same workload side by side in one process, against one
deterministic OpenAI-compatible server in a subprocess (so it has its own core): each run asks
for one ``echo`` tool call per step for 10 steps, then answers.

* thinkloop      Agent + OpenAICompatModel with every default: guards (loop detection too: ten
                 calls with new arguments are progress, and the run completes), history
                 pipeline, policy
* thinkloop-lean the same with ``guard=False`` (the loop, tools, events and pipeline only)
* bare aiohttp   a hand-written loop posting the same JSON with aiohttp (the floor)
* bare httpx2    the same loop on httpx2 (the client the openai SDK 3.x is built on)
* openai SDK     a hand-written loop on the official AsyncOpenAI client

Runs as records (issue 15), each the lean loop plus a SQLite store, compared with the lean loop:

* +records       run row and audit log, tracing off, checkpoints off
* +trace         the same with the OpenTelemetry trace stored with the run
* +checkpoints   the same with checkpoints after every step and tool result (the default
                 for an agent with a store)

Each sample is timed in wall seconds and in this process's CPU seconds (the server has its
own process): the CPU time is what the loop itself costs, and varies less with other load on
the machine than the wall time. The goals (issue 19) are printed as ratios taken within each
repeat and then the median over repeats, so drift between repeats cancels out:

* concurrency    200 concurrent runs within 1.3x the wall time of the bare aiohttp loop
* defaults       the default agent within 1.3x of the lean agent per step (sequential runs)

The goal's server answers at once, so the loops' own CPU decides the wall time. ``--latency-ms``
repeats the concurrency figure (bare aiohttp and the default agent only) against servers whose
every reply takes that long, as a real model's does: once the model's latency hides the
client's work, the two loops take the same time.

``--tuned-gc`` calls :func:`thinkloop.tuning.tune_gc` once the loops are built (every loop
in the process, the bare ones too, runs under the tuned collector).

Usage: python benchmarks/overhead.py [--runs 20] [--concurrency 200] [--repeat 5] [--core]
                                    [--tuned-gc] [--latency-ms 10 50 200]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import aiohttp
import httpx2
import orjson
from openai import AsyncOpenAI

from thinkloop import Agent, tool
from thinkloop.agent import AgentOptions
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.store import open_store
from thinkloop.tuning import tune_gc

STEPS = 10
MODEL = f"steps-{STEPS}"
TOOLS = [{"type": "function", "function": {
    "name": "echo", "description": "Echo the text back.",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                   "required": ["text"]}}}]


@tool
async def echo(text: str) -> str:
    """Echo the text back."""
    # async, like the bare loops' inline echo: a sync tool would run in a worker thread.
    return text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_arg(text: str) -> int:
    """``--port`` (``type=``): 0, every script's default, takes a free port, so two benchmarks
    running at once never measure each other's server."""
    return int(text) or free_port()


def start_server(port: int, delay_ms: float = 0.0) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "thinkloop.testing.openai_server", "--port", str(port),
         "--delay-ms", str(delay_ms)],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    if not proc.stdout.readline():  # it exited: the port is taken, say, by another server
        proc.wait()
        raise SystemExit(f"the model server did not start on port {port} (exit {proc.returncode})")
    return proc


@contextlib.contextmanager
def serving(port: int, delay_ms: float = 0.0) -> Iterator[None]:
    """The deterministic model server on ``port`` for the block's duration."""
    server = start_server(port, delay_ms)
    try:
        yield
    finally:
        server.terminate()
        server.wait()


def first_messages(task: str = "go") -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": task}]


def bare_step(messages: list[dict[str, Any]], data: dict[str, Any]) -> bool:
    """Apply one response to the history; return True when the run is finished."""
    msg = data["choices"][0]["message"]
    calls = msg.get("tool_calls")
    if not calls:
        return True
    messages.append({"role": "assistant", "tool_calls": calls})
    for c in calls:
        args = orjson.loads(c["function"]["arguments"])
        messages.append({"role": "tool", "tool_call_id": c["id"], "content": args["text"]})
    return False


class Loops:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.url = base_url + "/chat/completions"
        # Each run's task is its own ("go 0", "go 1", ...), in every loop: a cache of what
        # was decided about a text seen before (the input guard keeps one) must not make a
        # benchmark of 200 runs of one prompt look cheaper than 200 users' prompts.
        self.tasks = itertools.count()

    def task(self) -> str:
        return f"go {next(self.tasks)}"

    async def __aenter__(self) -> Loops:
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        self.hx = httpx2.AsyncClient(limits=httpx2.Limits(max_connections=1000,
                                                          max_keepalive_connections=1000))
        self.sdk = AsyncOpenAI(base_url=self.base_url, api_key="x", max_retries=0)
        self.model = OpenAICompatModel(MODEL, base_url=self.base_url, api_key="x")
        self.agent = Agent(self.model, tools=[echo], max_steps=STEPS + 2)
        self.lean = Agent(self.model, tools=[echo], max_steps=STEPS + 2, guard=False)
        self.tmp = tempfile.TemporaryDirectory()
        self.store = open_store(f"{self.tmp.name}/runs.db")
        self.recorded = {
            name: Agent(self.model, tools=[echo], max_steps=STEPS + 2, guard=False,
                        store=self.store,
                        options=AgentOptions(tracing=trace, checkpoints=checkpoints))
            for name, trace, checkpoints in (("+records", False, False),
                                             ("+trace", True, False),
                                             ("+checkpoints", True, True))}
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()
        await self.hx.aclose()
        await self.sdk.close()
        await self.model.aclose()
        await self.store.aclose()
        self.tmp.cleanup()

    def recorded_loop(self, name: str) -> Callable[[], Awaitable[None]]:
        agent = self.recorded[name]

        async def run() -> None:
            result = await agent.run(self.task())
            assert result.status == "completed" and len(result.steps) == STEPS + 1, result

        return run

    async def thinkloop(self) -> None:
        result = await self.agent.run(self.task())
        assert result.status == "completed" and len(result.steps) == STEPS + 1, result

    async def thinkloop_lean(self) -> None:
        result = await self.lean.run(self.task())
        assert result.status == "completed" and len(result.steps) == STEPS + 1, result

    async def bare_aiohttp(self) -> None:
        messages = first_messages(self.task())
        while True:
            body = orjson.dumps({"model": MODEL, "messages": messages, "tools": TOOLS})
            async with self.session.post(self.url, data=body,
                                         headers={"content-type": "application/json"}) as r:
                data = orjson.loads(await r.read())
            if bare_step(messages, data):
                return

    async def bare_httpx2(self) -> None:
        messages = first_messages(self.task())
        while True:
            body = orjson.dumps({"model": MODEL, "messages": messages, "tools": TOOLS})
            r = await self.hx.post(self.url, content=body,
                                   headers={"content-type": "application/json"})
            if bare_step(messages, orjson.loads(r.content)):
                return

    async def openai_sdk(self) -> None:
        messages: list[Any] = first_messages(self.task())
        while True:
            resp = await self.sdk.chat.completions.create(
                model=MODEL, messages=messages, tools=TOOLS)  # type: ignore[arg-type]
            msg = resp.choices[0].message
            if not msg.tool_calls:
                return
            messages.append(msg.model_dump(exclude_none=True))
            for c in msg.tool_calls:
                args = orjson.loads(c.function.arguments)  # type: ignore[union-attr]
                messages.append({"role": "tool", "tool_call_id": c.id, "content": args["text"]})


GOAL_CONCURRENT = 1.3  # 200 concurrent runs, x the bare aiohttp loop's wall time
GOAL_DEFAULTS = 1.3  # the default agent per step, x the lean agent


async def timed(fn: Callable[[], Awaitable[None]], runs: int, concurrency: int
                ) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) for ``runs`` runs, ``concurrency`` at a time."""
    sem = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with sem:
            await fn()

    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one() for _ in range(runs)))
    return time.perf_counter() - start, time.process_time() - cpu


Samples = dict[str, dict[str, list[float]]]  # loop -> figure -> one value per repeat


async def measure(base_url: str, args: argparse.Namespace) -> Samples:
    async with Loops(base_url) as loops:
        names = ["bare aiohttp", "thinkloop", "thinkloop-lean", "bare httpx2", "openai SDK",
                 *loops.recorded]
        fns = [loops.bare_aiohttp, loops.thinkloop, loops.thinkloop_lean, loops.bare_httpx2,
               loops.openai_sdk, *(loops.recorded_loop(n) for n in loops.recorded)]
        if args.core:
            names, fns = names[:3], fns[:3]
        for fn in fns:  # warm up connections, imports and caches
            await timed(fn, 3, 3)
        if args.tuned_gc:
            tune_gc()
        out: Samples = {n: {"seq": [], "conc": [], "conc_cpu": []} for n in names}
        calls = STEPS + 1
        for _ in range(args.repeat):  # interleave the loops so drift hits all alike
            for name, fn in zip(names, fns, strict=True):
                seq, _cpu = await timed(fn, args.runs, 1)
                out[name]["seq"].append(seq / (args.runs * calls) * 1000)  # ms per call
                # Every loop's pool drops idle connections (aiohttp after 15 s, httpx2 after
                # 5 s), and a round of the other loops takes longer than that: fill the pool
                # again untimed, or a loop whose pool went idle pays 200 connects in its sample.
                await timed(fn, args.concurrency, args.concurrency)
                wall, cpu = await timed(fn, args.concurrency, args.concurrency)
                out[name]["conc"].append(wall)
                out[name]["conc_cpu"].append(cpu)
    return out


async def by_latency(base_url: str, args: argparse.Namespace) -> tuple[float, float]:
    """(bare aiohttp wall s, median ratio of the default agent's wall time to it)."""
    async with Loops(base_url) as loops:
        pair = (loops.bare_aiohttp, loops.thinkloop)
        for fn in pair:
            await timed(fn, 3, 3)
        walls: dict[int, list[float]] = {0: [], 1: []}
        for _ in range(args.repeat):
            for i, fn in enumerate(pair):
                await timed(fn, args.concurrency, args.concurrency)  # fill the pool, untimed
                walls[i].append((await timed(fn, args.concurrency, args.concurrency))[0])
    return med(walls[0]), med([t / b for b, t in zip(walls[0], walls[1], strict=True)])


def print_latencies(args: argparse.Namespace) -> None:
    if not args.latency_ms:
        return
    print(f"\n{args.concurrency} concurrent runs against a model that takes a while to answer "
          f"(median of {args.repeat}):\n")
    print(f"{'model latency':>13} {'floor s':>8} {'bare aiohttp s':>15} {'thinkloop x bare':>17}")
    for ms in args.latency_ms:
        port = free_port()
        with serving(port, ms):
            bare, ratio_ = asyncio.run(by_latency(f"http://127.0.0.1:{port}/v1", args))
        floor = (STEPS + 1) * ms / 1000  # 11 calls one after another, each taking ``ms``
        print(f"{ms:>10g} ms {floor:>8.2f} {bare:>15.2f} {ratio_:>17.2f}")


def med(values: list[float]) -> float:
    return statistics.median(values)


def ratio(res: Samples, name: str, base: str, figure: str) -> float:
    """The median over repeats of ``name``'s figure over ``base``'s in the same repeat."""
    return med([a / b for a, b in zip(res[name][figure], res[base][figure], strict=True)])


def print_loops(res: Samples, args: argparse.Namespace) -> None:
    print(f"{'loop':<15} {'ms/call (seq)':>14} {'x bare':>7} "
          f"{f'{args.concurrency} runs wall s':>18} {'x bare':>7} {'CPU s':>6} {'x bare':>7}")
    for name, r in res.items():
        if name.startswith("+"):
            continue
        print(f"{name:<15} {med(r['seq']):>14.3f} {ratio(res, name, 'bare aiohttp', 'seq'):>7.2f} "
              f"{med(r['conc']):>18.2f} {ratio(res, name, 'bare aiohttp', 'conc'):>7.2f} "
              f"{med(r['conc_cpu']):>6.2f} {ratio(res, name, 'bare aiohttp', 'conc_cpu'):>7.2f}")


def print_records(res: Samples, args: argparse.Namespace) -> None:
    if "+records" not in res:
        return
    print("\nruns as records: the lean loop plus a SQLite store, x the lean loop\n")
    print(f"{'loop':<15} {'ms/step (seq)':>14} {'x lean':>7} {'+ms/step':>9} "
          f"{f'{args.concurrency} runs wall s':>18} {'x lean':>7}")
    lean = "thinkloop-lean"
    for name in (lean, "+records", "+trace", "+checkpoints"):
        r = res[name]
        print(f"{name:<15} {med(r['seq']):>14.3f} {ratio(res, name, lean, 'seq'):>7.2f} "
              f"{med(r['seq']) - med(res[lean]['seq']):>9.3f} "
              f"{med(r['conc']):>18.2f} {ratio(res, name, lean, 'conc'):>7.2f}")


def print_goals(res: Samples, args: argparse.Namespace) -> None:
    conc = ratio(res, "thinkloop", "bare aiohttp", "conc")
    conc_cpu = ratio(res, "thinkloop", "bare aiohttp", "conc_cpu")
    defaults = ratio(res, "thinkloop", "thinkloop-lean", "seq")
    defaults_cpu = ratio(res, "thinkloop", "thinkloop-lean", "conc_cpu")
    print(f"\ngoals (issue 19), median over {args.repeat} repeats of the ratio in each:\n")
    print(f"{'figure':<52} {'ratio':>6} {'goal':>6} {'holds':>6}")
    for label, value, goal in (
            (f"{args.concurrency} concurrent runs, wall, x bare aiohttp", conc, GOAL_CONCURRENT),
            (f"{args.concurrency} concurrent runs, client CPU, x bare aiohttp", conc_cpu, None),
            ("default agent per step (sequential), x lean agent", defaults, GOAL_DEFAULTS),
            (f"default agent, client CPU of {args.concurrency} runs, x lean", defaults_cpu, None)):
        holds = "-" if goal is None else ("yes" if value < goal else "no")
        print(f"{label:<52} {value:>6.2f} {'-' if goal is None else f'{goal:g}':>6} "
              f"{holds:>6}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="sequential runs per sample")
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5, help="samples (median reported)")
    parser.add_argument("--port", type=port_arg, default="0")
    parser.add_argument("--core", action="store_true",
                        help="only the loops the goals compare: bare aiohttp, thinkloop, lean")
    parser.add_argument("--latency-ms", type=float, nargs="*", default=[],
                        help="also time the concurrency figure at these model latencies")
    parser.add_argument("--tuned-gc", action="store_true",
                        help="thinkloop.tuning.tune_gc() after warm-up (all loops)")
    args = parser.parse_args()
    with serving(args.port):
        res = asyncio.run(measure(f"http://127.0.0.1:{args.port}/v1", args))
    print(f"\n{STEPS}-step runs (+1 final call), zero-latency loopback server, "
          f"median of {args.repeat}, gc {'tuned' if args.tuned_gc else 'default'}, "
          f"load average {os.getloadavg()[0]:.2f}\n")
    print_loops(res, args)
    print_records(res, args)
    print_goals(res, args)
    print_latencies(args)


if __name__ == "__main__":
    main()
