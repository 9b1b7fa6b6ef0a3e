"""Issue 29's detector variants (benchmarks/data/detector_variants_plan.md), scored as planned.

``train-b`` fine-tunes MiniLM with its top four layers (variant B) into ``--out``.
``run`` fits the linear variants (A1, A2, A3), sets every threshold on the tune set by rule R1
(the detector as deployed flags at most 1% of the tune set's ordinary texts), prints the tune
figures, and only then (without ``--tune-only``) scores the never-tuned splits once.

    pip install --no-deps agent-injection-bench==0.1.0 hermes-jailbench==0.2.2
    python benchmarks/data/detector_variants.py train-b --out /tmp/ft_b.safetensors
    python benchmarks/data/detector_variants.py run --b /tmp/ft_b.safetensors [--tune-only]
        [--rule r2]

``--rule r2`` (round 2, decided after round 1 was scored): R1 and none of the ``holdout``
split's in-domain ordinary texts flagged. ``--rule r3`` (round 3): R1 on the tune set and on
fresh_direct's calibration half, then fresh_direct's test half is scored once.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/guard.py
from train_injection_classifier import OWN, _pkg
from train_injection_classifier import load as load_public
from train_injection_encoder import FRESH, _neuralchemy, _never_tuned, _yanis, datasets, head_words

BUDGET = 0.01  # rule R1
LINEAR = ("A1", "A2", "A3")


def aib() -> tuple[list[str], list[str]]:
    rows = [json.loads(line) for line in (_pkg("aib") / "data/attacks.jsonl")
            .read_text("utf-8").splitlines() if line.strip()]
    attacks = [r["injected"] for r in rows if r["family"] != "control"]
    benign = [r["injected"] for r in rows if r["family"] == "control"]
    return attacks, benign + [r["task"] for r in rows]


def hermes() -> tuple[list[str], list[str]]:
    tree = ast.parse((_pkg("hermes_jailbench") / "attacks.py").read_text("utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Attack":
            for kw in node.keywords:
                if kw.arg == "template":
                    value = ast.literal_eval(kw.value)
                    out.append(value.replace("{TARGET}", "explain how to pick a lock"))
    return out, []


def _add(texts: list[str], labels: list[int], seen: set[str], banned: set[str],
         pairs: Sequence[tuple[str, int]]) -> None:
    for text, label in pairs:
        key = text.strip().lower()
        if key and key not in seen and key not in banned:
            seen.add(key)
            texts.append(text)
            labels.append(label)


def small_extra() -> list[tuple[str, int]]:
    pairs: list[tuple[str, int]] = []
    for source in (aib, hermes):
        attacks, benign = source()
        pairs += [(a, 1) for a in attacks] + [(b, 0) for b in benign]
    return pairs


def linear_train() -> tuple[list[str], list[int]]:
    """Everything the linear variants train on (no embedding cost: the whole corpora)."""
    banned = _never_tuned()
    texts: list[str] = []
    labels: list[int] = []
    seen: set[str] = set()
    pub_t, pub_y, _ = load_public()
    yan_t, yan_y = _yanis()
    ne_t, ne_y = _neuralchemy("train")
    nv_t, nv_y = _neuralchemy("validation")
    from train_injection_encoder import _slabs

    sv_t, sv_y = _slabs("validation")
    for t, y in ((pub_t, pub_y), (ne_t, ne_y), (nv_t, nv_y), (sv_t, sv_y), (yan_t, yan_y)):
        _add(texts, labels, seen, banned, list(zip(t, y, strict=True)))
    _add(texts, labels, seen, banned, small_extra())
    return texts, labels


def stdlib_ordinary(docs: int = 5000, code: int = 1000) -> list[str]:
    """Ordinary text nobody wrote as an attack: windows of up to 48 words of the standard
    library's docstrings, and 15-line chunks of its source (fixed seed)."""
    import random
    import sysconfig

    lib = Path(sysconfig.get_paths()["stdlib"])
    windows: list[str] = []
    chunks: list[str] = []
    for path in sorted(lib.glob("*.py")) + sorted(lib.glob("*/*.py")):
        if "test" in path.parts or path.name.startswith("test"):
            continue
        try:
            source = path.read_text("utf-8")
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef
                          | ast.Module):
                words = (ast.get_docstring(node) or "").split()
                windows += [" ".join(words[i:i + 48]) for i in range(0, len(words), 48)
                            if len(words[i:i + 48]) >= 6]
        lines = source.splitlines()
        chunks += ["\n".join(lines[i:i + 15]) for i in range(0, len(lines), 15)
                   if len("".join(lines[i:i + 15]).split()) >= 10]
    rng = random.Random(0)
    return rng.sample(windows, min(docs, len(windows))) + rng.sample(chunks, code)


