"""The judgement plugins, measured.

1. Assessment: the labelled task set (benchmarks/data/judgement_tasks.tsv, >= 100 tasks with
   the expected decision, written by hand from CortexPrism's assessTask table) scored for the
   thinkloop heuristic and, as the baseline in the same run, the seed's table read literally
   (a trailing "?" asks first, any destructive verb asks first, > 20 words plans, ...).
   The heuristic was tuned on that set; judgement_holdout.tsv (30 tasks) was written after
   and never used to tune anything: the honest estimate.

Usage: python benchmarks/judgement.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from thinkloop.judgement import DECISIONS, heuristic

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    assessment_table(args.repeat)
    print()
    assessment_table(args.repeat, HOLDOUT)


if __name__ == "__main__":
    main()
