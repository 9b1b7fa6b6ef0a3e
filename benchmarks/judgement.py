"""The judgement plugins, measured.

1. Assessment: the labelled task set (benchmarks/data/judgement_tasks.tsv, >= 100 tasks with
   the expected decision, written by hand from CortexPrism's assessTask table) scored for the
   thinkloop heuristic and, as the baseline in the same run, the seed's table read literally
   (a trailing "?" asks first, any destructive verb asks first, > 20 words plans, ...).
   The heuristic was tuned on that set; judgement_holdout.tsv (30 tasks) was written after
   and never used to tune anything: the honest estimate.

2. Model selection: every labelled task run through an agent whose default model is the
   strong one, with and without the ``select`` plugin (pool: a cheap model at gpt-4o-mini
   list prices, a strong one at gpt-4o prices). Both models run the same workload (a tool
   step count per labelled decision, tokens from the real request sizes), so the difference
   is only where the calls went. "misrouted" counts tasks labelled as needing the strong
   model (plan_with_rollback, delegate) that the selector sent to the cheap one.

Usage: python benchmarks/judgement.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

from thinkloop import Agent
from thinkloop.agent import AgentOptions
from thinkloop.judgement import (
    DECISIONS,
    AssessSettings,
    Judgement,
    ModelPool,
    PoolModel,
    heuristic,
)
from thinkloop.models.base import ModelSettings
from thinkloop.types import Message, ModelResponse, TextDelta, ToolCall, ToolSpec, Usage

TASKS = Path(__file__).resolve().parent / "data" / "judgement_tasks.tsv"
HOLDOUT = TASKS.with_name("judgement_holdout.tsv")


def load_tasks(path: Path = TASKS) -> list[tuple[str, str]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            expected, task = line.split("\t", 1)
            rows.append((expected, task))
    return rows


_SEED = [
    (re.compile(r"\?\s*$|\b(?:something|stuff|somehow)\b", re.I), "ask_first"),
    (re.compile(r"\b(?:rm|delete|drop|purge)\b", re.I), "ask_first"),
    (re.compile(r"\b(?:and also|then after|first\b.*\bsecond)\b", re.I), "parallelize"),
    (re.compile(r"\b(?:code|function|bug|fix)\b", re.I), "plan_with_rollback"),
]


def seed_table(task: str) -> str:
    """CortexPrism's signal table as documented, first matching row wins."""
    for pattern, decision in _SEED[:2]:
        if pattern.search(task):
            return decision
    if len(task.split()) > 20:
        return "plan_with_rollback"
    for pattern, decision in _SEED[2:]:
        if pattern.search(task):
            return decision
    return "direct"


def score(rows: list[tuple[str, str]], decide: Callable[[str], str]) -> dict[str, object]:
    hits = Counter[str]()
    predicted = Counter[str]()
    expected = Counter[str]()
    misses: list[tuple[str, str, str]] = []
    for want, task in rows:
        got = decide(task)
        expected[want] += 1
        predicted[got] += 1
        if got == want:
            hits[want] += 1
        else:
            misses.append((want, got, task))
    return {"accuracy": sum(hits.values()) / len(rows), "hits": hits, "predicted": predicted,
            "expected": expected, "misses": misses}


def assessment_table(repeat: int, path: Path = TASKS) -> None:
    rows = load_tasks(path)
    print(f"## Assessment: {len(rows)} labelled tasks ({path.name})\n")
    results = {"seed table (baseline)": score(rows, seed_table),
               "thinkloop heuristic": score(rows, lambda t: heuristic(t).decision)}
    print("| decision | n | " + " | ".join(f"{k} recall / precision" for k in results) + " |")
    print("| --- | --- |" + " --- |" * len(results))
    for d in DECISIONS:
        cells = []
        for r in results.values():
            hits, pred, exp = r["hits"], r["predicted"], r["expected"]  # type: ignore[assignment]
            rec = hits[d] / exp[d] if exp[d] else 0.0  # type: ignore[index]
            prec = hits[d] / pred[d] if pred[d] else 0.0  # type: ignore[index]
            cells.append(f"{rec:.0%} / {prec:.0%}")
        n = results["thinkloop heuristic"]["expected"][d]  # type: ignore[index]
        print(f"| {d} | {n} | " + " | ".join(cells) + " |")
    print("| **accuracy** | | " + " | ".join(
        f"**{r['accuracy']:.1%}**" for r in results.values()) + " |")
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _, task in rows:
            heuristic(task)
        times.append((time.perf_counter() - start) / len(rows))
    print(f"\nheuristic cost: median {statistics.median(times) * 1e6:.0f} us per task\n")
    misses = results["thinkloop heuristic"]["misses"]
    print(f"thinkloop heuristic misses ({len(misses)}):")  # type: ignore[arg-type]
    for want, got, task in misses:  # type: ignore[attr-defined]
        print(f"- expected {want}, got {got}: {task}")