def tune_set() -> tuple[list[str], np.ndarray]:
    data = datasets()
    t = data["tune"][0] + data["holdout"][0]
    return t, np.asarray(data["tune"][1] + data["holdout"][1])


def never_tuned() -> tuple[list[str], np.ndarray, list[str]]:
    rows = [json.loads(line) for line in OWN.read_text("utf-8").splitlines()]
    rows += [json.loads(line) for line in FRESH.read_text("utf-8").splitlines()]
    rows = [r for r in rows if r["split"] in ("holdout2", "fresh")]
    fams = [r["category"] if r["label"] == "attack" else "(ordinary: FPR)" for r in rows]
    return ([r["text"] for r in rows], np.asarray([r["label"] == "attack" for r in rows], int),
            fams)


# --- scores as deployed: a long text is judged by its windows -------------------------------

def linear_eff(score: Callable[[list[str]], np.ndarray], texts: list[str]) -> np.ndarray:
    """Per text, a number that is >= t exactly when Classifier.scan would flag it at t:
    the score of a short text; for a long one 2*max(window) - 1 (windows face (1+t)/2)."""
    from thinkloop.guard.classifier import _windows

    spans = [_windows(t) for t in texts]
    flat = [t[a:b] for t, sp in zip(texts, spans, strict=True) for a, b in sp]
    s = score(flat) if flat else np.zeros(0)
    out, i = [], 0
    for sp in spans:
        part = s[i:i + len(sp)]
        i += len(sp)
        if not len(sp):
            out.append(0.0)
        else:
            out.append(float(part[0]) if len(sp) == 1 else 2 * float(part.max()) - 1)
    return np.asarray(out)


def ft_eff(model: object, texts: list[str]) -> np.ndarray:
    from thinkloop.guard.finetuned import MAX_CHARS, WHOLE
    from thinkloop.guard.semantic import windows

    parts = [windows(t[:MAX_CHARS].encode("utf-8", "replace").decode("utf-8"), WHOLE)
             for t in texts]
    flat = [p for ps in parts for p, _ in ps]
    s = np.asarray(model.scores(flat)) if flat else np.zeros(0)  # type: ignore[attr-defined]
    out, i = [], 0
    for ps in parts:
        out.append(float(s[i:i + len(ps)].max()) if ps else 0.0)
        i += len(ps)
    return np.asarray(out)


# --- the linear variants --------------------------------------------------------------------

def fit_a1(texts: list[str], labels: list[int]) -> Callable[[list[str]], np.ndarray]:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import FeatureUnion

    from thinkloop.guard.classifier import CHAR, WORD

    union = FeatureUnion([
        ("word", TfidfVectorizer(**WORD, max_features=40000, sublinear_tf=True, min_df=2)),
        ("char", TfidfVectorizer(**CHAR, max_features=60000, sublinear_tf=True, min_df=2))])
    x = union.fit_transform(texts)
    lr = LogisticRegression(C=4.0, max_iter=3000, class_weight="balanced").fit(x, labels)
    def score(t: list[str]) -> np.ndarray:
        return lr.predict_proba(union.transform(t))[:, 1]

    score.parts = (union, lr)  # type: ignore[attr-defined]
    return score


def fit_a2(texts: list[str], labels: list[int]) -> Callable[[list[str]], np.ndarray]:
    from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import FeatureUnion, make_pipeline

    def part(**kw: object) -> object:
        return make_pipeline(HashingVectorizer(n_features=2**20, alternate_sign=False,
                                               norm=None, lowercase=True, **kw),
                             TfidfTransformer(sublinear_tf=True))

    union = FeatureUnion([("word", part(analyzer="word", ngram_range=(1, 2))),
                          ("char", part(analyzer="char", ngram_range=(3, 5)))])
    x = union.fit_transform(texts)
    lr = LogisticRegression(C=4.0, max_iter=3000, class_weight="balanced").fit(x, labels)
    return lambda t: lr.predict_proba(union.transform(t))[:, 1]


