"""Typos of the words an attack needs (``ignroe``, ``iunstructions``): which words of a text
are one, and of which key word, for the input guard's "typo" view (guard/scan.py).

A word is a typo of a key word within one edit (two for words of 8 letters or more, a
transposition counting as one), unless it is the key word or an inflection of it. A long text
(random words, base64) holds tens of thousands of distinct words: checked one by one in
Python they took seconds, so :func:`typo_words` first rules words out in bulk (numpy, over
all of them at once) by conditions every typo meets, and checks only the rest.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from typing import Any

# Words an attack cannot do without; a typo of one (``iunstructions``, ``ignroe``) is read as
# the word itself in the "typo" view.
KEYWORDS = frozenset((
    "ignore", "disregard", "forget", "previous", "prior", "instructions", "instruction",
    "prompt", "system", "guidelines", "override", "bypass", "reveal", "repeat", "beginning",
    "conversation", "restrictions", "jailbreak", "developer", "earlier", "directives",
    "original", "initial", "disclose", "unrestricted", "unfiltered"))
_INFLECTIONS = frozenset(("s", "es", "d", "ed", "r", "rs", "ing", "ion", "ions", "er", "ers",
                          "ly", "n", "ns"))


def _osa(a: str, b: str, limit: int) -> int:
    """Edit distance with transpositions (optimal string alignment), capped at limit + 1."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


# The key words by first letter, in order, with their letters: an inflection starts with its
# key's first letter, and a typo within ``limit`` edits lacks at most ``limit`` of its key's
# distinct letters (an edit brings in one letter at most; a transposition none). Ruling the
# other keys out before any edit distance keeps a text of 100,000 distinct words (random
# words, base64) to a few set operations a word: all 26 keys' checks took seconds.
_BY_FIRST: dict[str, tuple[tuple[str, frozenset[str]], ...]] = {
    c: tuple((k, frozenset(k)) for k in sorted(KEYWORDS) if k[0] == c)
    for c in {k[0] for k in KEYWORDS}}


@functools.lru_cache(maxsize=8192)
def _keyword(word: str) -> str | None:
    """The key word ``word`` is a typo of (distance 1, or 2 for words of 8+ letters)."""
    if word in KEYWORDS or any(_inflects(word, key) for key, _ in _BY_FIRST.get(word[0], ())):
        return None  # an inflection ("ignores", "prompted") is a word, not a typo
    limit = 2 if len(word) >= 8 else 1
    keys = _BY_FIRST.get(word[0], ()) + (_BY_FIRST.get(word[1], ()) if word[1] != word[0]
                                           else ())
    near = [(_osa(word, key, limit), key) for key, letters in sorted(keys)
            if abs(len(key) - len(word)) <= limit and len(letters.difference(word)) <= limit]
    best = min(near, default=(limit + 1, ""))
    return best[1] if best[0] <= limit else None


def _inflects(word: str, key: str) -> bool:
    stems = (key, key[:-1]) if key.endswith("e") else (key,)
    return any(word.startswith(s) and word[len(s):] in _INFLECTIONS for s in stems)


# Up to this many distinct words are checked one by one; more are ruled out in bulk first.
BULK = 2_000


def typo_words(words: Collection[str]) -> dict[str, str]:
    """The words of ``words`` (distinct runs of 4+ ASCII lower-case letters) that are typos of
    a key word, each with its key word."""
    if len(words) > BULK:
        words = _maybe(list(words))
    return {w: key for w in words if (key := _keyword(w)) is not None}


def stretched(origin: Sequence[int], parts: list[str], found: dict[str, str]) -> Any:
    """``origin`` (a view's map back to the text) with each typo's piece made its key's
    length: ``parts`` is the view's text split around its words (the words at odd indices),
    ``found`` the typos with their key words. A longer key repeats the typo's last index, a
    shorter one keeps the typo's first indices (what a loop over the typos built, a Python
    step each; here numpy repeats each index 0, 1 or more times). A numpy array: a tuple of
    a million ints took 0.2 s more."""
    import numpy as np

    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    words = parts[1::2]
    typo = np.fromiter(map(found.__contains__, words), dtype=bool, count=len(words))
    at = (np.cumsum(lengths) - lengths)[1::2][typo]  # where each typo starts in the view
    size = lengths[1::2][typo]
    key = np.fromiter(map(len, map(found.get, words, words)), dtype=np.int64,
                      count=len(words))[typo]
    return _repeat(origin, _times(len(origin), at, size, key))


