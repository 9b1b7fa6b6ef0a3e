"""Necessary pieces of a regex, as RE2 patterns: what :func:`thinkloop.guard.linear.possible`
screens a long view for, in RE2 passes of two sets for every injection pattern.

A pattern is a sequence of parts; every match of it is the concatenation of its parts'
matches, so any run of consecutive parts matches a substring of every match. A *piece* is
a maximal run of simple parts (literals, classes, short or one-character repeats, optional
groups and alternations of those), translated as :func:`linear.relaxed` does (matching at
least what the run matches), with a word boundary kept where it sits beside an ASCII word
character: there Python's Unicode ``\\b`` implies RE2's ASCII one. A pattern can match only
where each of its pieces matches somewhere.

Pieces span several words (``\\byou\\s+are\\s+...``), so 1 MB of random words or base64,
which holds every short word ("you", "act", "ai") somewhere, holds almost none of them:
the word screen let 10 of the 28 patterns through there, each then an RE2 pass of 1.5 ms
over each view. Counted repeats of broad classes (``[^.\\n]{0,80}``) and of groups split
pieces instead: in one RE2 set they multiply the DFA's states (the whole relaxed patterns
as one set took 1.4 s on 1 MB of the patterns' own words, against 5 ms for the pieces).
"""

from __future__ import annotations

import re
import string
from typing import Any

from thinkloop.guard import linear, prefilter

P, C = linear.P, linear.C
_SINGLE = (C.LITERAL, C.NOT_LITERAL, C.IN, C.CATEGORY, C.ANY)
_ZERO_WIDTH = (C.AT, C.ASSERT, C.ASSERT_NOT)
# A repeat of one character up to this many times stays in a piece (``#{1,4}``).
_SHORT_REPEAT = 8
_WORD = frozenset(string.ascii_letters + string.digits + "_")
# Ignoring case, Python's re also matches these to a non-ASCII letter ("ı", "ſ", the Kelvin
# sign), beside which RE2's ASCII \b does not hold.
_FOLDS_OUT = frozenset("iIsSkK")


def pieces(regex: re.Pattern[str]) -> list[str]:
    """RE2 patterns one of whose matches every match of ``regex`` holds, each: its pieces
    that hold a literal of two characters or more (the others would match almost anywhere)."""
    tree = P.parse(regex.pattern, regex.flags)
    flags = regex.flags | tree.state.flags
    items = list(tree)
    while len(items) == 1 and items[0][0] is C.SUBPATTERN:  # one group around it all
        items = list(items[0][1][-1])
    runs: list[list[tuple[Any, Any]]] = [[]]
    for item in items:
        if _simple(*item):
            runs[-1].append(item)
        elif runs[-1]:
            runs.append([])
    prefix = "(?i)" if flags & re.IGNORECASE else ""
    out = []
    for run in runs:
        words = prefilter._seq(run) if run else None
        if words is not None and min(map(len, words)) >= prefilter.MIN_FACTOR:
            out.append(prefix + _source(run, flags))
    return out


def _simple(op: Any, av: Any) -> bool:
    if op in _SINGLE or op in _ZERO_WIDTH:
        return True
    if op in prefilter.REPEATS:
        _, high, sub = av
        sub = list(sub)
        if len(sub) == 1 and sub[0][0] in _SINGLE:
            return bool(high is C.MAXREPEAT or high <= _SHORT_REPEAT)
        return high is not C.MAXREPEAT and high <= 1 and all(_simple(*i) for i in sub)
    if op is C.SUBPATTERN:
        return all(_simple(*i) for i in av[-1])
    if op is C.BRANCH:
        return all(_simple(*i) for b in av[1] for i in b)
    return False


def _edge(items: list[tuple[Any, Any]], last: bool) -> set[str] | None:
    """The characters a match of ``items`` may start with (``last``: end with), or None
    (any)."""
    for op, av in reversed(items) if last else items:
        if op in _ZERO_WIDTH:
            continue
        if op is C.LITERAL:
            return {chr(av)}
        if op is C.IN and all(o is C.LITERAL for o, _ in av):
            return {chr(c) for _, c in av}
        if op is C.SUBPATTERN:
            return _edge(list(av[-1]), last)
        if op is C.BRANCH:
            edges = [_edge(list(b), last) for b in av[1]]
            return None if any(e is None for e in edges) else set().union(*edges)  # type: ignore[arg-type]
        if op in prefilter.REPEATS and av[0] >= 1:
            return _edge(list(av[2]), last)
        return None
    return None


def _source(run: list[tuple[Any, Any]], flags: int) -> str:
    word = _WORD - _FOLDS_OUT if flags & re.IGNORECASE else _WORD
    parts = []
    for j, (op, av) in enumerate(run):
        if op is C.AT and av is C.AT_BOUNDARY:
            after = _edge(run[j + 1:], False)
            before = _edge(run[:j], True)
            # Python's \b beside an ASCII word character: the other side is no word
            # character in Unicode, so none in ASCII either, and RE2's \b holds there too.
            if (after and after <= word) or (before and before <= word):
                parts.append(r"\b")
            continue
        parts.append(linear._node(op, av, flags))
    return "".join(parts)
