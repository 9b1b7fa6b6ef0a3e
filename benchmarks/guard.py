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

``--encoder`` adds the encoder detector (guard/encoder.py: MiniLM vectors and the trained head
of benchmarks/data/train_injection_encoder.py, threshold chosen on ``holdout`` and public
validation splits), alone and on top of patterns+classifier, and its latency per message on
one core (torch limited to one thread): median and 95th percentile over the corpus.

``--finetuned`` adds the fine-tuned MiniLM classifier (guard/finetuned.py, trained by
benchmarks/data/finetune_injection_encoder.py, threshold chosen on ``holdout`` and public test
rows), alone and on top of patterns+classifier, and its latency per message with torch on one
thread (int8): CPU and wall time, median and 95th percentile. Pin it to one core with
``taskset -c 0``.

``--direct`` adds benchmarks/data/fresh_direct (direct attacks and ordinary user messages,
written by a helper that never saw the detector; its README fixes the halves): ``dcal`` and
``dtest`` rows, and per family and kind on the test half. Nothing is tuned on either half.

Usage: python benchmarks/guard.py [--repeat 5] [--semantic] [--encoder] [--finetuned] [--direct]
"""

from __future__ import annotations

import argparse
import csv
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
DIRECT = Path(__file__).resolve().parent / "data" / "fresh_direct"


def direct_rows() -> list[dict[str, str]]:
    """fresh_direct as corpus rows: split ``dcal`` (id ends in an even digit) or ``dtest``."""
    rows = []
    for name, label, column in (("attacks", "attack", "family"), ("benign", "benign", "kind")):
        with (DIRECT / f"{name}.tsv").open(encoding="utf-8", newline="") as f:
            for r in csv.DictReader(f, delimiter="\t"):
                text = r["text"].replace("\\n", "\n").replace("\\t", "\t")
                split = "dcal" if int(r["id"][-1]) % 2 == 0 else "dtest"
                rows.append({"text": text, "label": label, "split": split,
                             "category": r[column]})
    return rows

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
    for split in ("dev", "holdout", "holdout2", "fresh", "untuned", "dcal", "dtest"):
        part = [r for r in rows if split == r["split"] or (
            split == "untuned" and r["split"] in UNTUNED)]
        if not part:
            continue
        att = [detect(r["text"]) for r in part if r["label"] == "attack"]
        ben = [detect(r["text"]) for r in part if r["label"] == "benign"]
        out[split] = (f"TP {sum(att):3d}/{len(att):3d} = {sum(att) / len(att):6.1%}   "
                      f"FP {sum(ben):2d}/{len(ben):3d} = {sum(ben) / len(ben):5.1%}")
    return out


def per_category(rows: list[dict[str, str]],
                 columns: list[tuple[str, Callable[[str], bool]]],
                 splits: tuple[str, ...] = UNTUNED) -> None:
    """TPR per attack family and FPR on ordinary text (per kind for ``dtest``)."""
    untuned = [r for r in rows if r["split"] in splits]
    fams: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in untuned:
        ordinary = "(ordinary" + (f" {r['category']}" if r["split"] == "dtest" else "")
        fams[r["category"] if r["label"] == "attack" else ordinary + ": FPR)"].append(r)
    print(f"\nby family, never-tuned splits ({' + '.join(splits)})")
    print(f"  {'family':24s} {'n':>4s}" + "".join(f" {name:>12s}" for name, _ in columns))
    for cat, part in sorted(fams.items()):
        cells = [sum(fn(r["text"]) for r in part) / len(part) for _, fn in columns]
        print(f"  {cat:24s} {len(part):4d}" + "".join(f" {c:12.1%}" for c in cells))


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
    ap.add_argument("--encoder", action="store_true")
    ap.add_argument("--finetuned", action="store_true")
    ap.add_argument("--direct", action="store_true")
    args = ap.parse_args()
    rows = [json.loads(line) for path in (CORPUS, FRESH)
            for line in path.read_text("utf-8").splitlines()]
    rows += direct_rows() if args.direct else []
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
    if args.encoder:
        encoder = _encoder(rows)
        detectors += [("encoder", encoder),
                      ("pat+clf+enc", lambda t: combined(t) or encoder(t))]
    if args.finetuned:
        tuned = _finetuned(rows)
        detectors += [("finetuned", tuned),
                      ("pat+clf+ft", lambda t: combined(t) or tuned(t))]
    for name, fn in detectors:
        for split, line in rates(rows, fn).items():
            print(f"{name:12s} {split:8s} {line}")
    columns = [("patterns", thinkloop), ("classifier", classifier), ("both", combined)]
    columns += [(n, fn) for n, fn in detectors if n in ("encoder", "pat+clf+enc", "finetuned",
                                                             "pat+clf+ft")]
    per_category(rows, columns)
    if args.direct:
        per_category(rows, columns, ("dtest",))
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


def _encoder(rows: list[dict[str, str]]) -> Callable[[str], bool]:
    import torch

    from thinkloop.guard.encoder import EncoderDetector

    torch.set_num_threads(1)  # one core: the model runs in this thread only
    det = EncoderDetector()
    start = time.perf_counter()
    det.scan("warm up", wait=True)
    load = time.perf_counter() - start
    verdicts: dict[str, bool] = {}
    wall: list[float] = []
    cpu: list[float] = []  # this thread's CPU time: the cost on one core, whatever the load
    for r in rows:
        start, start_cpu = time.perf_counter(), time.thread_time()
        verdicts[r["text"]] = bool(det.scan(r["text"]))
        cpu.append(time.thread_time() - start_cpu)
        wall.append(time.perf_counter() - start)
    print(f"(encoder: model load {load:.1f} s; per message, one thread: "
          f"CPU median {_pct(cpu, 50):.1f} ms p95 {_pct(cpu, 95):.1f} ms; "
          f"wall median {_pct(wall, 50):.1f} ms p95 {_pct(wall, 95):.1f} ms)\n")
    return lambda text: verdicts[text] if text in verdicts else bool(det.scan(text))


def _finetuned(rows: list[dict[str, str]]) -> Callable[[str], bool]:
    from thinkloop.guard.finetuned import shipped

    start = time.perf_counter()
    det = shipped()  # one torch thread
    det.scan("warm up")
    load = time.perf_counter() - start
    verdicts: dict[str, bool] = {}
    wall: list[float] = []
    cpu: list[float] = []
    for r in rows:
        start, start_cpu = time.perf_counter(), time.thread_time()
        verdicts[r["text"]] = bool(det.scan(r["text"]))
        cpu.append(time.thread_time() - start_cpu)
        wall.append(time.perf_counter() - start)
    big = "lorem ipsum dolor sit amet " * 1200
    big_t = _once(lambda: det.scan(big))
    print(f"(finetuned: model load {load:.1f} s; per message, one thread: "
          f"CPU median {_pct(cpu, 50):.1f} ms p95 {_pct(cpu, 95):.1f} ms; "
          f"wall median {_pct(wall, 50):.1f} ms p95 {_pct(wall, 95):.1f} ms; "
          f"a 32K-char message {big_t * 1e3:.0f} ms)\n")
    return lambda text: verdicts[text] if text in verdicts else bool(det.scan(text))


def _pct(values: list[float], q: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, q * len(ordered) // 100)] * 1e3


def _once(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