STEPS = {"direct": 1, "ask_first": 1, "parallelize": 3, "plan_with_rollback": 4, "delegate": 4}
PRICES = {"cheap": (0.15, 0.60), "strong": (2.50, 10.00)}  # gpt-4o-mini, gpt-4o list prices


class Worker:
    """A model that does ``steps`` echo calls then answers; usage from the request's size."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.steps = 1
        self.usage = Usage()

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec],
                       settings: ModelSettings) -> ModelResponse:
        done = sum(1 for m in messages if m.role == "tool")
        prompt = sum(len(m.content) for m in messages) // 4 + 60 * len(tools)
        if done < self.steps and tools:
            msg = Message.assistant("", (ToolCall(f"c{done}", "echo", {"text": f"{done}"}),))
            out = 30
        else:
            msg, out = Message.assistant(f"finished after {done} steps " + "x" * 200), 80
        usage = Usage(1, prompt, out)
        self.usage = self.usage + usage
        return ModelResponse(msg, usage, None, self.name)

    async def stream(self, messages: Sequence[Message], tools: Sequence[ToolSpec],
                     settings: ModelSettings) -> AsyncIterator[TextDelta | ModelResponse]:
        yield await self.complete(messages, tools, settings)


def echo(text: str) -> str:
    """Echo.

    Args:
        text: what to echo
    """
    return "result " * 50 + text


async def _run_all(rows: list[tuple[str, str]], select: bool) -> dict[str, object]:
    cheap, strong = Worker("cheap"), Worker("strong")
    pool = ModelPool([PoolModel(cheap, 1, *PRICES["cheap"]),
                      PoolModel(strong, 3, *PRICES["strong"])])
    heuristic_only = AssessSettings(ask=False, use_model=False)
    judgement = Judgement(assess=heuristic_only, select=pool if select else None,
                          sensitive=None, learn=None)
    agent = Agent(strong, tools=[echo], max_steps=10, options=AgentOptions(judgement=judgement))
    misrouted = 0
    for label, task in rows:
        cheap.steps = strong.steps = STEPS[label]
        before = strong.usage.requests
        await agent.run(task)
        if label in ("plan_with_rollback", "delegate") and strong.usage.requests == before:
            misrouted += 1
    cost = sum((w.usage.input_tokens * PRICES[w.name][0]
                + w.usage.output_tokens * PRICES[w.name][1]) / 1e6 for w in (cheap, strong))
    return {"cheap": cheap.usage, "strong": strong.usage, "cost": cost,
            "misrouted": misrouted}


def selection_table() -> None:
    rows = load_tasks()
    base = asyncio.run(_run_all(rows, select=False))
    sel = asyncio.run(_run_all(rows, select=True))
    print(f"## Model selection: {len(rows)} mixed tasks, default model = strong\n")
    print("| agent | strong-model tokens | cheap-model tokens | total tokens | cost USD | "
          "misrouted |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, r in (("always strong (baseline)", base), ("select plugin", sel)):
        c, st = r["cheap"], r["strong"]
        assert isinstance(c, Usage) and isinstance(st, Usage)
        print(f"| {name} | {st.total_tokens:,} | {c.total_tokens:,} | "
              f"{st.total_tokens + c.total_tokens:,} | {r['cost']:.4f} | {r['misrouted']} |")
    saved = 1 - float(sel["cost"]) / float(base["cost"])  # type: ignore[arg-type]
    strong_base = base["strong"].total_tokens  # type: ignore[attr-defined]
    strong_sel = sel["strong"].total_tokens  # type: ignore[attr-defined]
    print(f"\ncost saved: {saved:.1%}; strong-model tokens saved: "
          f"{1 - strong_sel / strong_base:.1%}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    assessment_table(args.repeat)
    print()
    assessment_table(args.repeat, HOLDOUT)
    print()
    selection_table()


if __name__ == "__main__":
    main()