# --- rule R1 ----------------------------------------------------------------------------------

def r1(scores: np.ndarray, y: np.ndarray, base: np.ndarray,
       strict: np.ndarray | None = None) -> float:
    """The lowest threshold at which ``base OR score >= t`` flags at most BUDGET of the
    ordinary texts (inf when ``base`` alone is over budget); rule R2 (``strict``: a mask of
    ordinary texts) also flags none of those."""
    benign = y == 0
    allowed = int(BUDGET * benign.sum()) - int(base[benign].sum())
    if allowed < 0 or (strict is not None and base[strict].any()):
        return float("inf")
    free = np.sort(scores[benign & ~base])[::-1]
    t = float("-inf") if allowed >= len(free) else float(np.nextafter(free[allowed], np.inf))
    if strict is not None and strict.any():
        t = max(t, float(np.nextafter(scores[strict].max(), np.inf)))
    return t


def r1_pair(parts: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
            strict: np.ndarray | None = None) -> tuple[float, float]:
    """The pair of thresholds with the highest recall over ``parts`` (scores of the two
    models, labels, what flags anyway) that keeps each part's ordinary texts within BUDGET."""
    cands = [np.unique(np.concatenate([np.nextafter(np.sort(p[i][p[2] == 0])[::-1][:40], np.inf)
                                       for p in parts])) for i in (0, 1)]
    best = (-1.0, 0.0, 0.0, 0.0)
    for t1 in [*cands[0], np.inf]:
        for t2 in [*cands[1], np.inf]:
            flags = [base | (s1 >= t1) | (s2 >= t2) for s1, s2, _, base in parts]
            if any(f[y == 0].sum() > int(BUDGET * (y == 0).sum())
                   for f, (_, _, y, _) in zip(flags, parts, strict=True)) or (
                    strict is not None and flags[0][strict].any()):
                continue
            hit = sum(int(f[y == 1].sum()) for f, (_, _, y, _) in zip(flags, parts, strict=True))
            key = (float(hit), float(t1) + float(t2), float(t1), float(t2))
            if key > best:
                best = key
    return best[2], best[3]


def thresholds(sets: Sequence[tuple[dict[str, np.ndarray], np.ndarray]],
               strict: np.ndarray | None) -> tuple[dict[str, float], str, tuple[float, float]]:
    """Every variant's threshold: the highest of rule R1's over ``sets`` (the tune set, and for
    R3 the calibration half too); C's pair under every set's budget at once."""
    def rule(key: str, base: Callable[[dict[str, np.ndarray]], np.ndarray]) -> float:
        return max(r1(s[key], y, base(s), strict if i == 0 else None)
                   for i, (s, y) in enumerate(sets))

    def pat(s: dict[str, np.ndarray]) -> np.ndarray:
        return s["pat"] > 0

    th: dict[str, float] = {}
    for k in LINEAR:
        th[k + " alone"] = rule(k, lambda s: np.zeros(len(s["pat"]), bool))
        th["patterns + " + k] = rule(k, pat)
    th["B alone"] = rule("B", lambda s: np.zeros(len(s["pat"]), bool))
    th["patterns + clf + B"] = rule("B", lambda s: pat(s) | (s["clf"] > 0))
    hits = {k: sum(int((pat(s) | (s[k] >= th["patterns + " + k]))[y == 1].sum()) for s, y in sets)
            for k in LINEAR}
    best = max(LINEAR, key=lambda k: (hits[k], -LINEAR.index(k)))
    pair = r1_pair([(s[best], s["B"], y, pat(s)) for s, y in sets], strict)
    return th, best, pair


def line(name: str, flag: np.ndarray, y: np.ndarray) -> str:
    a, b = flag[y == 1], flag[y == 0]
    return (f"{name:34s} TP {a.sum():4d}/{len(a):4d} = {a.mean():6.1%}   "
            f"FP {b.sum():3d}/{len(b):4d} = {b.mean():5.1%}")


