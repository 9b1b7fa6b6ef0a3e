"""The reasons of a long text's findings, worked out for every run of windows at once by
numpy (guard/reasons.py), name the n-grams ``verdict`` names for each window, in its order and
with its ties, and a scan of a long text counts no window's n-grams in Python."""

from __future__ import annotations

import random
import sys
from types import SimpleNamespace

import pytest

from thinkloop.guard import bulk, reasons
from thinkloop.guard import classifier as clf_module
from thinkloop.guard.classifier import Classifier, _windows

from .test_bulk import TEXTS, hostile_texts


def _verdicts_top(clf: Classifier, text: str, span: tuple[int, int]) -> tuple[str, ...]:
    return clf._top(clf.word.weigh(clf_module._word_counts(clf.word, text[span[0]:span[1]])))


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_every_windows_strongest_ngrams_are_verdicts(text: str) -> None:
    clf = Classifier.load()
    spans = _windows(text)
    ids = bulk.word_ids(clf, text.lower().split())
    named = reasons.strongest(clf, ids, list(range(len(spans))))
    assert named == [_verdicts_top(clf, text, span) for span in spans]
    assert any(len(top) == reasons.TOP for top in named)


def test_ties_are_named_in_the_order_verdict_meets_them() -> None:
    """Every term weighs the same: the strongest are the first three met, tokens before
    pairs, and a term counted twice outweighs them."""
    words = ["aa", "bb", "cc", "dd", "aa bb", "cc dd", "dd aa", "bb cc"]
    clf = Classifier(words, [1.5] * len(words), [0.25] * len(words), ["xyz"], [1.0], [0.0],
                     0.0, 0.5)
    text = " ".join(["dd", "cc", "bb", "aa", "zz", "bb", "cc", "dd", "aa"] * 30)
    spans = _windows(text)
    ids = bulk.word_ids(clf, text.lower().split())
    named = reasons.strongest(clf, ids, list(range(len(spans))))
    assert named == [_verdicts_top(clf, text, span) for span in spans]
    assert named[0] == ("dd", "cc", "bb")  # each twice in the first window: first met first
    assert reasons.strongest(clf, ids, []) == []


def test_a_long_texts_findings_count_no_window_in_python(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thousands of findings a megabyte: each counted in Python took longer than scoring
    every window. The findings are those of the windows scored one by one."""
    clf = Classifier.load()
    text = hostile_texts()[0]
    counted: list[str] = []
    word_counts = clf_module._word_counts

    def counting(part: object, window: str) -> object:
        counted.append(window)
        return word_counts(part, window)  # type: ignore[arg-type]

    monkeypatch.setattr(clf_module, "_word_counts", counting)
    found = clf.scan(text)
    assert len(found) > 10
    assert counted == []
    monkeypatch.setattr(bulk, "BULK_WORDS", -1)  # one window at a time, as verdict counts
    assert clf.scan(text) == found
    assert counted


def _neumaier(values: list[float]) -> float:
    """Python 3.12's ``sum`` of floats, as CPython adds them."""
    total, error = 0.0, 0.0
    for x in values:
        after = total + x
        error += (total - after) + x if abs(total) >= abs(x) else (x - after) + total
        total = after
    return total + error


@pytest.mark.parametrize("version", [(3, 11), (3, 12)])
def test_a_windows_norm_adds_its_weights_as_sum_does(
    version: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Added one at a time, and from Python 3.12 with each rounding compensated, as ``sum``:
    numpy's pairwise sums differ in the last bit, and so would a ranking's ties."""
    import numpy as np

    monkeypatch.setattr(reasons, "sys", SimpleNamespace(version_info=version))
    rng = random.Random(5)
    rows = [[rng.choice([1.0, 1e-16, 3e-17, 0.1, 7.0]) for _ in range(rng.randrange(1, 40))]
            for _ in range(50)]
    values = np.array([v for row in rows for v in row])
    row = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
    starts = np.searchsorted(row, np.arange(len(rows)))
    naive = [float(np.add.accumulate(r)[-1]) for r in rows]
    compensated = [_neumaier(r) for r in rows]
    assert naive != compensated  # the rows' sums round differently added either way
    want = compensated if version >= (3, 12) else naive
    assert reasons._sums(values, row, starts, len(rows)).tolist() == want
    if sys.version_info[:2] == version:  # the running Python's own sum
        assert want == [sum(r) for r in rows]