def _times(length: int, at: Any, size: Any, key: Any) -> Any:
    """How many times each index of a view of ``length`` is in its typo view: typos at
    ``at``, ``size`` long, each swapped for a key ``key`` long (see ``stretched``)."""
    import numpy as np

    times = np.ones(length, dtype=np.int64)
    longer = key > size
    np.add.at(times, (at + size - 1)[longer], (key - size)[longer])
    drop = np.where(key < size, size - key, 0)  # the typo's last letters beyond its key's
    first = np.repeat(at + key - np.cumsum(drop) + drop, drop)
    times[first + np.arange(int(drop.sum()))] = 0
    return times


def _repeat(origin: Sequence[int], times: Any) -> Any:
    import numpy as np

    base = (np.arange(origin.start, origin.stop) if isinstance(origin, range)
            else np.asarray(origin, dtype=np.int64))
    return np.repeat(base, times)


# Up to this many distinct typos, a long ASCII view's are found by comparing its runs of
# letters with each; more go through the split text.
FEW = 32


def fixed(data: bytes, origin: Sequence[int], found: dict[str, str]) -> tuple[str, Any] | None:
    """The typo view of an ASCII view (``data``: its bytes; ``origin``: its map) and that
    view's map, with each typo (a maximal run of 4+ lower-case letters in ``found``)
    swapped for its key word, as ``stretched`` maps it; or None for more than ``FEW``
    typos. By numpy over the bytes: the split text, a dict lookup per word and the maps'
    lengths a word at a time took 40 ms on 1 MB of typos."""
    import numpy as np

    from thinkloop.guard.blobs import runs

    if len(found) > FEW:
        return None
    raw = np.frombuffer(data, dtype=np.uint8)
    starts, ends = runs((raw >= 97) & (raw <= 122))
    size = ends - starts
    maybe = np.flatnonzero(np.isin(size, list({len(w) for w in found})))
    padded = np.concatenate((raw, np.zeros(_WIDTH, dtype=np.uint8)))
    rows = np.lib.stride_tricks.sliding_window_view(padded, _WIDTH)[starts[maybe]]
    rows[np.arange(_WIDTH) >= size[maybe][:, None]] = 0
    pairs = rows.view(np.uint64)
    which = np.full(len(maybe), -1)
    for i, typo in enumerate(found):
        want = np.frombuffer(typo.encode().ljust(_WIDTH, b"\0"), dtype=np.uint64)
        which[(pairs[:, 0] == want[0]) & (pairs[:, 1] == want[1])] = i
    hit = which >= 0
    at, size, which = starts[maybe[hit]], size[maybe[hit]], which[hit]
    key = np.array([len(k) for k in found.values()], dtype=np.int64)[which]
    times = _times(len(raw), at, size, key)
    same = bool((times == 1).all())
    out = raw.copy() if same else np.repeat(raw, times)
    begin = at if same else (np.cumsum(times) - times)[at]  # each key's start in the view
    # Each key's letters past what it shares with its typo (the typo's kept letters hold
    # the rest), a letter of one key at a time over all its typos' places.
    for i, (typo, word) in enumerate(found.items()):
        places = begin[which == i]
        common = next((j for j, (a, b) in enumerate(zip(typo, word, strict=False))
                       if a != b),
                      min(len(typo), len(word)))
        for j in range(common, len(word)):
            out[places + j] = ord(word[j])
    return out.tobytes().decode("ascii"), origin if same else _repeat(origin, times)


def _maybe(words: list[str]) -> list[str]:
    """The words that may be typos: the others certainly are not (see ``_survivors``)."""
    import numpy as np  # a base dependency; here only for long texts, in a worker thread

    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    codes = np.frombuffer("".join(words).encode("ascii"), dtype=np.uint8)
    masks = np.bitwise_or.reduceat(np.left_shift(1, codes.astype(np.int64) - 97), starts)
    maybe = _survivors(codes, starts, lengths, masks)
    return [w for w in words if w in maybe]


def candidates(data: bytes) -> set[str]:
    """The distinct words of a UTF-8 text (its maximal runs of 4+ ASCII lower-case letters)
    that may be typos of a key word: ``_survivors`` run over every run in the text at once,
    read from its bytes. Splitting a long text into its words and their set took 25-35 ms a
    megabyte (prose: 250,000 words), and most texts hold no word that passes."""
    import numpy as np

    from thinkloop.guard.blobs import runs

    raw = np.frombuffer(data, dtype=np.uint8)
    letter = (raw >= 97) & (raw <= 122)
    starts, ends = runs(letter)
    keep = (ends - starts >= 4) & (ends - starts <= _WIDTH)  # longer: no key's typo
    starts, ends = starts[keep], ends[keep]
    if not len(starts):
        return set()
    # Each byte's letter as a bit (none for others), by a table; one past the end, as a
    # run may end there.
    bits = np.take(_letter_bits(), np.concatenate((raw, np.zeros(1, dtype=np.uint8))))
    # OR over [start, end) of each run; the odd results (between runs) are dropped.
    masks = np.bitwise_or.reduceat(bits, np.stack((starts, ends), axis=1).ravel())[0::2]
    return _survivors(raw, starts, ends - starts, masks)