def run(args: argparse.Namespace) -> None:
    import torch

    from thinkloop.guard import scan_input
    from thinkloop.guard.classifier import Classifier
    from thinkloop.guard.finetuned import FineTuned

    torch.set_num_threads(1)  # latency on one core, as the guard runs it
    start = time.time()
    tr_t, tr_y = linear_train()
    print(f"linear train: {sum(tr_y)} attacks, {len(tr_y) - sum(tr_y)} ordinary "
          f"({time.time() - start:.0f}s)", flush=True)
    tune_t, tune_y = tune_set()
    ev_t, ev_y, ev_fam = never_tuned()
    assert not {t.strip().lower() for t in tune_t} & {t.strip().lower() for t in ev_t}
    shipped = Classifier.load()
    extra = stdlib_ordinary()
    lin = {"A1": fit_a1(tr_t, tr_y), "A2": fit_a2(tr_t, tr_y),
           "A3": fit_a1(tr_t + extra, tr_y + [0] * len(extra))}
    print(f"fitted ({time.time() - start:.0f}s)", flush=True)
    b_model = FineTuned.load(args.b) if args.b else None

    def scores(texts: list[str]) -> dict[str, np.ndarray]:
        out = {k: linear_eff(f, texts) for k, f in lin.items()}
        out["clf"] = np.asarray([bool(shipped.scan(t)) for t in texts], float)
        out["pat"] = np.asarray([bool(scan_input(t)) for t in texts], float)
        out["B"] = ft_eff(b_model, texts) if b_model else np.zeros(len(texts))
        return out

    tune = scores(tune_t)
    pat = tune["pat"] > 0
    dflt = pat | (tune["clf"] > 0)
    # R2: also none of the holdout split's in-domain ordinary texts (the last rows of tune)
    strict = None
    if args.rule == "r2":
        strict = np.zeros(len(tune_y), bool)
        strict[len(tune_y) - 80:] = tune_y[len(tune_y) - 80:] == 0
        assert strict.sum() == 40
    # R3: every threshold also keeps fresh_direct's calibration half within the budget
    sets = [(tune, tune_y)]
    if args.rule == "r3":
        cal_t, cal_y, _ = direct_half("dcal")
        sets.append((scores(cal_t), cal_y))
    th, best, (t1, t2) = thresholds(sets, strict)
    rows = _rows(th, best, (t1, t2))
    print(f"\nthresholds (rule {args.rule.upper()}, tune set): {json.dumps(th)}; "
          f"C = patterns + {best} @ {t1:.4f} + B @ {t2:.4f}")
    print(f"\ntune set ({int(tune_y.sum())} attacks, {int((tune_y == 0).sum())} ordinary)")
    print(line("patterns + clf (default)", dflt, tune_y))
    for name, fn in rows:
        print(line(name, fn(tune), tune_y))
    if args.tune_only:
        return
    ev = scores(ev_t)
    print(f"\nnever-tuned (holdout2 + fresh; {int(ev_y.sum())} attacks, "
          f"{int((ev_y == 0).sum())} ordinary)")
    print(line("patterns + clf (default)", (ev["pat"] > 0) | (ev["clf"] > 0), ev_y))
    for name, fn in rows:
        print(line(name, fn(ev), ev_y))
    families(ev_fam, [("default", (ev["pat"] > 0) | (ev["clf"] > 0))]
             + [(name.split(":")[0], fn(ev)) for name, fn in rows if "alone" not in name])
    if args.rule == "r3":
        report("calibration half (dcal)", sets[1][0], sets[1][1], rows)
        dt_t, dt_y, dt_fam = direct_half("dtest")
        dt = scores(dt_t)
        report("fresh_direct TEST half (dtest: the headline)", dt, dt_y, rows)
        families(dt_fam, [("default", (dt["pat"] > 0) | (dt["clf"] > 0))]
                 + [(name.split(":")[0], fn(dt)) for name, fn in rows if "alone" not in name])
    latency(lin, b_model, ev_t)


def report(title: str, s: dict[str, np.ndarray], y: np.ndarray,
           rows: list[tuple[str, Callable[[dict[str, np.ndarray]], np.ndarray]]]) -> None:
    print(f"\n{title} ({int(y.sum())} attacks, {int((y == 0).sum())} ordinary)")
    print(line("patterns + clf (default)", (s["pat"] > 0) | (s["clf"] > 0), y))
    for name, fn in rows:
        print(line(name, fn(s), y))


