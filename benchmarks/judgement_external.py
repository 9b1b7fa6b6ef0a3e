"""Judgement on requests thinkloop's authors did not write (benchmarks/data/judgement_external).

The 244 requests and their labels (decision, irreversible, strong_model, split) were written
by someone who never saw the code, and committed before any scored run (see
judgement_external.md). Only the ``tune`` split was used to change the heuristic and the
prompt; report the ``test`` split.

Two assessors, the same rows:

- ``heuristic``: :func:`thinkloop.judgement.heuristic` alone (no model);
- ``model``: :class:`~thinkloop.judgement.Assessor` with a real model behind an
  OpenAI-compatible server (``--base-url``, e.g. ``python -m llama_cpp.server --model X.gguf``):
  one side call per request with the strict schema, the heuristic's signals as hints. Its
  replies are kept in ``--cache`` (JSON lines) so a long run can resume.

Figures: agreement with the labelled decision; ask-first rate on the irreversible requests
(all of them, and those labelled ask_first); benign requests with scary words kept direct;
model selection (the selector's ``needs`` on each assessment, a pool of a cheap model at
gpt-4o-mini list prices and a strong one at gpt-4o prices): share of ``strong_model=yes``
requests routed to the strong model, and cost against always-strong for the same work per
request (equal tokens per request, so cost is the price mix).

Usage:
    python benchmarks/judgement_external.py --split test
    python benchmarks/judgement_external.py --split test --base-url http://127.0.0.1:PORT/v1 \\
        --model-name gemma-3-270m --max-tokens 40 --cache /tmp/gemma.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import time
from collections import Counter
from pathlib import Path

import orjson

from thinkloop.judgement import Assessment, Assessor, AssessSettings, heuristic
from thinkloop.judgement.assess import ASSESS_SCHEMA
from thinkloop.judgement.select import needs
from thinkloop.models.openai_compat import OpenAICompatModel

DATA = Path(__file__).resolve().parent / "data" / "judgement_external.tsv"
PRICES = {"cheap": 0.15 + 0.60, "strong": 2.50 + 10.00}  # gpt-4o-mini, gpt-4o (in + out)


def load(split: str) -> list[dict[str, str]]:
    with DATA.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return [r for r in rows if split == "all" or r["split"] == split]


def report(name: str, rows: list[dict[str, str]], found: list[Assessment]) -> None:
    n = len(rows)
    agree = sum(f.decision == r["decision"] for r, f in zip(rows, found, strict=True))
    irr = [(r, f) for r, f in zip(rows, found, strict=True) if r["irreversible"] == "yes"]
    irr_ask = [(r, f) for r, f in irr if r["decision"] == "ask_first"]
    benign = [(r, f) for r, f in zip(rows, found, strict=True)
              if r["note"].startswith("benign scary words")]
    strong = [(r, f) for r, f in zip(rows, found, strict=True) if r["strong_model"] == "yes"]
    routed = [needs(r["request"], f)[0] >= 3 for r, f in zip(rows, found, strict=True)]
    cost = sum(PRICES["strong" if s else "cheap"] for s in routed) / (n * PRICES["strong"])
    hit_strong = sum(needs(r["request"], f)[0] >= 3 for r, f in strong)
    print(f"### {name}: {n} requests\n")
    print("| figure | value |\n| --- | --- |")
    print(f"| agreement with the labelled decision | {agree}/{n} = {agree / n:.1%} |")
    print(f"| asks first on irreversible requests (all) | "
          f"{sum(f.decision == 'ask_first' for _, f in irr)}/{len(irr)} |")
    print(f"| asks first on irreversible requests labelled ask_first | "
          f"{sum(f.decision == 'ask_first' for _, f in irr_ask)}/{len(irr_ask)} |")
    print(f"| benign requests with scary words kept direct | "
          f"{sum(f.decision == 'direct' for _, f in benign)}/{len(benign)} |")
    print(f"| strong-model requests routed to the strong model | {hit_strong}/{len(strong)} "
          f"= {hit_strong / max(len(strong), 1):.1%} |")
    print(f"| requests routed to the strong model | {sum(routed)}/{n} |")
    print(f"| cost vs always-strong | {cost:.1%} ({1 - cost:.1%} lower) |")
    sources = Counter(f.source for f in found)
    print(f"| assessments by source | {dict(sources)} |\n")
    confusion = Counter((r["decision"], f.decision) for r, f in zip(rows, found, strict=True))
    print("labelled -> assessed (count): " + ", ".join(
        f"{a}->{b} {c}" for (a, b), c in sorted(confusion.items()) if a != b) + "\n")


async def model_assessments(rows: list[dict[str, str]], args: argparse.Namespace
                            ) -> list[Assessment]:
    model = OpenAICompatModel(args.model_name, base_url=args.base_url)
    assessor = Assessor(AssessSettings(
        use_model=True, max_tokens=args.max_tokens, system_role=not args.no_system_role,
        # llama.cpp's server takes the schema as json_object + schema (not json_schema).
        extra={"response_format": {"type": "json_object", "schema": ASSESS_SCHEMA}}))
    cache = Path(args.cache) if args.cache else None
    done: dict[str, dict[str, object]] = {}
    if cache is not None and cache.exists():
        for line in cache.read_text().splitlines():
            item = orjson.loads(line)
            done[item["id"]] = item
    out = []
    for i, r in enumerate(rows):
        if r["id"] in done:
            out.append(_restore(r["request"], done[r["id"]]))
            continue
        start = time.perf_counter()
        found = await assessor.judge(r["request"], model=model)
        out.append(found)
        if cache is not None:
            with cache.open("a") as f:
                f.write(orjson.dumps({"id": r["id"], "s": round(time.perf_counter() - start, 1),
                                      **found.to_dict()}).decode() + "\n")
        print(f"[{i + 1}/{len(rows)}] {r['decision']} -> {found.decision} ({found.source})",
              flush=True)
    await model.aclose()
    return out


def _restore(task: str, item: dict[str, object]) -> Assessment:
    base = heuristic(task)
    strong = item.get("strong_model")
    return Assessment(
        item["decision"], float(item["confidence"]), base.signals,  # type: ignore[arg-type]
        source=str(item["source"]), risk=str(item.get("risk", "")),
        strong_model=strong if isinstance(strong, bool) else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="test", choices=["tune", "test", "all"])
    parser.add_argument("--base-url", default="", help="OpenAI-compatible server (model run)")
    parser.add_argument("--model-name", default="local-gguf")
    parser.add_argument("--max-tokens", type=int, default=300)
    parser.add_argument("--limit", type=int, default=0, help="first N rows only")
    parser.add_argument("--cache", default="")
    parser.add_argument("--no-system-role", action="store_true",
                        help="instructions in the user message (Gemma's chat template)")
    args = parser.parse_args()
    rows = load(args.split)
    if args.limit:
        rows = rows[:args.limit]
    print(f"## Judgement on {DATA.name}, split {args.split}\n")
    report("heuristic alone", rows, [heuristic(r["request"]) for r in rows])
    if args.base_url:
        found = asyncio.run(model_assessments(rows, args))
        report(f"model-backed ({args.model_name}, max_tokens {args.max_tokens})", rows, found)


if __name__ == "__main__":
    main()