@functools.lru_cache(maxsize=1)
def _letter_bits() -> Any:
    import numpy as np

    table = np.zeros(256, dtype=np.int32)
    table[97:123] = np.left_shift(1, np.arange(26, dtype=np.int32))
    return table


# A typo is at most the longest key word and two edits long: each fits in 16 bytes, two
# integers, so distinct ones are found by sorting integers (np.unique on rows of bytes
# compared them a byte at a time: 0.5 s for 70,000 repeats of three words).
_WIDTH = 16
assert max(map(len, KEYWORDS)) + 2 <= _WIDTH


def _survivors(codes: Any, starts: Any, lengths: Any, masks: Any) -> set[str]:
    """Which words (``codes[start:start + length]``, ASCII codes; ``masks``: their letters
    as bits) may be typos. A typo within ``limit`` edits of a key has the key's first
    letter as its first or second letter, a length within ``limit`` of the key's, and lacks
    at most ``limit`` of the key's distinct letters (an edit brings in one letter at most).
    Counted with repeats, it lacks at most ``limit`` of the key's letters and has at most
    ``limit`` more (an edit changes the counts by one letter each way at most; a
    transposition not at all): random words passed the distinct letters' test by the
    thousand, each then an edit distance in Python (0.2 s on 1 MB). The first tests run on
    every word, the counts on each distinct word that passed them, once (a text of the key
    words over and over has tens of thousands of each)."""
    import numpy as np

    first, second = codes[starts], codes[starts + 1]
    limit = np.where(lengths >= 8, 2, 1)
    absent = np.invert(masks) & (1 << 26) - 1  # the letters each word lacks
    near = np.zeros(len(starts), dtype=bool)
    for c, keys in _BY_FIRST.items():
        group = np.flatnonzero((first == ord(c)) | (second == ord(c)))
        for key, letters in keys:
            kmask = sum(1 << (ord(k) - 97) for k in letters)
            near[group[(np.abs(lengths[group] - len(key)) <= limit[group])
                       & (_popcount(absent[group] & kmask) <= limit[group])]] = True
    at = np.flatnonzero(near)
    if not len(at):
        return set()
    # Each word's 16 bytes from where it starts (a row of a sliding window), past its end
    # made NULs.
    padded = np.concatenate((codes, np.zeros(_WIDTH, dtype=np.uint8)))
    words = np.lib.stride_tricks.sliding_window_view(padded, _WIDTH)[starts[at]]
    words[np.arange(_WIDTH) >= lengths[at][:, None]] = 0
    words = _distinct(words)
    size = (words != 0).sum(axis=1)
    room = np.where(size >= 8, 2, 1)
    counts = (words[:, :, None] == np.arange(97, 123, dtype=np.uint8)).sum(axis=1)
    found: set[str] = set()
    for c, keys in _BY_FIRST.items():
        group = np.flatnonzero((words[:, 0] == ord(c)) | (words[:, 1] == ord(c)))
        for key, _ in keys:
            kcounts = np.bincount(np.frombuffer(key.encode(), dtype=np.uint8) - 97,
                                  minlength=26)
            diff = counts[group] - kcounts
            ok = ((np.abs(size[group] - len(key)) <= room[group])
                  & (np.maximum(-diff, 0).sum(axis=1) <= room[group])
                  & (np.maximum(diff, 0).sum(axis=1) <= room[group]))
            found.update(w.tobytes().rstrip(b"\0").decode("ascii") for w in words[group[ok]])
    return found


def _distinct(rows: Any) -> Any:
    """The distinct rows of ``rows`` (16 bytes each)."""
    import numpy as np

    pairs = rows.view(np.uint64)  # (n, 2)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    pairs = pairs[order]
    new = np.ones(len(pairs), dtype=bool)
    new[1:] = (pairs[1:] != pairs[:-1]).any(axis=1)
    return rows[order[new]]


def _popcount(x: Any) -> Any:
    """The number of bits set in each of ``x`` (26-bit letter sets), 13 bits at a time."""
    table = _bits()
    return table[x & 8191] + table[x >> 13]


@functools.lru_cache(maxsize=1)
def _bits() -> Any:
    import numpy as np

    return np.array([bin(i).count("1") for i in range(1 << 13)], dtype=np.int64)
