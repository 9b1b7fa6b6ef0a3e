"""The classifier's n-grams of a long text, found by numpy over the whole text at once.

A 1 MB text is 3 million character n-grams: sliced and looked up one by one in Python they
took seconds (a 1 MB random base64 word, or 100,000 distinct words). Here each character
becomes a 7-bit code (the vocabulary has about a hundred distinct characters; any other one
is code 0, which no term holds) and an n-gram the number its codes spell. Every position's
3-gram is read from a direct table (a row per 2-gram, in the cache); the 4- and 5-grams are
looked up (binary search) only where the shorter n-gram starts a longer term, a few percent
of the positions: a hash table of every n-gram took 100 ms or more a megabyte. The n-grams are
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

BITS = 7  # bits per character code: codes 1..127 (a byte each)
_TOKEN = re.compile(r"(?u)\b\w\w+\b")
# ASCII's characters that are not word characters (\w is exactly str.isalnum() or "_").
_NOT_WORD = {c: " " for c in range(128) if not (chr(c).isalnum() or c == ord("_"))}


def tokens(lowered: str) -> list[str]:
    """``_TOKEN.findall(lowered)``: for ASCII text, its words once every other character is
    a space (C-level, 2-3 times faster than the regex's 25-70 ms a megabyte)."""
    if not lowered.isascii():
        return _TOKEN.findall(lowered)
    return [w for w in lowered.translate(_NOT_WORD).split() if len(w) > 1]


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
        self.base = len(alphabet) + 1  # an n-gram's key: its codes as digits in this base
        self._levels(char_terms)
        positive = np.maximum(np.array(char_coef, dtype=np.float64), 0.0)
        self.char_square = positive * positive  # by term id
        # A word's token t adds at most its own weight and that of every bigram "t x".
        self.token_square: dict[str, float] = {}
        for term, c in zip(word_terms, word_coef, strict=True):
            if c > 0:
                first = term.split(" ", 1)[0]
                self.token_square[first] = self.token_square.get(first, 0.0) + float(c) ** 2

    def _levels(self, char_terms: Sequence[str]) -> None:
        """The lookup tables, level by level (see ``found``). A value is ``(id + 1) * 2``
        for a term (0: none) plus 1 if the n-gram starts a longer term."""
        import numpy as np

        table = {ord(c): chr(v) for c, v in self.code.items()}
        keys, ids = {}, {}
        for n in (3, 4, 5):
            at = [i for i, t in enumerate(char_terms) if len(t) == n]
            digits = np.frombuffer("".join(char_terms[i] for i in at).translate(table)
                                   .encode("latin-1"), dtype=np.uint8).reshape(-1, n)
            keys[n] = _keys(digits, self.base)
            ids[n] = np.array(at, dtype=np.int64)
        values = {}
        for n in (3, 4, 5):
            # The longer terms' prefixes, and the terms (the first of equal ones, as the
            # table this replaces had them).
            starts = [keys[m] // self.base ** (m - n) for m in range(n + 1, 6)]
            every = np.unique(np.concatenate([keys[n], *starts]))
            value = np.zeros(len(every), dtype=np.int64)
            if starts:
                value[np.isin(every, np.concatenate(starts))] = 1
            unique, first = np.unique(keys[n], return_index=True)
            value[np.searchsorted(every, unique)] += (ids[n][first] + 1) * 2
            values[n] = every, value
        # Every position of a text looks its 3-gram up: a direct table, a row of ``base``
        # slots per distinct 2-gram that starts one (a few hundred KB, in the cache), where
        # a hash table took 50 ms a million n-grams and a binary search 70 (cache misses).
        # The longer n-grams are looked up only where a 3-gram starts one: a binary search.
        three, value = values[3]
        pairs, row = np.unique(three // self.base, return_inverse=True)
        self.pair_row = np.zeros(self.base * self.base, dtype=np.int32)
        self.pair_row[pairs] = np.arange(1, len(pairs) + 1, dtype=np.int32)
        self.triple = np.zeros((len(pairs) + 1) * self.base, dtype=np.int32)
        self.triple[(row.ravel() + 1) * self.base + three % self.base] = value
        self.longer = values[4], values[5]

    def _codes(self, lowered: str, chars: set[str] | None = None) -> Any:
        """The codes of ``" " + lowered + " "``: whitespace is the space's code. ``chars``:
        the set of ``lowered``'s characters, if the caller has it already."""
        import numpy as np

        table = {ord(c): chr(self.space if c.isspace() else self.code.get(c, 0))
                 for c in (set(lowered) if chars is None else chars) | {" "}}
        return np.frombuffer((" " + lowered + " ").translate(table).encode("latin-1"),
                             dtype=np.uint8)

    def found(self, lowered: str) -> tuple[Any, Any]:
        """(start, term id) of each n-gram of ``lowered`` in the vocabulary; a start is an
        index into ``" " + lowered + " "``. The 3-grams of every position are looked up,
        the 4-grams only where the 3-gram starts a longer term, the 5-grams where the
        4-gram does (a few percent of the positions on random text)."""
        return self._found(self._codes(lowered))

    def _found(self, codes: Any) -> tuple[Any, Any]:
        import numpy as np

        inner = codes != self.space
        digits = codes.astype(np.int32)
        size, base = len(codes), self.base
        if size < 3:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        row = self.pair_row[digits[:-2] * base + digits[1:-1]]
        value = self.triple[row * base + digits[2:]]
        ok = (value >= 2) & inner[1:-1]
        starts = [np.nonzero(ok)[0]]
        ids = [(value[starts[0]] >> 1) - 1]
        at = np.nonzero((value[:size - 3] & 1).astype(bool) & inner[1:size - 2]
                        & inner[2:size - 1])[0]
        key = (digits[at] * base + digits[at + 1]).astype(np.int64) * base + digits[at + 2]
        for n, (every, values) in zip((4, 5), self.longer, strict=True):
            key = key * base + digits[at + n - 1]
            slot = np.minimum(np.searchsorted(every, key), len(every) - 1)
            value = np.where(every[slot] == key, values[slot], 0) if len(every) else 0 * key
            hit = value >= 2
            starts.append(at[hit])
            ids.append((value[hit] >> 1) - 1)
            on = (value & 1).astype(bool)
            if n == 4:  # room for the 5-gram, and its last inner character
                on &= (at < size - 4) & inner[at + 3]
            at, key = at[on], key[on]
        return np.concatenate(starts), np.concatenate(ids).astype(np.int64)

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

        present = set(lowered)
        codes = self._codes(lowered, present)
        inner = codes != self.space
        begins = inner & ~np.concatenate(([False], inner[:-1]))
        word_of = np.cumsum(begins) - 1  # the word each character is in (for non-spaces)
        words = int(begins.sum())
        starts, ids = self._found(codes)
        chars = np.bincount(word_of[starts + 1], weights=self.char_square[ids],
                            minlength=words)
        table = {ord(c): "\x01" if c.isalnum() or c == "_" else "\x00" for c in present}
        wordy = np.frombuffer(("\x00" + lowered + "\x00").translate(table).encode("latin-1"),
                              dtype=np.uint8).astype(bool)
        runs = np.nonzero(wordy[1:] & ~wordy[:-1])[0]  # index into " " + lowered
        if lowered.isascii():
            # Every run, one-character ones too, without the filter ``tokens`` spends a Python
            # step a word on: the tokeniser makes no term of one character, so they weigh 0.0
            # and add nothing (a hand-made one would only loosen the bound).
            found = lowered.translate(_NOT_WORD).split()
        else:
            found = _TOKEN.findall(lowered)
            runs = runs[np.nonzero(~wordy[1:] & wordy[:-1])[0] - runs >= 2]
        if len(runs) != len(found):
            return None
        weights = np.fromiter(map(self.token_square.get, found, itertools.repeat(0.0)),
                              dtype=np.float64, count=len(found))
        tokens_sq = np.bincount(word_of[runs + 1], weights=weights, minlength=words)
        return chars, tokens_sq


def _keys(digits: Any, base: int) -> Any:
    """The key of each row of codes: its digits in ``base``, the first the most significant
    (so a prefix's key times the base plus the next code is the longer n-gram's)."""
    import numpy as np

    key = np.zeros(len(digits), dtype=np.int64)
    for column in digits.T:
        key = key * base + column
    return key
