"""Matching a pattern with a counted gap by its rarer half: ``lead gap tail``, where the lead
and the gap (``[^.?!\\n]{0,80}?``) have a bounded width and the tail comes after the gap.

RE2 runs such a pattern's relaxed form in linear time, but its DFA holds a state per set of
lead words seen in the last 80 characters: on a text dense with them and no full stop (a
megabyte of the patterns' own words in random order) it kept rebuilding its states, about a
millisecond a search (role_override's "AI ... has no restrictions": 0.15 s a view). Widening
the gap to ``*`` would make each search read to the end of the sentence and back.

:func:`finditer` instead finds where the tail can start (RE2, its relaxed form: a short
pattern of words), and tries the whole pattern (``re``) only where the lead can match (RE2
again) in the ``width`` characters before each of them: every match starts there, as the
lead and the gap are at most ``width`` characters long. The matches are
``regex.finditer``'s, in order, and no others; the tails' and the leads' searches each read
the text once, and ``re`` tries a pattern only at a lead within a window.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from thinkloop.guard import linear, prefilter

P, C = linear.P, linear.C

# A repeat this long or longer, of something of bounded width, is a counted gap. (RE2 ran
# dan's 40-character gap, after a rare word, in 1-5 ms on the patterns' own words, and the
# split in 1-18 ms: its tail's words are common there. Nothing to gain.)
GAP = 60


@dataclass(frozen=True, slots=True)
class Split:
    lead: Any  # what comes before the gap, and what comes after it: relaxed, for RE2
    tail: Any
    least: int  # the lead and the gap: their least and greatest width, in characters
    most: int


def _bounded(items: list[tuple[Any, Any]], state: Any) -> tuple[int, int] | None:
    low, high = P.SubPattern(state, items).getwidth()
    return None if high >= C.MAXREPEAT else (low, high)


@functools.lru_cache(maxsize=256)
def split(pattern: str, flags: int) -> Split | None:
    """``pattern``'s split at its last counted gap after a bounded lead, or None (no such
    gap, a back-reference, nothing after it, or no RE2)."""
    if not linear.available() or "(?P=" in pattern or re.search(r"\\[1-9]", pattern):
        return None
    tree = P.parse(pattern, flags)
    items = list(tree)
    flags |= tree.state.flags
    for g in range(len(items) - 1, 0, -1):
        op, av = items[g]
        if op not in prefilter.REPEATS or av[1] >= C.MAXREPEAT or av[1] < GAP:
            continue
        width = _bounded(items[:g + 1], tree.state)
        if width is None or P.SubPattern(tree.state, items[g + 1:]).getwidth()[0] == 0:
            continue
        case = "(?i)" if flags & re.IGNORECASE else ""
        lead = linear.compile_relaxed(case + linear.seq(items[:g], flags))
        tail = linear.compile_relaxed(case + linear.seq(items[g + 1:], flags))
        if lead is None or tail is None:
            return None
        return Split(lead, tail, *width)
    return None


def _windows(cut: Split, text: str, data: bytes) -> Iterator[tuple[int, int]]:
    """(lo, hi): the starts the pattern can have, lo <= start < hi, in order. A tail the RE2
    search found from t to e stands for every tail start in [t, e): the next search starts at
    e, and the starts [t - most, e - least) cover all of them."""
    offsets = linear.Offsets(text, data)
    search = linear.span_searcher(cut.tail)
    at, end = 0, len(data)
    while at <= end:
        hit = search(data, at, end)
        if hit is None:
            return
        first, last = hit
        last = max(last, first + 1)
        t = offsets.to_char(first)
        e = offsets.to_char(last) if last <= end else len(text) + 1
        yield max(0, t - cut.most), e - cut.least
        at = last


def finditer(regex: re.Pattern[str], cut: Split, text: str, data: bytes
             ) -> Iterator[re.Match[str]]:
    """``regex.finditer(text)``, tried only where the lead can match within a window."""
    offsets = linear.Offsets(text, data)
    search = linear.searcher(cut.lead)
    at = 0  # the first start still to try (after a match, its end)
    lead = -1  # where the lead can next match at or after ``p``, once searched
    for lo, hi in _windows(cut, text, data):
        p = max(at, lo)
        while p < hi:
            if lead < p:
                found = search(data, offsets.to_byte(p), len(data))
                if found < 0:
                    return  # no lead from here on: no match either
                lead = offsets.to_char(found)
            if lead >= hi:
                break
            m = regex.match(text, lead)
            if m is None:
                p = lead + 1
                continue
            yield m
            p = m.end() if m.end() > lead else lead + 1
        at = max(at, p, hi)  # every start before it tried, or holding no lead
