"""A literal prefilter for the injection patterns: run a regex only where it can match.

Most patterns cannot match without one of a few words (``ignore_instructions`` needs one of
its verbs, ``role_override``'s "has no limits" needs "has", "have", "with" or "without").
:func:`factors` reads those words out of the compiled pattern itself (the necessary literal
factors of its syntax tree), so a new pattern gets a prefilter with no list kept by hand. A
view of the text is then searched for the words with ``str.find`` (C, sublinear on rare
words), and the regex runs only in the regions around their occurrences: a text that holds
none of a pattern's words costs that pattern nothing, and a 1 MB line of anything else is no
longer read by thirty regexes.

A pattern without a usable factor (every way through it starts with a character class) runs
on the whole view, as before.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from typing import Any

# sre's parser and opcodes (no stubs: typed Any). The parse tree is what the regex engine
# itself runs, so the factors read from it hold for every pattern the engine accepts.
P: Any = importlib.import_module("re._parser")
C: Any = importlib.import_module("re._constants")

# A factor set is useful only when its shortest word is at least this long: "<" or "@" occur
# everywhere.
MIN_FACTOR = 2
# Most classes of literal characters expanded into one factor each (``[ab]c``: "ac", "bc").
MAX_CLASS = 6
REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT)


def factors(regex: re.Pattern[str]) -> frozenset[str] | None:
    """Lower-case words one of which every match of ``regex`` holds, or None."""
    found = _seq(list(P.parse(regex.pattern, regex.flags)))
    if found is None or min(map(len, found)) < MIN_FACTOR:
        return None
    return frozenset(f.lower() for f in found)


def _better(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    if a is None or b is None:
        return a or b
    key = (min(map(len, a)), -len(a)), (min(map(len, b)), -len(b))
    return a if key[0] >= key[1] else b


def _seq(items: list[tuple[Any, Any]]) -> frozenset[str] | None:
    """The best factor set of a sequence: of its runs of literals, or of one of its parts."""
    best: frozenset[str] | None = None
    run: list[str] = []  # consecutive literal characters
    for op, av in items:
        if op is C.LITERAL:
            run.append(chr(av))
            continue
        if run:
            best = _better(best, frozenset({"".join(run)}))
            run = []
        best = _better(best, _one(op, av))
    if run:
        best = _better(best, frozenset({"".join(run)}))
    return best


def _one(op: Any, av: Any) -> frozenset[str] | None:
    if op is C.SUBPATTERN:
        return _seq(list(av[-1]))
    if op is C.ATOMIC_GROUP:
        return _seq(list(av))
    if op in REPEATS:
        low, _, sub = av
        return _seq(list(sub)) if low >= 1 else None
    if op is C.BRANCH:
        branches = [_seq(list(b)) for b in av[1]]
        if any(b is None for b in branches):
            return None
        return frozenset().union(*branches)  # type: ignore[arg-type]
    if op is C.IN and len(av) <= MAX_CLASS and all(o is C.LITERAL for o, _ in av):
        return frozenset(chr(c) for _, c in av)
    return None  # a class, an assertion, a group reference: nothing it must hold


def regions(text: str, words: frozenset[str], margin: int) -> list[tuple[int, int]]:
    """Merged (start, end) spans of ``text`` within ``margin`` of an occurrence of a word."""
    spans: list[tuple[int, int]] = []
    for word in words:
        at = text.find(word)
        while at >= 0:
            spans.append((max(0, at - margin), min(len(text), at + len(word) + margin)))
            at = text.find(word, at + 1)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def spans(text: str, words: frozenset[str] | None, margin: int
          ) -> Iterator[tuple[int, int]]:
    """Where to run a pattern with factor set ``words`` over ``text``."""
    if words is None:
        yield (0, len(text))
        return
    yield from regions(text, words, margin)
