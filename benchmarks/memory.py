"""Memory and context pipeline: prompt size over a long session, pipeline cost, recall latency.

1. Prompt tokens per turn over a scripted session (default 300 turns), with the memory hooks
   (pipeline + layers + auto-compaction) on and off, on SQLite. Off is plain history replay.
2. Time of one ``run_pipeline`` call at 10 / 100 / 1000 messages (median of repeats), with the
   cost of ``estimate_tokens`` alone, measured in the same run, as the baseline.
3. Recall latency with 10k stored memories on SQLite and PostgreSQL: BM25 cold (index build)
   and warm, and vector search (cosine in numpy; the query embedded with the local MiniLM
   model when the ``recall`` extra is installed, else a random unit vector).

Usage: python benchmarks/memory.py [--turns 300] [--memories 10000] [--pg URL] [--repeat 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np

from thinkloop import Agent, ScriptedModel
from thinkloop.context.pipeline import ContextSettings, run_pipeline
from thinkloop.context.tokens import estimate_tokens
from thinkloop.memory import BM25Retriever, Embedder, Memory, VectorRetriever, default_embedder
from thinkloop.memory.recall import to_blob
from thinkloop.store import open_store
from thinkloop.testing.long_session import FILLER, answer, helper
from thinkloop.types import Message, ToolCall

POINTS = (1, 10, 25, 50, 100, 150, 200, 250, 300)

async def session_curve(turns: int, pipeline: bool, db: Path) -> list[int]:
    store = open_store(db)
    model = ScriptedModel([answer] * turns)
    hooks: list[Any] = []
    tools: list[Any] = []
    if pipeline:
        memory = Memory(store, embedder=None, model=ScriptedModel([helper] * (turns * 10)),
                        context=ContextSettings(context_window=8192))
        hooks, tools = memory.hooks(), memory.tools()
    agent = Agent(model, store=store, tools=tools, hooks=hooks, plugins=False)
    try:
        for turn in range(1, turns + 1):
            task = ("By the way, my favorite color is teal." if turn == 3
                    else f"Turn {turn}: what should we do next? {FILLER}")
            handle = agent.start(task, session="bench", user_id="ada", stream_model=False)
            await handle.result()
            await handle.wait_background()
    finally:
        await store.aclose()
    return [estimate_tokens(c.messages) for c in model.calls]


def history(n: int) -> list[Message]:
    msgs = [Message.system("You are helpful. " * 50), Message.user("start")]
    i = 0
    while len(msgs) < n:
        c = ToolCall(f"c{i}", "fetch", {"url": f"https://example.com/{i}"})
        body = ("lorem ipsum dolor sit amet " * (400 if i % 5 == 0 else 20))
        msgs += [Message.assistant("", (c,)), Message.tool(c.id, "fetch", body),
                 Message.assistant(f"answer {i}"), Message.user(f"question {i}")]
        i += 1
    return msgs[:n]


def median_us(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


async def amedian_ms(fn: Callable[[], Awaitable[object]], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


async def recall_latency(
    url: str, n: int, repeat: int, embedder: Embedder | None
) -> dict[str, float]:
    store = open_store(url)
    rng = np.random.default_rng(0)
    topics = ["deploy", "invoice", "holiday", "dog", "sister", "database", "train", "garden"]
    rows = []
    for i in range(n):
        v = rng.standard_normal(384).astype(np.float32)
        text = f"Memory {i}: note about the {topics[i % len(topics)]} number {i % 97}."
        rows.append(("episode", "", text, to_blob(v / np.linalg.norm(v))))
    out: dict[str, float] = {}
    try:
        t = time.perf_counter()
        await store.add_memories("bench", rows)
        out[f"insert {n} (s)"] = time.perf_counter() - t
        bm25 = BM25Retriever(store)
        t = time.perf_counter()
        await bm25.search("bench", "when is the deploy", 5)
        out["bm25 cold ms"] = (time.perf_counter() - t) * 1e3
        out["bm25 warm ms"] = await amedian_ms(lambda: bm25.search("bench", "dog 42", 5), repeat)
        label = "minilm" if embedder is not None else "random"

        class RandomQuery:
            dim = 384

            def embed(self, texts: Sequence[str]) -> np.ndarray:
                v = rng.standard_normal((len(texts), 384)).astype(np.float32)
                return v / np.linalg.norm(v, axis=1, keepdims=True)

        vec = VectorRetriever(store, embedder or RandomQuery(), min_score=-1.0)
        t = time.perf_counter()
        await vec.search("bench", "warm up the model and the index", 5)
        out[f"vector cold ms ({label} query)"] = (time.perf_counter() - t) * 1e3
        out[f"vector warm ms ({label} query)"] = await amedian_ms(
            lambda: vec.search("bench", "what pet does she have", 5), repeat)
        out["stamp query only ms"] = await amedian_ms(lambda: store.memory_stamp("bench"), repeat)
        query_embedder = embedder or RandomQuery()
        out[f"embed query only ms ({label})"] = await amedian_ms(
            lambda: asyncio.to_thread(query_embedder.embed, ["what pet does she have"]), repeat)
    finally:
        await store.aclose()
    return out


async def pg_reachable(url: str) -> bool:
    try:
        conn = await asyncpg.connect(url.split("?")[0], timeout=3)
    except (OSError, asyncpg.PostgresError):
        return False
    await conn.close()
    return True


async def print_curves(turns: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        on = await session_curve(turns, True, Path(tmp) / "on.db")
        t_on = time.perf_counter() - t
        t = time.perf_counter()
        off = await session_curve(turns, False, Path(tmp) / "off.db")
        t_off = time.perf_counter() - t
    print(f"\n1. prompt tokens per turn ({turns} turns; estimate_tokens of each request)")
    print(f"{'turn':>6} {'pipeline on':>12} {'off':>10} {'on/off':>8}")
    for p in (x for x in POINTS if x <= turns):
        print(f"{p:>6} {on[p - 1]:>12} {off[p - 1]:>10} {on[p - 1] / off[p - 1]:>8.2f}")
    print("per 50 turns (max / mean); with the pipeline on, the saw-tooth is auto-compaction")
    print(f"{'turns':>9} {'on max':>8} {'on mean':>8} {'off max':>8} {'off mean':>9}")
    for lo in range(0, turns, 50):
        a, b = on[lo : lo + 50], off[lo : lo + 50]
        print(f"{lo + 1:>4}-{lo + len(a):<4} {max(a):>8} {statistics.mean(a):>8.0f} "
              f"{max(b):>8} {statistics.mean(b):>9.0f}")
    print(f"session wall time: on {t_on:.1f}s, off {t_off:.1f}s "
          f"(on includes post-turn jobs and compactions)")


def print_pipeline_times(repeat: int) -> None:
    print("\n2. context pipeline per call (median of repeats, microseconds)")
    print(f"{'messages':>9} {'pipeline':>10} {'estimate only':>14} {'ratio':>7} {'out msgs':>9}")
    for label, settings in (
        ("recent_messages=30 (Memory's default)",
         ContextSettings(context_window=32_768, recent_messages=30)),
        ("no message limit: every stage sees all (pruning at work)",
         ContextSettings(context_window=32_768)),
    ):
        print(label)
        for n in (10, 100, 1000):
            msgs = history(n)
            full = median_us(lambda m=msgs, s=settings: run_pipeline(m, s), repeat)
            base = median_us(lambda m=msgs: estimate_tokens(m), repeat)
            out = run_pipeline(msgs, settings)
            print(f"{n:>9} {full:>10.0f} {base:>14.0f} {full / base:>7.1f} {len(out):>9}"
                  f"   tokens {estimate_tokens(msgs)} -> {estimate_tokens(out)}")


async def print_recall(pg: str, memories: int, repeat: int) -> None:
    print(f"\n3. recall latency with {memories} memories (median of {repeat})")
    targets: list[tuple[str, str | None]] = [("sqlite", None)]
    if await pg_reachable(pg):
        targets.append(("postgres", f"tl_bench_{uuid.uuid4().hex[:8]}"))
    else:
        print(f"(PostgreSQL not reachable at {pg}: skipped)")
    embedder = default_embedder()
    if embedder is not None:
        t = time.perf_counter()
        for _ in range(3):  # load and warm up the model: its first calls are much slower
            await asyncio.to_thread(embedder.embed, ["warm up"])
        print(f"MiniLM load + warm-up: {time.perf_counter() - t:.1f}s")
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, schema in targets:
            url = str(Path(tmp) / "recall.db") if schema is None else f"{pg}?schema={schema}"
            try:
                results[name] = await recall_latency(url, memories, repeat, embedder)
            finally:
                if schema is not None:
                    conn = await asyncpg.connect(pg)
                    await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                    await conn.close()
    keys = list(next(iter(results.values())))
    print(f"{'':34}" + "".join(f"{n:>12}" for n in results))
    for k in keys:
        print(f"{k:34}" + "".join(f"{results[n][k]:>12.2f}" for n in results))


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    args = ap.parse_args()
    await print_curves(args.turns)
    print_pipeline_times(args.repeat)
    await print_recall(args.pg, args.memories, args.repeat)


if __name__ == "__main__":
    asyncio.run(main())
