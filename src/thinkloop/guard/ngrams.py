"""The classifier's n-grams of a long text, found by numpy over the whole text at once.

A 1 MB text is 3 million character n-grams: sliced and looked up one by one in Python they
took seconds (a 1 MB random base64 word, or 100,000 distinct words). Here each character
becomes a 7-bit code (the vocabulary has about a hundred distinct characters; any other one
is code 0, which no term holds), an n-gram the integer of its codes, and the vocabulary a
sorted array of the same integers: a lookup is one ``searchsorted``. The n-grams are
scikit-learn's ``char_wb`` ones, as ``classifier._char_ngrams`` slices them: those of each
whitespace-separated word padded with a space on each side, so in the text with a space
added at both ends they are exactly the n-grams with no whitespace inside (either end may be
one).

:class:`Grams` gives exact counts (``char_counts``) and, per word, upper bounds of what the
word's terms can add to a score (``word_bounds``), which let the classifier skip windows that
cannot reach its threshold without scoring them (see ``Classifier.scan``).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

BITS = 7  # bits per character code: codes 1..127
SLOT_BITS = 17  # the hash table's size: 131,072 slots (1 MB of keys: in the cache)
_GOLDEN = 0x9E3779B97F4A7C15  # Fibonacci hashing's multiplier
_TOKEN = re.compile(r"(?u)\b\w\w+\b")


class Grams:
    """One vocabulary's char n-grams (``char_terms``) and, for the bounds, the positive
    weights of its char and word terms."""

    def __init__(self, char_terms: Sequence[str], char_coef: Sequence[float],
                 word_terms: Sequence[str], word_coef: Sequence[float]) -> None:
        import numpy as np

        alphabet = sorted(set("".join(char_terms)) | {" "})
        if len(alphabet) >= 1 << BITS:
            raise ValueError("too many distinct characters in the vocabulary")
        self.code = {c: i + 1 for i, c in enumerate(alphabet)}
        self.space = self.code[" "]
        # An open-addressing hash table of the terms' keys, small enough to stay in the
        # cache: binary search took 70 ms for each million n-grams, a table of a million
        # slots as long (both miss the cache at every step).
        size = 1 << SLOT_BITS
        slots, ids = [-1] * size, [0] * size
        self.probes = 1
        for term_id, term in enumerate(char_terms):
            key = self._key(term)
            at, probe = _slot(key), 1
            while slots[at] >= 0:
                at, probe = (at + 1) % size, probe + 1
            slots[at], ids[at] = key, term_id
            self.probes = max(self.probes, probe)
        self.slots = np.array(slots, dtype=np.int64)
        self.ids = np.array(ids, dtype=np.int64)
        positive = np.maximum(np.array(char_coef, dtype=np.float64), 0.0)
        self.char_square = positive * positive  # by term id
        # A word's token t adds at most its own weight and that of every bigram "t x".
        self.token_square: dict[str, float] = {}
        for term, c in zip(word_terms, word_coef, strict=True):
            if c > 0:
                first = term.split(" ", 1)[0]
                self.token_square[first] = self.token_square.get(first, 0.0) + float(c) ** 2

    def _key(self, gram: str) -> int:
        return sum(self.code[c] << (BITS * j) for j, c in enumerate(gram)) \
            | len(gram) << (BITS * 5)

    def _codes(self, lowered: str) -> Any:
        """The codes of ``" " + lowered + " "``: whitespace is the space's code."""
        import numpy as np

        table = {ord(c): chr(self.space if c.isspace() else self.code.get(c, 0))
                 for c in set(lowered) | {" "}}
        return np.frombuffer((" " + lowered + " ").translate(table).encode("latin-1"),
                             dtype=np.uint8)

    def found(self, lowered: str) -> tuple[Any, Any]:
        """(start, term id) of each n-gram of ``lowered`` in the vocabulary; a start is an
        index into ``" " + lowered + " "``."""
        import numpy as np

        codes = self._codes(lowered).astype(np.int64)
        inner = codes != self.space
        starts, ids = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        for n in (3, 4, 5):
            count = len(codes) - n + 1
            if count <= 0:
                continue
            key = np.full(count, n << (BITS * 5), dtype=np.int64)
            ok = np.ones(count, dtype=bool)
            for j in range(n):
                key |= codes[j:j + count] << (BITS * j)
                if 0 < j < n - 1:
                    ok &= inner[j:j + count]
            term = self._lookup(key)
            ok &= term >= 0
            starts.append(np.nonzero(ok)[0])
            ids.append(term[ok])
        return np.concatenate(starts), np.concatenate(ids)

    def _lookup(self, key: Any) -> Any:
        """The term id of each key, or -1."""
        import numpy as np

        term = np.full(len(key), -1, dtype=np.int64)
        where, at = np.arange(len(key)), _slots(key)
        for _ in range(self.probes):  # a key is at most this many slots on from its own
            held = self.slots[at]
            hit = held == key[where]
            term[where[hit]] = self.ids[at[hit]]
            on = (held >= 0) & ~hit  # an empty slot ends the search
            where, at = where[on], (at[on] + 1) & ((1 << SLOT_BITS) - 1)
            if not len(where):
                break
        return term

    def char_counts(self, lowered: str) -> Counter[int]:
        """The vocabulary's char n-grams in ``lowered``, counted by term id."""
        import numpy as np

        _, ids = self.found(lowered)
        counts = np.bincount(ids)
        present = np.nonzero(counts)[0]
        return Counter(dict(zip(present.tolist(), counts[present].tolist(), strict=True)))

    def word_bounds(self, lowered: str) -> tuple[Any, Any] | None:
        """For each whitespace-separated word of ``lowered``, in order: the sum of the squared
        positive coefficients of its char n-grams, and of its tokens (each with the bigrams it
        can start). A window's terms are among its words', so with its weights of norm 1 its
        char part adds at most the square root of its words' first sums (Cauchy-Schwarz), and
        its word part at most that of the second. None if the words could not be told apart
        as the classifier tells them (then nothing is skipped)."""
        import numpy as np

        codes = self._codes(lowered)
        inner = codes != self.space
        begins = inner & ~np.concatenate(([False], inner[:-1]))
        word_of = np.cumsum(begins) - 1  # the word each character is in (for non-spaces)
        words = int(begins.sum())
        starts, ids = self.found(lowered)
        chars = np.bincount(word_of[starts + 1], weights=self.char_square[ids],
                            minlength=words)
        tokens = _TOKEN.findall(lowered)
        table = {ord(c): "\x01" if c.isalnum() or c == "_" else "\x00" for c in set(lowered)}
        wordy = np.frombuffer(("\x00" + lowered + "\x00").translate(table).encode("latin-1"),
                              dtype=np.uint8).astype(bool)
        run_start = np.nonzero(wordy[1:] & ~wordy[:-1])[0]  # index into " " + lowered
        run_end = np.nonzero(~wordy[1:] & wordy[:-1])[0]
        long_runs = run_start[run_end - run_start >= 2]
        if len(long_runs) != len(tokens):
            return None
        weights = np.fromiter(map(self.token_square.get, tokens, itertools.repeat(0.0)),
                              dtype=np.float64, count=len(tokens))
        tokens_sq = np.bincount(word_of[long_runs + 1], weights=weights, minlength=words)
        return chars, tokens_sq


def _slot(key: int) -> int:
    return ((key * _GOLDEN) & ((1 << 64) - 1)) >> (64 - SLOT_BITS)


def _slots(keys: Any) -> Any:
    """``_slot`` of each key, in int64 (the product wraps around as in 64-bit unsigned; the
    mask drops the sign bits an arithmetic shift brings in)."""
    import numpy as np

    signed = np.int64(_GOLDEN - (1 << 64))
    return ((keys * signed) >> (64 - SLOT_BITS)) & ((1 << SLOT_BITS) - 1)
