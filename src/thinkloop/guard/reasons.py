"""The findings of a long text scored by numpy (guard/bulk.py), each named as ``verdict``
names it: a run of windows over the bar is one finding, and its reason lists its first
window's strongest word n-grams.

A 1 MB text of the patterns' own words is thousands of runs; counting, weighing and ranking
each first window's n-grams in Python (``_word_counts``, ``weigh``, ``_top``) took 35 µs a
run, more than scoring every window. Here they are worked out for every run at once with the
same arithmetic in the same order: a term's weight is ``(1 + log c) * idf``, each window's
norm the sum of its weights' squares added one by one in the order ``_word_counts`` first
meets the terms (its tokens, then its pairs of tokens), and the strongest are the first three
by weight, ties in that order; so each reason is the one ``verdict`` gives.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

from thinkloop.guard import bulk

if TYPE_CHECKING:
    from thinkloop.guard.classifier import Classifier
    from thinkloop.guard.scan import Finding

TOP = 3  # the n-grams a reason names


def findings(clf: Classifier, spans: list[tuple[int, int]], scored: bulk.Scored,
             bar: float) -> list[Finding]:
    """``Classifier.scan``'s findings from every window's score: a run of overlapping windows
    at or over ``bar`` is one finding, named by its first window's verdict. Over the bar of a
    long text (the high mark), every window is "high"; a finding is built once per run (a
    finding remade per window joining it was 15,000 objects a megabyte)."""
    import numpy as np

    from thinkloop.guard import classifier as c

    runs: list[list[int]] = []
    score = scored.scores
    for i in np.nonzero(score >= bar)[0].tolist():
        if runs and spans[runs[-1][1]][1] >= spans[i][0]:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    tops = strongest(clf, scored.ids, [first for first, _ in runs])
    return [clf.finding((spans[first][0], spans[last][1]), c.Verdict(float(score[first]), top), bar)
            for (first, last), top in zip(runs, tops, strict=True)]


def strongest(clf: Classifier, ids: bulk.Ids, windows: list[int]) -> list[tuple[str, ...]]:
    """For each of ``windows`` (indices of a text's windows, as ``ids`` numbers its words),
    the word n-grams that add most to its score, as ``verdict`` names them."""
    import numpy as np

    from thinkloop.guard import classifier as c

    row, term, count = _terms(clf, ids, np.array(windows, dtype=np.int64), c.WINDOW)
    if not len(term):
        return [()] * len(windows)
    part = clf.word
    tf = np.array([1.0 + math.log(n) for n in range(1, int(count.max()) + 1)])
    weight = tf[count - 1] * np.frombuffer(part.idf, dtype=np.float64)[term]
    starts = np.searchsorted(row, np.arange(len(windows)))  # where each window's terms start
    norm = np.sqrt(_sums(weight * weight, row, starts, len(windows)))
    value = weight / norm[row] * np.frombuffer(part.coef, dtype=np.float32)[term].astype(float)
    # By window, strongest first, then as first met (two stable sorts: lexsort took longer).
    order = np.argsort(-value, kind="stable")
    order = order[np.argsort(row[order], kind="stable")]
    row, term, value = row[order], term[order], value[order]
    keep = (np.arange(len(row)) - starts[row] < TOP) & (value > 0)
    names = [part.terms[t] for t in term[keep].tolist()]
    ends = np.cumsum(np.bincount(row[keep], minlength=len(windows))).tolist()
    return [tuple(names[a:b]) for a, b in zip([0, *ends], ends, strict=False)]


def _terms(clf: Classifier, ids: bulk.Ids, windows: Any, window: int) -> tuple[Any, Any, Any]:
    """Each window's distinct word terms with their counts, by window, each window's in the
    order ``_word_counts`` has them: its tokens' terms as first met, then its pairs'."""
    import numpy as np

    seq, step = ids.seq, window // 2
    lo = windows * step
    lens = np.minimum(lo + window, len(seq)) - lo
    at = np.repeat(lo - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()))
    word_row = np.repeat(np.arange(len(windows)), lens)
    token_at, token = bulk.expand(seq[at], ids.tokens)
    row = word_row[token_at]
    unigrams, bigrams, first = bulk.word_terms(clf)
    known = token >= 0
    uni = np.where(known, unigrams[np.maximum(token, 0)], -1)
    pair = token[:-1] * (len(unigrams) + 1) + token[1:]
    slot = np.minimum(np.searchsorted(bigrams, pair), max(len(bigrams) - 1, 0))
    hit = known[:-1] & known[1:] & (row[:-1] == row[1:])
    hit &= bigrams[slot] == pair if len(bigrams) else False
    u, b = np.nonzero(uni >= 0)[0], np.nonzero(hit)[0]
    rows = np.concatenate((row[u], row[b]))
    terms = np.concatenate((uni[u], first[slot[b]]))
    met = np.concatenate((u, len(token) + b))  # a window's tokens before its pairs
    if not len(met):
        return met, met, met
    # Each (window, term) once, with its count and where it is first met (a stable sort keeps
    # a term's occurrences in order: they are all tokens or all pairs).
    key = rows * len(clf.word.terms) + terms
    order = np.argsort(key, kind="stable")
    key = key[order]
    new = np.nonzero(np.concatenate(([True], key[1:] != key[:-1])))[0]
    count = np.diff(np.append(new, len(key)))
    rows, terms, met = rows[order[new]], terms[order[new]], met[order[new]]
    order = np.argsort(rows * (2 * len(token)) + met)  # each window's terms as first met
    return rows[order], terms[order], count[order]


def _sums(values: Any, row: Any, starts: Any, windows: int) -> Any:
    """Each window's ``values`` added one at a time in order, as Python's ``sum`` adds them
    (numpy's sums pair them up, which can differ in the last bit): a column of every window
    at a time, the windows ordered longest first so each column is a prefix of them. From
    Python 3.12, ``sum`` compensates each addition's rounding (Neumaier's algorithm); so do
    these then."""
    import numpy as np

    lens = np.bincount(row, minlength=windows)
    longest = np.argsort(-lens, kind="stable")
    begin, size = starts[longest], lens[longest]
    total, error = np.zeros(windows), np.zeros(windows)
    compensated = sys.version_info >= (3, 12)
    for column in range(int(lens.max(initial=0))):
        n = int(np.searchsorted(-size, -column, side="left"))  # windows longer than column
        x, before = values[begin[:n] + column], total[:n]
        after = before + x
        if compensated:
            error[:n] += np.where(np.abs(before) >= np.abs(x), (before - after) + x,
                                  (x - after) + before)
        total[:n] = after
    out = np.zeros(windows)
    out[longest] = total + error if compensated else total
    return out
