"""A trained linear prompt-injection classifier in plain Python (numpy only for long texts).

TF-IDF over word 1-2-grams and character 3-5-grams (within word boundaries), each L2
normalised, and logistic regression: the scikit-learn pipeline that
``benchmarks/data/train_injection_classifier.py`` fits on public labelled corpora, stored as
plain arrays in ``guard/data/classifier.zip`` (terms as text, weights as little-endian
floats; 0.4 MB) and scored here exactly as scikit-learn would. Loading it imports nothing
heavy (numpy alone costs ~100 ms of the first run's CPU), so a default agent's first run
stays close to a lean one's. Long texts are scored in overlapping windows of words, so an
injection buried in a long document is not diluted by it; each window over the threshold is a
finding that names the score and the n-grams that pushed it up. A text over ``NUMPY_CHARS``
(scanned in a worker thread) has its n-grams found by numpy (guard/ngrams.py), and its
windows that cannot reach the threshold skipped unscored; one of few distinct words (attack
words in random order: every window near the bar) has every window scored by numpy at once
(guard/bulk.py), and its findings' n-grams named so too (guard/reasons.py).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
import sys
import zipfile
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from thinkloop.guard import bulk, ngrams, reasons
from thinkloop.guard.ngrams import Grams
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


def _word_counts(part: _Part, text: str) -> Counter[int]:
    """``part``'s indices of ``_word_ngrams(text)``, counted: each distinct token and pair of
    tokens looked up once (a string per bigram took 0.3 s on 1 MB of "%41"). The indices come
    in the order ``_word_ngrams`` first has them, so the weights add up in the same order."""
    tokens = ngrams.tokens(text.lower())
    counts: Counter[int] = Counter()
    distinct = Counter(tokens)
    for gram, n in distinct.items():
        if (i := part.index.get(gram)) is not None:
            counts[i] = n
    if len(text) > NUMPY_CHARS and part.firsts.isdisjoint(distinct):
        return counts  # no token starts a bigram term (1 MB of "%41": 0.35 M pairs unmade)
    for (a, b), n in Counter(itertools.pairwise(tokens)).items():
        if (i := part.index.get(f"{a} {b}")) is not None:
            counts[i] = n
    return counts


def _char_ngrams(text: str) -> list[str]:
    out: list[str] = []
    for word in _SPACES.sub(" ", text.lower()).split():
        w = f" {word} "
        for n in range(3, 6):
            out += [w[i:i + n] for i in range(max(1, len(w) - n + 1))]
            if len(w) <= n:  # as scikit-learn: a word no longer than n is counted once
                break
    return out


NUMPY_CHARS = 20_000  # longer texts have their char n-grams found by numpy (guard/ngrams.py)
DISTINCT_WORDS = 2_000  # a long text with more has its windows bounded before they are scored
LONG_WORD = 2520  # a word longer than this is counted a piece at a time (see _char_counts)


def _char_counts(part: _Part, text: str, grams: Grams | None = None) -> Counter[int]:
    """``part``'s indices of ``_char_ngrams(text)``, counted. A long word is counted a piece
    of ``LONG_WORD`` starting positions at a time, and a piece seen before is not counted
    again: a 1 MB line of one repeated motif is a few distinct pieces, not 3 million slices.
    With ``grams`` (``part``'s, for numpy), a text whose distinct pieces and short words are
    longer than ``NUMPY_CHARS`` (a 1 MB random base64 word: 400 pieces, a second of slicing)
    is counted by numpy instead, in one pass."""
    counts: Counter[int] = Counter()
    pieces: dict[str, Counter[int]] = {}
    short: list[str] = []
    lowered = text.lower()
    words = _SPACES.sub(" ", lowered).split()
    if grams is not None and len(text) > NUMPY_CHARS and _slicing(words) > NUMPY_CHARS:
        return grams.char_counts(lowered)
    for word in words:
        if len(word) + 2 <= LONG_WORD:
            short.append(word)
            continue
        w = f" {word} "
        for at in range(0, len(w), LONG_WORD):
            piece = w[at:at + LONG_WORD + 4]  # the n-grams starting in it, whole
            got = pieces.get(piece)
            if got is None:
                sliced = [piece[i:i + n] for n in (3, 4, 5)
                          for i in range(min(LONG_WORD, len(piece) - n + 1))]
                got = pieces[piece] = Counter(part.index[g] for g in sliced if g in part.index)
            counts.update(got)
    counts.update(part.index[g] for g in _char_ngrams(" ".join(short)) if g in part.index)
    return counts


def _slicing(words: list[str]) -> int:
    """How many characters ``_char_counts`` would slice n-grams from: the short words, and
    the distinct pieces of the long ones."""
    total, pieces = 0, set[str]()
    for word in words:
        if len(word) + 2 <= LONG_WORD:
            total += len(word)
        else:
            w = f" {word} "
            pieces.update(w[at:at + LONG_WORD + 4] for at in range(0, len(w), LONG_WORD))
    return total + len(pieces) * LONG_WORD


class _Part:
    """One TF-IDF vectoriser (sublinear tf, L2 norm) and its slice of the coefficients."""

    def __init__(self, terms: Sequence[str], idf: Sequence[float],
                 coef: Sequence[float]) -> None:
        self.terms = list(terms)
        self.index = {t: i for i, t in enumerate(self.terms)}
        self.idf = idf if isinstance(idf, array) else array("d", idf)
        self.coef = coef if isinstance(coef, array) else array("f", coef)

    @functools.cached_property
    def firsts(self) -> frozenset[str]:
        """The first words of the bigram terms."""
        return frozenset(t.split(" ", 1)[0] for t in self.terms if " " in t)

    def contributions(self, grams: list[str]) -> dict[int, float]:
        return self.weigh(Counter(self.index[g] for g in grams if g in self.index))

    def weigh(self, counts: Counter[int]) -> dict[int, float]:
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

    @functools.cached_property
    def grams(self) -> Grams:
        """The char n-grams' vocabulary for numpy (guard/ngrams.py), built on first use."""
        return Grams(self.char.terms, self.char.coef, self.word.terms, self.word.coef)

    def verdict(self, text: str) -> Verdict:
        w = self.word.weigh(_word_counts(self.word, text))
        c = self.char.weigh(_char_counts(self.char, text, self.grams
                                         if len(text) > NUMPY_CHARS else None))
        z = self.intercept + sum(w.values()) + sum(c.values())
        return Verdict(1.0 / (1.0 + math.exp(-z)), self._top(w))

    def _top(self, weighed: dict[int, float]) -> tuple[str, ...]:
        top = sorted(weighed.items(), key=lambda kv: -kv[1])[:3]
        return tuple(self.word.terms[i] for i, v in top if v > 0)

    def score(self, text: str) -> float:
        return self.verdict(text).score

    def scan(self, text: str) -> list[Finding]:
        """A ``classifier`` finding per window scoring at or over the threshold."""
        found: list[Finding] = []
        spans = _windows(text)
        # A window of a long document is judged more strictly than a whole message: license
        # texts and manuals say "you must" and "your system" in every window.
        bar = self.threshold if len(spans) <= 1 else (1 + self.threshold) / 2
        score = _Windows(self, text) if len(spans) > 1 else None
        chosen: list[int] = list(range(len(spans)))
        scored = bulk.scan_scores(self, score.text, score.split(), len(spans)) \
            if score is not None else None
        if scored is not None:
            return reasons.findings(self, spans, scored, bar)
        if score is not None:
            hopeless = self._hopeless(score, len(spans), bar)
            if hopeless is not None:
                chosen = [i for i, h in enumerate(hopeless) if not h]
            chosen = [i for i, s in zip(chosen, score.scores(chosen), strict=True) if s >= bar]
        verdicts: dict[tuple[str, ...], Verdict] = {}
        for i in chosen:
            span = spans[i]
            key = score.key(i) if score is not None else ()
            v = verdicts.get(key) or verdicts.setdefault(key, self.verdict(text[span[0]:span[1]]))
            if v.score < bar:
                continue
            finding = self.finding(span, v, bar)
            if found and found[-1].span[1] >= span[0]:  # overlapping windows: one finding
                last = found.pop()
                severity: Severity = "high" if "high" in (last.severity, finding.severity) \
                    else finding.severity
                finding = replace(last, span=(last.span[0], span[1]), severity=severity)
            found.append(finding)
        return found

    def finding(self, span: tuple[int, int], v: Verdict, bar: float) -> Finding:
        """A window's finding: its verdict's score against ``bar`` and strongest n-grams."""
        severity: Severity = "high" if v.score >= (1 + self.threshold) / 2 else "medium"
        why = (f"score {v.score:.2f} >= {bar:.2f}"
               + (f"; strongest n-grams: {', '.join(v.top)}" if v.top else ""))
        return Finding("classifier", span, severity, "classifier", "classifier", why)

    def _hopeless(self, score: _Windows, windows: int, bar: float) -> list[bool] | None:
        """For each window of a long text, whether it cannot score ``bar``: an upper bound of
        its score (``Grams.word_bounds``: what its words' terms can add at most) is under it.
        Skipping those loses no finding, and spares scoring each window of a text whose
        windows all differ (100,000 distinct words took a second). None: nothing skipped."""
        lowered = score.lowered
        if len(score.text) <= NUMPY_CHARS or not 0 < bar < 1 \
                or not _distinct_over(score.split(), DISTINCT_WORDS):
            return None  # few distinct words: few distinct windows, each scored once
        import numpy as np

        bounds = self.grams.word_bounds(lowered)
        if bounds is None:
            return None
        chars, tokens = bounds
        step = WINDOW // 2
        lo = np.arange(0, len(chars) - step, step)
        if len(lo) != windows:
            return None  # words told apart otherwise than _windows did: score them all
        hi = np.minimum(lo + WINDOW, len(chars))
        chars, tokens = (np.concatenate(([0.0], np.cumsum(a))) for a in (chars, tokens))
        z = (self.intercept + np.sqrt(np.maximum(tokens[hi] - tokens[lo], 0.0))
             + np.sqrt(np.maximum(chars[hi] - chars[lo], 0.0)))
        # A margin for rounding: the bound is exact arithmetic's, the scores are floats.
        hopeless: list[bool] = (z < math.log(bar) - math.log1p(-bar) - 1e-6).tolist()
        return hopeless

    def save(self, path: Path) -> None:
        """Write the classifier as ``load`` reads it: a zip of terms and raw weights."""
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for name, part in (("word", self.word), ("char", self.char)):
                z.writestr(f"{name}_terms.txt", "\n".join(part.terms))
                z.writestr(f"{name}_idf.f64", _le(array("d", part.idf)).tobytes())
                z.writestr(f"{name}_coef.f32", _le(array("f", part.coef)).tobytes())
            z.writestr("meta.json", json.dumps({"intercept": self.intercept,
                                                "threshold": self.threshold}))

    @staticmethod
    def load(path: Path | None = None) -> Classifier:
        """The classifier at ``path`` (written by ``save``), or the one shipped with thinkloop."""
        if path is None:
            return _shipped()
        with zipfile.ZipFile(path) as z:
            def part(name: str) -> tuple[list[str], array[float], array[float]]:
                terms = z.read(f"{name}_terms.txt").decode().split("\n")
                idf = _le(array("d", z.read(f"{name}_idf.f64")))
                coef = _le(array("f", z.read(f"{name}_coef.f32")))
                if not len(terms) == len(idf) == len(coef):
                    raise ValueError(f"{path}: {name} terms and weights differ in length")
                return terms, idf, coef

            meta = json.loads(z.read("meta.json"))
            return Classifier(*part("word"), *part("char"), float(meta["intercept"]),
                              float(meta["threshold"]))


def _le(a: array[float]) -> array[float]:
    """Little-endian on disk whatever the machine (the weights are stored that way)."""
    if sys.byteorder == "big":
        a.byteswap()
    return a


@functools.lru_cache(maxsize=1)
def _shipped() -> Classifier:
    # Loading takes tens of milliseconds; every agent shares the one read-only copy.
    ref = resources.files("thinkloop.guard").joinpath("data/classifier.zip")
    with resources.as_file(ref) as path:
        return Classifier.load(path)


def _windows(text: str) -> list[tuple[int, int]]:
    """The spans of a text's windows: WINDOW words each, starting every WINDOW // 2 words."""
    # Half a window of words per match: window i runs from group i's start to group i + 1's
    # end (the last group may be shorter). A span per word took 0.3 s on 1 MB of short words.
    groups = [m.span() for m in _HALVES.finditer(text)]
    if len(groups) * (WINDOW // 2) <= WHOLE + WINDOW // 2 and len(_WORDS.findall(text)) <= WHOLE:
        return [(0, len(text))] if groups else []
    return [(groups[i][0], groups[i + 1][1]) for i in range(len(groups) - 1)]


_WORDS = re.compile(r"\S+")
_HALVES = re.compile(rf"\S+(?:\s+\S+){{0,{WINDOW // 2 - 1}}}")


class _Windows:
    """The score of each window of a long text, as ``verdict`` gives it, with the work of a
    word done once per distinct word (its character n-grams and tokens) and of a window once
    per distinct window: a 1 MB text took seconds when every window was scored from its text.
    """

    def __init__(self, clf: Classifier, text: str) -> None:
        self.clf = clf
        self.text = text
        self.lowered = text.lower()
        self.words: list[str] = []
        # A word's n-grams and tokens, worked out when a window holding it is first scored
        # (the windows the bound rules out are not).
        self.chars: dict[str, list[int]] = {}  # term ids, repeated as often as found
        self.tokens: dict[str, list[str]] = {}
        self.seen: dict[tuple[str, ...], float] = {}

    def split(self) -> list[str]:
        """The text's \\S+ words, lowered, as _char_ngrams splits them (split once)."""
        if not self.words:
            self.words = self.lowered.split()
        return self.words

    def key(self, i: int) -> tuple[str, ...]:
        """The words of window ``i``: windows with the same key score the same."""
        step = WINDOW // 2
        return tuple(self.split()[i * step:i * step + WINDOW])

    def __call__(self, i: int) -> float:
        return self.scores([i])[0]

    def scores(self, windows: list[int]) -> list[float]:
        """The score of each of ``windows``, each distinct one scored once (in one loop: a
        call per window took 0.1 s over the 35,000 windows of 1 MB of one repeated word; a
        list of every window's key as long, its 35,000 tuples out of the cache)."""
        words, step, seen, out = self.split(), WINDOW // 2, self.seen, []
        for i in windows:
            key = tuple(words[i * step:i * step + WINDOW])
            score = seen.get(key)
            if score is None:
                score = seen[key] = self._score(key)
            out.append(score)
        return out

    def _score(self, key: tuple[str, ...]) -> float:
        clf = self.clf
        for k in key:
            if k not in self.chars:
                # A long word (a base64 blob among prose) by numpy, as verdict counts it.
                self.chars[k] = (list(clf.grams.char_counts(k).elements())
                                 if len(k) > NUMPY_CHARS else _indices(clf.char, _char_ngrams(k)))
                self.tokens[k] = _TOKEN.findall(k)
        tokens = list(itertools.chain.from_iterable(self.tokens[k] for k in key))
        grams = tokens + [f"{a} {b}" for a, b in itertools.pairwise(tokens)]
        chars = Counter(itertools.chain.from_iterable(self.chars[k] for k in key))
        z = (clf.intercept + sum(clf.word.contributions(grams).values())
             + sum(clf.char.weigh(chars).values()))
        return 1.0 / (1.0 + math.exp(-z))


def _distinct_over(words: list[str], limit: int) -> bool:
    """Whether ``words`` holds more than ``limit`` distinct words; a text of many distinct
    words answers from its first ones, without hashing all of them."""
    return len(set(words[:4 * limit])) > limit or len(set(words)) > limit


def _indices(part: _Part, grams: list[str]) -> list[int]:
    return [i for i in map(part.index.get, grams) if i is not None]
