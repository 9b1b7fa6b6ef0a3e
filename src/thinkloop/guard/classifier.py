"""A trained linear prompt-injection classifier that runs on numpy alone.

TF-IDF over word 1-2-grams and character 3-5-grams (within word boundaries), each L2
normalised, and logistic regression: the scikit-learn pipeline that
``benchmarks/data/train_injection_classifier.py`` fits on public labelled corpora, stored as
plain arrays in ``guard/data/classifier.npz`` (a few MB) and scored here exactly as
scikit-learn would. Long texts are scored in overlapping windows of words, so an injection
buried in a long document is not diluted by it; each window over the threshold is a finding
that names the score and the n-grams that pushed it up.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from thinkloop.guard.patterns import Severity
from thinkloop.guard.scan import Finding

# The vectorisers' settings: the training script passes the same ones to scikit-learn.
WORD: dict[str, Any] = {"analyzer": "word", "ngram_range": (1, 2), "lowercase": True}
CHAR: dict[str, Any] = {"analyzer": "char_wb", "ngram_range": (3, 5), "lowercase": True}
_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_SPACES = re.compile(r"\s\s+")
WHOLE = 48  # texts up to this many words are scored whole
WINDOW = 20  # longer ones in windows of this many words (half a window of overlap), so
# the words around an injection in a long document do not dilute it


def _word_ngrams(text: str) -> list[str]:
    tokens = _TOKEN.findall(text.lower())
    out = list(tokens)
    out += [f"{a} {b}" for a, b in itertools.pairwise(tokens)]
    return out


def _char_ngrams(text: str) -> list[str]:
    out: list[str] = []
    for word in _SPACES.sub(" ", text.lower()).split():
        w = f" {word} "
        for n in range(3, 6):
            out += [w[i:i + n] for i in range(max(1, len(w) - n + 1))]
            if len(w) <= n:  # as scikit-learn: a word no longer than n is counted once
                break
    return out


class _Part:
    """One TF-IDF vectoriser (sublinear tf, L2 norm) and its slice of the coefficients."""

    def __init__(self, terms: Sequence[str], idf: Any, coef: Any) -> None:
        import numpy as np  # ~100 ms: loaded with the first classifier, not with thinkloop

        self.terms = list(terms)
        self.index = {t: i for i, t in enumerate(self.terms)}
        self.idf = np.asarray(idf, dtype=np.float64)
        self.coef = np.asarray(coef, dtype=np.float64)

    def contributions(self, grams: list[str]) -> dict[int, float]:
        counts = Counter(self.index[g] for g in grams if g in self.index)
        if not counts:
            return {}
        weights = {i: (1.0 + math.log(c)) * self.idf[i] for i, c in counts.items()}
        norm = math.sqrt(sum(w * w for w in weights.values()))
        return {i: w / norm * self.coef[i] for i, w in weights.items()}


@dataclass(frozen=True)
class Verdict:
    score: float
    top: tuple[str, ...]  # the n-grams that added most to the score


class Classifier:
    def __init__(self, word_terms: Sequence[str], word_idf: Any, word_coef: Any,
                 char_terms: Sequence[str], char_idf: Any, char_coef: Any, intercept: float,
                 threshold: float) -> None:
        self.word = _Part(word_terms, word_idf, word_coef)
        self.char = _Part(char_terms, char_idf, char_coef)
        self.intercept = intercept
        self.threshold = threshold

    def with_threshold(self, threshold: float) -> Classifier:
        clone = Classifier.__new__(Classifier)
        clone.__dict__.update(self.__dict__)
        clone.threshold = threshold
        return clone

    def verdict(self, text: str) -> Verdict:
        w = self.word.contributions(_word_ngrams(text))
        c = self.char.contributions(_char_ngrams(text))
        z = self.intercept + sum(w.values()) + sum(c.values())
        top = sorted(w.items(), key=lambda kv: -kv[1])[:3]
        return Verdict(1.0 / (1.0 + math.exp(-z)),
                       tuple(self.word.terms[i] for i, v in top if v > 0))

    def score(self, text: str) -> float:
        return self.verdict(text).score

    def scan(self, text: str) -> list[Finding]:
        """A ``classifier`` finding per window scoring at or over the threshold."""
        found: list[Finding] = []
        spans = _windows(text)
        # A window of a long document is judged more strictly than a whole message: license
        # texts and manuals say "you must" and "your system" in every window.
        bar = self.threshold if len(spans) <= 1 else (1 + self.threshold) / 2
        for span in spans:
            v = self.verdict(text[span[0]:span[1]])
            if v.score < bar:
                continue
            severity: Severity = "high" if v.score >= (1 + self.threshold) / 2 else "medium"
            why = (f"score {v.score:.2f} >= {bar:.2f}"
                   + (f"; strongest n-grams: {', '.join(v.top)}" if v.top else ""))
            if found and found[-1].span[1] >= span[0]:  # overlapping windows: one finding
                last = found.pop()
                span = (last.span[0], span[1])
                if last.severity == "high" or severity == "high":
                    severity = "high"
                why = last.why
            found.append(Finding("classifier", span, severity, "classifier", "classifier", why))
        return found

    def save(self, path: Path) -> None:
        import numpy as np

        np.savez_compressed(
            path, word_terms=np.asarray(self.word.terms), word_idf=self.word.idf,
            word_coef=self.word.coef.astype(np.float32), char_terms=np.asarray(self.char.terms),
            char_idf=self.char.idf, char_coef=self.char.coef.astype(np.float32),
            intercept=np.asarray([self.intercept]), threshold=np.asarray([self.threshold]))

    @staticmethod
    def load(path: Path | None = None) -> Classifier:
        """The classifier at ``path``, or the one shipped with thinkloop."""
        if path is None:
            return _shipped()
        import numpy as np

        with np.load(path, allow_pickle=False) as d:
            return Classifier(d["word_terms"].tolist(), d["word_idf"], d["word_coef"],
                              d["char_terms"].tolist(), d["char_idf"], d["char_coef"],
                              float(d["intercept"][0]), float(d["threshold"][0]))


@functools.lru_cache(maxsize=1)
def _shipped() -> Classifier:
    # Loading takes tens of milliseconds; every agent shares the one read-only copy.
    ref = resources.files("thinkloop.guard").joinpath("data/classifier.npz")
    with resources.as_file(ref) as path:
        return Classifier.load(path)


def _windows(text: str) -> list[tuple[int, int]]:
    starts = [m.start() for m in re.finditer(r"\S+", text)]
    ends = [m.end() for m in re.finditer(r"\S+", text)]
    if len(starts) <= WHOLE:
        return [(0, len(text))] if starts else []
    step = WINDOW // 2
    return [(starts[i], ends[min(i + WINDOW, len(ends)) - 1])
            for i in range(0, len(starts) - step, step)]
