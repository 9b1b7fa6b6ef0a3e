"""Input-guard detection rates and scan cost on the injection corpus.

The corpus (tests/guard/data/injection_corpus.jsonl, built by
benchmarks/data/build_injection_corpus.py) has three splits: ``dev``, which the patterns were
tuned on; ``holdout``, written after that and used only to choose the semantic detector's
threshold; ``holdout2``, written before the semantic detector existed and never used to tune
anything: the honest estimate. The baseline is GoClaw's six patterns as its documentation
describes them (one regex each, raw text, no normalisation), measured in the same run.

``fresh`` (tests/guard/data/injection_fresh.jsonl, benchmarks/data/build_fresh_corpus.py) was
written for issue 17 before the classifier was measured on it and is never tuned on either.
The shipped classifier (guard/classifier.py) was trained on public corpora plus ``dev``, its
threshold set on ``holdout``'s ordinary texts; ``holdout2`` and ``fresh`` are its honest test.
Per-family rates are printed for the never-tuned splits together.

``--semantic`` adds the optional embedding detector (local MiniLM, extra ``workflows``) with
its shipped examples (dev + holdout), alone and together with the patterns.

Usage: python benchmarks/guard.py [--repeat 5] [--semantic]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from thinkloop.guard import scan_input
from thinkloop.guard.classifier import Classifier

DATA = Path(__file__).resolve().parents[1] / "tests" / "guard" / "data"
CORPUS = DATA / "injection_corpus.jsonl"
FRESH = DATA / "injection_fresh.jsonl"
UNTUNED = ("holdout2", "fresh")

GOCLAW_SIX = [re.compile(p, re.IGNORECASE) for p in (
    r"ignore\s+(?:all\s+)?(?:previous|prior|above)\s+(?:instructions|prompts|rules)",
    r"you\s+are\s+now\s+",
    r"<\|im_start\|>system|\[system\]|<system>",
    r"new\s+instructions\s*:|override\s*:",
    r"\x00",
    r"end\s+of\s+system|</instructions>",
)]


def baseline(text: str) -> bool:
    return any(p.search(text) for p in GOCLAW_SIX)


def thinkloop(text: str) -> bool:
    return bool(scan_input(text))


def classifier(text: str) -> bool:
    return bool(Classifier.load().scan(text))


def combined(text: str) -> bool:
    return thinkloop(text) or classifier(text)


def rates(rows: list[dict[str, str]], detect: Callable[[str], bool]) -> dict[str, str]:
    out: dict[str, str] = {}
    for split in ("dev", "holdout", "holdout2", "fresh", "untuned"):
        part = [r for r in rows if split == r["split"] or (
            split == "untuned" and r["split"] in UNTUNED)]
        att = [detect(r["text"]) for r in part if r["label"] == "attack"]
        ben = [detect(r["text"]) for r in part if r["label"] == "benign"]
        out[split] = (f"TP {sum(att):3d}/{len(att):3d} = {sum(att) / len(att):6.1%}   "
                      f"FP {sum(ben):2d}/{len(ben):3d} = {sum(ben) / len(ben):5.1%}")
    return out


def per_category(rows: list[dict[str, str]]) -> None:
    """TPR per attack family and FPR on ordinary text, on the never-tuned splits."""
    untuned = [r for r in rows if r["split"] in UNTUNED]
    fams: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in untuned:
        fams[r["category"] if r["label"] == "attack" else "(ordinary: FPR)"].append(r)
    print(f"\nby family, never-tuned splits ({' + '.join(UNTUNED)})")
    print(f"  {'family':24s} {'n':>4s} {'patterns':>9s} {'classifier':>11s} {'both':>7s}")
    for cat, part in sorted(fams.items()):
        cells = [sum(fn(r["text"]) for r in part) / len(part)
                 for fn in (thinkloop, classifier, combined)]
        print(f"  {cat:24s} {len(part):4d} {cells[0]:9.1%} {cells[1]:11.1%} {cells[2]:7.1%}")


def timing(rows: list[dict[str, str]], detect: Callable[[str], bool], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for r in rows:
            detect(r["text"])
        runs.append((time.perf_counter() - start) / len(rows))
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--semantic", action="store_true")
    args = ap.parse_args()
    rows = [json.loads(line) for path in (CORPUS, FRESH)
            for line in path.read_text("utf-8").splitlines()]
    print(f"corpus: {sum(r['label'] == 'attack' for r in rows)} attacks, "
          f"{sum(r['label'] == 'benign' for r in rows)} ordinary requests\n")
    print(f"{'detector':12s} {'split':8s} result")
    detectors: list[tuple[str, Callable[[str], bool]]] = [
        ("goclaw-six", baseline), ("patterns", thinkloop), ("classifier", classifier),
        ("patterns+clf", combined)]
    if args.semantic:
        semantic = _semantic(rows)
        detectors += [("semantic", semantic),
                      ("patterns+sem", lambda t: thinkloop(t) or semantic(t))]
    for name, fn in detectors:
        for split, line in rates(rows, fn).items():
            print(f"{name:12s} {split:8s} {line}")
    per_category(rows)
    base_t, ours_t = timing(rows, baseline, args.repeat), timing(rows, thinkloop, args.repeat)
    clf_t = timing(rows, classifier, args.repeat)
    big = "lorem ipsum dolor sit amet " * 1200  # ~32K chars, the truncation limit
    big_t = statistics.median(
        _once(lambda: scan_input(big)) for _ in range(args.repeat))
    print(f"\nscan cost per message (median of {args.repeat})")
    print(f"  goclaw-six   {base_t * 1e6:9.1f} us")
    print(f"  patterns     {ours_t * 1e6:9.1f} us   ({ours_t / base_t:.0f}x the baseline)")
    print(f"  classifier   {clf_t * 1e6:9.1f} us")
    print(f"  patterns on a 32K-char message: {big_t * 1e3:.1f} ms")
    clf_big = statistics.median(_once(lambda: Classifier.load().scan(big)) for _ in range(3))
    print(f"  classifier on a 32K-char message: {clf_big * 1e3:.1f} ms")


def _semantic(rows: list[dict[str, str]]) -> Callable[[str], bool]:
    from thinkloop.guard.semantic import SemanticDetector
    from thinkloop.tools.builtin.embeddings import MiniLMEmbedder

    det = SemanticDetector(MiniLMEmbedder())
    start = time.perf_counter()
    verdicts = {r["text"]: bool(det.scan(r["text"])) for r in rows}
    per = (time.perf_counter() - start) / len(rows)
    print(f"(semantic: {per * 1e3:.1f} ms per message, model load and examples included)\n")
    return lambda text: verdicts[text] if text in verdicts else bool(det.scan(text))


def _once(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
