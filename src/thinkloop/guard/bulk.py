"""Every window of a long text of few distinct words scored at once, by numpy.

A text of attack words in random order reads as an attack everywhere: no window's bound
(``Classifier._hopeless``) rules it out, every window differs, and scoring each in Python
took 4 µs a character (1 MB: 16,000 windows, seconds). Here a distinct word's n-grams and
tokens are found once (as ``_Windows`` finds them), each window's terms are its words'
(a term in a window of 20 words lies in two windows), and a window's terms are counted in
dense (half, term) and (half, word) tables where the text's words hold few terms (a term only
one word holds counted with the word), else by sorting (window, term) keys: the counts, the
TF-IDF weights and their sums are then the same arithmetic for every window as
``Classifier.verdict``'s, summed in another order (so a score may differ from the per-window
one in its last bits). The findings' reasons are worked out in guard/reasons.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from thinkloop.guard.classifier import Classifier, _Part


BULK_WORDS = 20_000  # a long text with at most this many distinct words is scored here
CHUNK = 2_000  # windows scored together (their arrays: a few MB)
SAMPLE = 2_000  # the windows whose repeats are counted (the first ones)
REPEATS = 4  # fewer than one window in this many distinct: scored one by one instead
DENSE = 32  # dense tables of at most this many cells per term found: counted so
CELLS = 1 << 14  # the cells of a dense table counted at once (in cache: 1 << 18 was slower)
ROWS = 64  # but at least this many windows' (thousands of terms: fewer numpy calls)


@dataclass(frozen=True)
class Ids:
    """A text's words as numbers: each word's id among the distinct ones (``seq``), and each
    distinct word's character n-grams and tokens (``chars``, ``tokens``: as ``_tables`` joins
    them; a token no word term holds is -1)."""

    seq: Any
    chars: tuple[Any, Any, Any]
    tokens: tuple[Any, Any, Any]


@dataclass(frozen=True)
class Scored:
    """Every window's score (an array), and the text's ids they were worked out from."""

    scores: Any
    ids: Ids


def word_ids(clf: Classifier, words: list[str]) -> Ids:
    """``words`` (a text's \\S+ words, lowered) as ``Ids``."""
    import numpy as np

    from thinkloop.guard import classifier as c

    index = {w: i for i, w in enumerate(dict.fromkeys(words))}  # C loops but the distinct
    seq = np.fromiter(map(index.__getitem__, words), dtype=np.int64, count=len(words))
    chars = [list(clf.grams.char_counts(k).elements()) if len(k) > c.NUMPY_CHARS
             else c._indices(clf.char, c._char_ngrams(k)) for k in index]
    vocab = _token_ids(clf)
    tokens = [[vocab.get(t, -1) for t in c._TOKEN.findall(k)] for k in index]
    return Ids(seq, _tables(chars), _tables(tokens))


def scan_scores(clf: Classifier, text: str, words: list[str], windows: int) -> Scored | None:
    """Every window's score for ``Classifier.scan``: for a text over ``NUMPY_CHARS`` of at
    most ``BULK_WORDS`` distinct words (``words``: its \\S+ words, lowered) whose windows
    mostly differ; None otherwise (then windows are scored one by one)."""
    from thinkloop.guard import classifier as c

    step = c.WINDOW // 2
    if len(text) <= c.NUMPY_CHARS or windows != max(0, -(-len(words) // step) - 1):
        return None
    # Window i is halves i and i + 1: the distinct pairs of halves are the distinct windows.
    # Few among the first ones: each scored once in Python is cheaper (1 MB of a sentence),
    # and needs no numpy (a text that repeats only at first is scored as before this path).
    halves = [tuple(words[i:i + step]) for i in range(0, min(len(words), SAMPLE * step), step)]
    if len(set(itertools.pairwise(halves))) * REPEATS < len(halves) - 1 \
            or c._distinct_over(words, BULK_WORDS):
        return None
    text_ids = word_ids(clf, words)
    return Scored(scores(clf, words, windows, c.WINDOW, text_ids), text_ids)


def scores(clf: Classifier, words: list[str], windows: int, window: int,
           text_ids: Ids | None = None) -> Any:
    """The score of each of the ``windows`` windows of ``words`` (the text's \\S+ words,
    lowered), window ``i`` being ``words[i * window // 2:i * window // 2 + window]``
    (``text_ids``: ``word_ids(clf, words)``, if the caller has them)."""
    import numpy as np

    text_ids = word_ids(clf, words) if text_ids is None else text_ids
    seq, step = text_ids.seq, window // 2
    tables = text_ids.chars, text_ids.tokens
    # Where the text's words hold few character n-grams, each half's counts fit a dense table,
    # counted without sorting (see _features).
    dense = _features(clf.char, tables[0], window)
    out = []
    for at in range(0, windows, CHUNK):
        # A chunk of windows at a time: arrays of a few MB, not 30 (sorting 4 million keys),
        # which also left glibc's allocator serving later scans' arrays more slowly.
        n = min(CHUNK, windows - at)
        part = seq[at * step:min(len(seq), (at + n + 1) * step)]
        out.append(_chunk(clf, part, tables, dense, n, step, window))
    return np.concatenate(out) if out else np.zeros(0)


def _chunk(clf: Classifier, seq: Any, tables: tuple[Any, Any], dense: tuple[Any, ...],
           windows: int, step: int, window: int) -> Any:
    """The scores of the first ``windows`` windows of the words ``seq`` (distinct ids);
    ``dense``: the character n-grams as ``_features`` splits them."""
    import numpy as np

    shared, values = dense[0], dense[3]
    if (windows + 2) * (len(shared) + len(values[0])) <= DENSE * int(tables[0][0][seq].sum()):
        char = _dense(clf.char, seq, dense, windows, step)
    else:
        char_pos, char_ids = expand(seq, tables[0])
        char = _part(clf.char, char_pos, None, char_ids, windows, step, window)
    token_pos, token_ids = expand(seq, tables[1])
    known = token_ids >= 0
    unigrams, bigrams, first = word_terms(clf)
    uni = np.where(known, unigrams[np.maximum(token_ids, 0)], -1)
    # A pair of consecutive tokens, by their ids: a bigram term if its key is in the table.
    pair = token_ids[:-1] * (len(unigrams) + 1) + token_ids[1:]
    slot = np.minimum(np.searchsorted(bigrams, pair), max(len(bigrams) - 1, 0))
    hit = known[:-1] & known[1:]
    if len(bigrams):
        hit &= bigrams[slot] == pair
    else:
        hit &= False
    pos = np.concatenate((token_pos[np.nonzero(uni >= 0)[0]], token_pos[:-1][hit]))
    last = np.concatenate((token_pos[np.nonzero(uni >= 0)[0]], token_pos[1:][hit]))
    ids = np.concatenate((uni[uni >= 0], first[slot[hit]]))
    word = _part(clf.word, pos, last, ids, windows, step, window)
    z = clf.intercept + word + char
    return 1.0 / (1.0 + np.exp(-z))


def _tables(per_word: list[list[int]]) -> tuple[Any, Any, Any]:
    """Each distinct word's ids as one array: their counts, all of them, where each starts."""
    import numpy as np

    lens = np.fromiter(map(len, per_word), dtype=np.int64, count=len(per_word))
    flat = np.fromiter(itertools.chain.from_iterable(per_word), dtype=np.int64,
                       count=int(lens.sum()))
    return _tables_of(lens, flat)


def _tables_of(lens: Any, flat: Any) -> tuple[Any, Any, Any]:
    """``_tables``' three arrays from the first two."""
    import numpy as np

    offsets = np.concatenate(([0], np.cumsum(lens)[:-1])) if len(lens) else lens
    return lens, flat, offsets


def expand(seq: Any, tables: tuple[Any, Any, Any]) -> tuple[Any, Any]:
    """For the word sequence ``seq`` (distinct word ids), each id of each word's list in
    order (``tables``: the lists as ``_tables`` joins them), and the position of its word."""
    import numpy as np

    lens, flat, offsets = tables
    n = lens[seq]
    total = int(n.sum())
    pos = np.repeat(np.arange(len(seq)), n)
    starts = np.concatenate(([0], np.cumsum(n)[:-1])) if len(n) else n
    at = np.repeat(offsets[seq] - starts, n) + np.arange(total)
    return pos, flat[at] if total else np.zeros(0, dtype=np.int64)


def _part(part: _Part, pos: Any, last: Any, ids: Any, windows: int, step: int,
          window: int) -> Any:
    """One vectoriser's contribution to each window's score: a term from word ``pos`` to word
    ``last`` (None: the same word) counts in window ``i`` if the window holds both."""
    import numpy as np

    size = len(part.terms)
    if last is None:
        win, term, counts = _by_halves(pos // step, ids, windows, size)
    else:
        keys = []
        for shift in (1, 0):
            w = pos // step - shift
            ok = (w >= 0) & (w < windows) & (last < w * step + window)
            keys.append(w[ok] * size + ids[ok])
        key = np.sort(np.concatenate(keys), kind="stable")
        if not len(key):
            return np.zeros(windows)
        at = np.nonzero(np.concatenate(([True], key[1:] != key[:-1])))[0]
        counts = np.diff(np.append(at, len(key)))
        term, win = key[at] % size, key[at] // size
    # Sublinear tf as verdict has it, (1 + log c) * idf, then its square and its product
    # with the coefficient; most counts are 1, so log is taken once per distinct count.
    tf = 1.0 + np.log(np.arange(1, int(counts.max(initial=1)) + 1, dtype=np.float64))
    weight = tf[counts - 1] * np.frombuffer(part.idf, dtype=np.float64)[term]
    coef = np.frombuffer(part.coef, dtype=np.float32).astype(np.float64)[term]
    norm = np.sqrt(np.bincount(win, weights=weight * weight, minlength=windows))
    dot = np.bincount(win, weights=weight * coef, minlength=windows)
    return np.divide(dot, norm, out=np.zeros(windows), where=norm > 0)


def _features(part: _Part, chars: tuple[Any, Any, Any], window: int) -> tuple[Any, ...]:
    """The text's character n-grams for dense counting (``chars``: each distinct word's term
    ids, as ``_tables`` joins them). A term only one distinct word holds counts that word's
    repeats in a window times its count in the word, so all such terms of a word add to a
    window's sums a value of the word's repeats alone: a table by (word, repeats). Only the
    terms several words share are counted one by one (in 1 MB of the patterns' own words,
    670 of 2,584: the dense tables a quarter as wide). Returns the shared terms (the part's
    ids), each distinct word's shared terms numbered among them (as ``_tables``), each
    distinct word's row in the value tables (-1: none), and the tables (norm, dot) by row and
    repeats (0..``window``)."""
    import numpy as np

    lens, flat, _ = chars
    size = len(part.terms)
    word = np.repeat(np.arange(len(lens)), lens)
    pair, count = np.unique(word * size + flat, return_counts=True)  # by word, then term
    pair_word, pair_term = pair // size, pair % size
    owners = np.bincount(pair_term, minlength=size)
    alone = owners[pair_term] == 1
    shared = np.unique(pair_term[~alone])
    keep = owners[flat] > 1
    by_word = _tables_of(np.bincount(word[keep], minlength=len(lens)),
                         np.searchsorted(shared, flat[keep]))
    rows, first = np.unique(pair_word[alone], return_index=True)
    owner = np.full(len(lens), -1, dtype=np.int64)
    owner[rows] = np.arange(len(rows))
    term, count = pair_term[alone], count[alone]
    idf = np.frombuffer(part.idf, dtype=np.float64)[term]
    coef = np.frombuffer(part.coef, dtype=np.float32).astype(np.float64)[term]
    weight = np.zeros((len(term), window + 1))
    weight[:, 1:] = (1.0 + np.log(count[:, None] * np.arange(1, window + 1))) * idf[:, None]
    norm, dot = (np.add.reduceat(v, first, axis=0) if len(first) else v[:0]
                 for v in (weight * weight, weight * coef[:, None]))
    return shared, by_word, owner, (norm, dot)


def _dense(part: _Part, seq: Any, dense: tuple[Any, ...], windows: int, step: int) -> Any:
    """``_part`` for the character n-grams, counted in dense (half, term) and (half, word)
    tables (see ``_features``): a window's counts are its two halves' rows added."""
    import numpy as np

    shared, by_word, owner, (table_norm, table_dot) = dense
    pos, local = expand(seq, by_word)
    dot, norm = _shared(part, shared, pos // step, local, windows)
    row = owner[seq]
    at = np.nonzero(row >= 0)[0]
    repeats = table_norm.shape[1]
    flat_norm, flat_dot = table_norm.reshape(-1), table_dot.reshape(-1)
    offsets = np.arange(len(table_norm)) * repeats
    for lo, hi, counts in _blocks(at // step, row[at], len(table_norm), windows):
        cell = counts + offsets  # a word is at most ``window`` times in a window
        norm[lo:hi] += flat_norm[cell].sum(axis=1)
        dot[lo:hi] += flat_dot[cell].sum(axis=1)
    norm = np.sqrt(norm)
    return np.divide(dot, norm, out=np.zeros(windows), where=norm > 0)


def _shared(part: _Part, terms: Any, half: Any, local: Any, windows: int) -> tuple[Any, Any]:
    """Each window's dot product and squared norm over ``terms`` (the part's ids), counted
    in a (half, term) table: ``local[i]`` is the i-th term's index in ``terms``, ``half[i]``
    its half (ascending)."""
    import numpy as np

    idf = np.frombuffer(part.idf, dtype=np.float64)[terms]
    coef = np.frombuffer(part.coef, dtype=np.float32).astype(np.float64)[terms]
    square, product = idf * idf, idf * coef
    # Sublinear tf as verdict has it, 1 + log c, and 0 for a term the window lacks.
    tf = np.zeros(int(np.bincount(half).max(initial=0)) * 2 + 1)
    tf[1:] = 1.0 + np.log(np.arange(1, len(tf), dtype=np.float64))
    dot, norm = np.zeros(windows), np.zeros(windows)
    for lo, hi, counts in _blocks(half, local, len(terms), windows):
        weight = tf[counts]
        # Row sums, not matrix products: BLAS would run them on threads, spinning other cores.
        norm[lo:hi] = np.einsum("wt,wt,t->w", weight, weight, square)
        dot[lo:hi] = np.einsum("wt,t->w", weight, product)
    return dot, norm


def _blocks(half: Any, local: Any, n: int, windows: int) -> Iterator[tuple[int, int, Any]]:
    """Windows ``lo`` to ``hi`` and their counts of ``n`` things (``local[i]`` found in half
    ``half[i]``, ascending), a small table at a time (in cache); none if ``n`` is 0."""
    import numpy as np

    rows = max(ROWS, CELLS // max(n, 1))  # but thousands of terms: fewer numpy calls
    for lo in range(0, windows if n else 0, rows):
        hi = min(windows, lo + rows)
        a, b = np.searchsorted(half, (lo, hi + 1))
        counts = np.bincount((half[a:b] - lo) * n + local[a:b], minlength=(hi - lo + 1) * n)
        counts = counts.reshape(hi - lo + 1, n)
        yield lo, hi, counts[:-1] + counts[1:]


def _by_halves(half: Any, ids: Any, windows: int, size: int) -> tuple[Any, Any, Any]:
    """(window, term, count) of each term in each window, for terms within a word (word
    ``i``'s half ``half[i]``; window ``w`` is halves ``w`` and ``w + 1``). Counted by half
    first: one sort of the terms, then each window's two halves merged (two ascending runs,
    which a stable sort merges in one pass) rather than every term sorted twice."""
    import numpy as np

    # 32-bit keys where they fit (1 MB of words: 10^9), halving what the sorts move.
    kind = np.int32 if (windows + 2) * size < 1 << 31 else np.int64
    key = half.astype(kind) * kind(size) + ids.astype(kind)
    key = np.sort(key, kind="stable")  # ascending halves: timsort's runs
    at = np.nonzero(np.concatenate(([True], key[1:] != key[:-1])))[0]
    counts = np.diff(np.append(at, len(key))).astype(kind)
    key = key[at]
    halves = key // size
    first, second = (halves >= 1) & (halves <= windows), halves < windows
    both = np.concatenate((key[first] - kind(size), key[second]))  # window * size + term
    order = np.argsort(both, kind="stable")
    both, n = both[order], np.concatenate((counts[first], counts[second]))[order]
    if not len(both):
        return both, both, both
    # A term is in a window once or twice (once a half): add the second count to the first.
    again = np.nonzero(both[1:] == both[:-1])[0]
    n[again] += n[again + 1]
    at = np.nonzero(np.concatenate(([True], both[1:] != both[:-1])))[0]
    return both[at] // size, both[at] % size, n[at]


def _token_ids(clf: Classifier) -> dict[str, int]:
    return _word_tables(clf)[0]


def word_terms(clf: Classifier) -> tuple[Any, Any, Any]:
    """Each token id's unigram term (-1: none), the bigram terms' sorted keys, and the term id
    of each key (see ``_word_tables``; built once per classifier)."""
    return _word_tables(clf)[1:]


def _word_tables(clf: Classifier) -> tuple[dict[str, int], Any, Any, Any]:
    """The word vocabulary as ids: each token a bigram term or a unigram term holds; the
    unigram term of each token id (-1: none); the bigram terms' keys (first token id times
    the tokens plus one, plus the second's), sorted, and the term id of each."""
    import numpy as np

    cached = clf.__dict__.get("_bulk_words")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    vocab: dict[str, int] = {}
    for term in clf.word.terms:
        for t in term.split(" "):
            vocab.setdefault(t, len(vocab))
    unigrams = np.full(len(vocab), -1, dtype=np.int64)
    keys, ids = [], []
    for term in clf.word.terms:
        a, _, b = term.partition(" ")
        if b:
            keys.append(vocab[a] * (len(vocab) + 1) + vocab[b])
            ids.append(clf.word.index[term])  # as the per-window path looks it up
        else:
            unigrams[vocab[a]] = clf.word.index[term]
    order = np.argsort(np.array(keys, dtype=np.int64), kind="stable")
    tables = (vocab, unigrams, np.array(keys, dtype=np.int64)[order],
              np.array(ids, dtype=np.int64)[order])
    clf.__dict__["_bulk_words"] = tables
    return tables