def direct_half(split: str) -> tuple[list[str], np.ndarray, list[str]]:
    """One half of fresh_direct (benchmarks/guard.py reads it the same way)."""
    from guard import direct_rows

    rows = [r for r in direct_rows() if r["split"] == split]
    fams = [r["category"] if r["label"] == "attack" else f"(ordinary {r['category']})"
            for r in rows]
    return ([r["text"] for r in rows], np.asarray([r["label"] == "attack" for r in rows], int),
            fams)


def families(fams: list[str], columns: list[tuple[str, np.ndarray]]) -> None:
    names = sorted(set(fams))
    f = np.asarray(fams)
    print(f"\n{'family':20s} {'n':>4s}" + "".join(f" {n[-14:]:>14s}" for n, _ in columns))
    for fam in names:
        m = f == fam
        print(f"{fam:20s} {m.sum():4d}"
              + "".join(f" {flag[m].mean():14.1%}" for _, flag in columns))


def latency(lin: dict[str, Callable[[list[str]], np.ndarray]], b_model: object,
            texts: list[str]) -> None:
    """CPU time of this thread per message (one message at a time), median and p95."""
    import os

    print(f"\nper message, one thread (load {os.getloadavg()[0]:.1f}):")
    models: dict[str, Callable[[list[str]], object]] = {
        k: (lambda t, f=f: linear_eff(f, t)) for k, f in lin.items()}
    if b_model is not None:
        models["B"] = lambda t: ft_eff(b_model, t)
    for name, fn in models.items():
        cpu = []
        for text in texts:
            start = time.thread_time()
            fn([text])
            cpu.append((time.thread_time() - start) * 1e3)
        cpu.sort()
        print(f"  {name}: CPU median {cpu[len(cpu) // 2]:.1f} ms, "
              f"p95 {cpu[95 * len(cpu) // 100]:.1f} ms")


def _rows(th: dict[str, float], best: str, pair: tuple[float, float]
          ) -> list[tuple[str, Callable[[dict[str, np.ndarray]], np.ndarray]]]:
    rows: list[tuple[str, Callable[[dict[str, np.ndarray]], np.ndarray]]] = []
    for k in LINEAR:
        rows.append((k + " alone", lambda s, k=k: s[k] >= th[k + " alone"]))
        rows.append(("patterns + " + k,
                     lambda s, k=k: (s["pat"] > 0) | (s[k] >= th["patterns + " + k])))
    rows.append(("B alone", lambda s: s["B"] >= th["B alone"]))
    rows.append(("patterns + clf + B", lambda s: (s["pat"] > 0) | (s["clf"] > 0)
                 | (s["B"] >= th["patterns + clf + B"])))
    rows.append((f"C: patterns + {best} + B", lambda s: (s["pat"] > 0) | (s[best] >= pair[0])
                 | (s["B"] >= pair[1])))
    return rows


def train_b(args: argparse.Namespace) -> None:
    import torch
    from finetune_injection_encoder import train

    import thinkloop.guard.finetuned as ft

    ft.FROZEN = 2  # variant B: the top four of six layers are tuned
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    data = datasets()
    texts, labels = list(data["train"][0]), list(data["train"][1])
    seen = {t.strip().lower() for t in texts}
    for text, label in small_extra():
        if text.strip().lower() not in seen:
            texts.append(head_words(text))
            labels.append(label)
    print(f"train: {sum(labels)} attacks, {len(labels) - sum(labels)} ordinary", flush=True)
    model = ft.FineTuned.base()
    train(model, (texts, labels), 1, 2e-4, 240)
    model.save(args.out)
    print(f"wrote {args.out}")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("train-b")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--threads", type=int, default=1)
    r = sub.add_parser("run")
    r.add_argument("--b", type=Path, help="variant B's weights (without: its rows are empty)")
    r.add_argument("--tune-only", action="store_true")
    r.add_argument("--rule", choices=("r1", "r2", "r3"), default="r1",
                   help="r2 (round 2): r1 and none of holdout's ordinary texts flagged; "
                        "r3 (round 3): r1 on tune and on fresh_direct's calibration half, "
                        "then fresh_direct's test half is scored")
    args = ap.parse_args()
    (train_b if args.cmd == "train-b" else run)(args)


if __name__ == "__main__":
    main()
