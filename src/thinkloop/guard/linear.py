"""Linear-time matching of Python regexes: RE2 finds where a match can start, ``re`` confirms.

RE2 (``google-re2``, extra ``guard``) runs in time linear in the text but has no lookaround,
back-references or Unicode ``\\b``. :func:`relaxed` translates a compiled Python pattern into
an RE2 pattern that matches *at least* wherever the original does (assertions dropped, ``\\w``
and ``\\s`` widened to their Unicode meaning, a back-reference read as "anything").
:func:`finditer` then walks the text as ``re.finditer`` does: RE2 finds the leftmost position
where the relaxed pattern matches, the original is tried there alone (``regex.match``), and a
rejected position moves the search one character on. Every match ``re.finditer`` would return
is returned, and no other: the original decides, RE2 only skips the positions where it cannot
match. Python's backtracking then runs only where a match starts, never across a long line.

Without the wheel, for a pattern RE2 rejects, or for a text of ``SHORT`` characters or
fewer, :func:`finditer` is ``regex.finditer``.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Iterator
from typing import Any

P: Any = importlib.import_module("re._parser")
C: Any = importlib.import_module("re._constants")

try:
    re2: Any = importlib.import_module("re2")
except ImportError:  # pragma: no cover - the wheel is in the default install
    re2 = None

_WIDE = {  # the Unicode classes, as wide as Python's or wider
    C.CATEGORY_DIGIT: r"\pN", C.CATEGORY_WORD: r"\pL\pN\pM_",
    C.CATEGORY_SPACE: r"\t\n\x0b\f\r \x1c-\x1f\x85\pZ",
}
_NARROW = {  # inside a negated class: no wider than Python's
    C.CATEGORY_DIGIT: "0-9", C.CATEGORY_WORD: "0-9A-Za-z_", C.CATEGORY_SPACE: r"\t\n\x0b\f\r ",
}
_ANY = r"[\x{0}-\x{10FFFF}]"
# Texts up to this long are matched by re alone: quicker on a message, and it cannot take
# long on so little.
SHORT = 4_096


def available() -> bool:
    return re2 is not None


def search(regex: re.Pattern[str], text: str, data: bytes | None = None) -> re.Match[str] | None:
    """``regex.search(text)``, through RE2 where it is there (see :func:`finditer`)."""
    return next(finditer(regex, text, data=data), None)


def may_match(regex: re.Pattern[str], text: str, data: bytes | None = None) -> bool:
    """False only if ``regex`` matches nowhere in ``text``: one RE2 pass of its relaxed form,
    with no start confirmed by ``re`` (confirming the start of a megabyte-long match read it
    all again in Python, 0.1 s); ``regex.search`` without RE2, or for a short text."""
    engine = _compiled(regex.pattern, regex.flags) if available() and len(text) > SHORT \
        else None
    if engine is None:
        return regex.search(text) is not None
    data = encode(text) if data is None else data
    return bool(searcher(engine)(data, 0, len(data)) >= 0)


def _char(c: int) -> str:
    return chr(c) if chr(c).isalnum() and c < 128 else f"\\x{{{c:x}}}"


def _category(cat: Any, negated: bool) -> str | None:
    base = next((k for k in _WIDE if str(k) == str(cat)), None)
    if base is None:
        return None  # a negated category: no class of RE2's fits it exactly
    return (_NARROW if negated else _WIDE)[base]


def _class(items: list[tuple[Any, Any]]) -> str:
    negated = bool(items) and items[0][0] is C.NEGATE
    for op, av in items:
        if negated and op is C.CATEGORY and "NOT_" in str(av):
            # [^\W_]: none of what is not a word character, so within the word characters.
            return f"[{_category(str(av).replace('NOT_', ''), False)}]"
        if not negated and len(items) == 1 and op is C.CATEGORY and "NOT_" in str(av):
            # \S: not even the ASCII spaces (which Python's \S also refuses), so wider.
            base = next(k for k in _NARROW if str(k) == str(av).replace("NOT_", ""))
            return f"[^{_NARROW[base]}]"
    parts: list[str] = []
    for op, av in items[1:] if negated else items:
        if op is C.LITERAL:
            parts.append(_char(av))
        elif op is C.RANGE:
            parts.append(f"{_char(av[0])}-{_char(av[1])}")
        elif op is C.CATEGORY and (part := _category(av, negated)) is not None:
            parts.append(part)
        elif negated:
            continue  # excluding less matches more: still a superset
        else:
            return _ANY
    if not parts:
        return _ANY if negated else "[^\\x{0}-\\x{10FFFF}]"
    return f"[{'^' if negated else ''}{''.join(parts)}]"


def seq(items: list[tuple[Any, Any]], flags: int) -> str:
    return "".join(_node(op, av, flags) for op, av in items)


def _node(op: Any, av: Any, flags: int) -> str:
    if op is C.LITERAL:
        return _char(av)
    if op is C.NOT_LITERAL:
        return f"[^{_char(av)}]"
    if op is C.ANY:
        return _ANY if flags & re.DOTALL else r"[^\n]"
    if op is C.IN:
        return _class(list(av))
    if op is C.CATEGORY:
        return _class([(op, av)])
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        low, high, sub = av
        bound = "" if high is C.MAXREPEAT else str(high)
        # Lazy whatever the original: only where a match starts counts, and a lazy repeat
        # lets RE2 stop at the first end it finds instead of reading on for the longest.
        return f"(?:{seq(list(sub), flags)}){{{low},{bound}}}?"
    if op is C.SUBPATTERN:
        _, add, _, sub = av
        return f"(?:{seq(list(sub), flags | add)})"
    if op is C.ATOMIC_GROUP:
        return f"(?:{seq(list(av), flags)})"
    if op is C.BRANCH:
        return "(?:" + "|".join(seq(list(b), flags) for b in av[1]) + ")"
    if op is C.AT and av is C.AT_BEGINNING and flags & re.MULTILINE:
        return "(?m:^)"  # kept: starts only after a newline, as in re
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
        return ""  # dropped: matches more, and re checks it
    if op in (C.GROUPREF, C.GROUPREF_EXISTS):
        return f"{_ANY}*?"
    raise ValueError(f"no RE2 form for {op}")


def relaxed(regex: re.Pattern[str]) -> str:
    """An RE2 pattern matching wherever ``regex`` matches (at the same start), or more."""
    tree = P.parse(regex.pattern, regex.flags)
    flags = regex.flags | tree.state.flags
    prefix = "(?i)" if flags & re.IGNORECASE else ""
    return prefix + seq(list(tree), flags)


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str, flags: int) -> Any:
    try:
        return compile_relaxed(relaxed(re.compile(pattern, flags)))
    except (ValueError, re.error):
        return None


def compile_relaxed(source: str) -> Any:
    """An RE2 pattern's engine, or None (no RE2, or a pattern it refuses)."""
    if re2 is None:
        return None
    options = re2.Options()
    options.max_mem = 64 << 20
    try:
        return re2.compile(source.encode(), options)
    except re2.error:
        return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def encode(text: str) -> bytes:
    """``text`` as UTF-8 for RE2; a lone surrogate becomes U+FFFD (one character still)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        if len(text) <= SHORT:
            return _SURROGATE.sub("\ufffd", text).encode("utf-8")
    # Encoded with each surrogate as its 3 bytes (ED A0-BF 80-BF: no character's UTF-8 has
    # ED then A0-BF), which numpy then overwrites with U+FFFD's 3 bytes: re.sub replaced
    # 400,000 surrogates of a 1 MB text in 0.3 s. (Python keeps a pair of surrogates as two
    # code points: each is replaced.)
    import numpy as np

    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8).copy()
    at = np.nonzero((data[:-2] == 0xED) & (data[1:-1] >= 0xA0) & (data[1:-1] <= 0xBF))[0]
    data[at], data[at + 1], data[at + 2] = 0xEF, 0xBF, 0xBD
    return data.tobytes()


class Offsets:
    """Byte offsets of a UTF-8 text to character offsets and back, moving forward only."""

    def __init__(self, text: str, data: bytes) -> None:
        self.data = data
        self.ascii = len(text) == len(data)
        # The text as RE2 read it (a lone surrogate as U+FFFD), decoded only when a character
        # offset is turned into a byte one: decoding 1 MB for each pattern cost 0.1 s.
        self._text = text if self.ascii else None
        self.char = self.byte = 0

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.data.decode("utf-8")
        return self._text

    def to_char(self, byte: int) -> int:
        if self.ascii:
            return byte
        if byte < self.byte:
            self.char = self.byte = 0
        self.char += len(self.data[self.byte:byte].decode("utf-8"))
        self.byte = byte
        return self.char

    def to_byte(self, char: int) -> int:
        if self.ascii:
            return char
        if char < self.char:
            self.char = self.byte = 0
        self.byte += len(self.text[self.char:char].encode("utf-8"))
        self.char = char
        return self.byte


def span_searcher(engine: Any) -> Any:
    """``search(data, at, end)``: the byte span of the leftmost match, or None."""
    raw = getattr(engine, "_regexp", None)
    if raw is not None and hasattr(raw, "Match"):
        anchor = re2._Anchor.UNANCHORED

        def fast(data: bytes, at: int, end: int) -> tuple[int, int] | None:
            first, last = raw.Match(anchor, data, at, end)[0]
            return None if first < 0 else (int(first), int(last))
        return fast

    def public(data: bytes, at: int, end: int) -> tuple[int, int] | None:
        hit = engine.search(data, at, end)
        return None if hit is None else (int(hit.start()), int(hit.end()))
    return public


def searcher(engine: Any) -> Any:
    """``search(data, at, end)``: the byte offset where the leftmost match starts, or -1."""
    raw = getattr(engine, "_regexp", None)
    if raw is not None and hasattr(raw, "Match"):  # the wheel's C object: no Match built
        anchor = re2._Anchor.UNANCHORED

        def fast(data: bytes, at: int, end: int) -> int:
            return int(raw.Match(anchor, data, at, end)[0][0])
        return fast

    def public(data: bytes, at: int, end: int) -> int:
        hit = engine.search(data, at, end)
        return -1 if hit is None else int(hit.start())
    return public


def finditer(regex: re.Pattern[str], text: str, pos: int = 0, endpos: int | None = None,
             data: bytes | None = None, screen: re.Pattern[str] | None = None
             ) -> Iterator[re.Match[str]]:
    """``regex.finditer(text, pos, endpos)``, in time linear in the text where RE2 is there.

    ``data`` is ``text`` encoded as UTF-8, when the caller has it (it is reused across
    patterns). ``screen``: what RE2 runs instead of ``regex``'s own relaxed form, a pattern
    that matches wherever ``regex`` does (at the same start), or more; for a regex whose
    relaxed form matches almost anywhere (a back-reference read as "anything")."""
    end = len(text) if endpos is None else min(endpos, len(text))
    source = regex if screen is None else screen
    engine = _compiled(source.pattern, source.flags) if available() and end - pos > SHORT \
        else None
    if engine is None:
        yield from regex.finditer(text, pos, end)
        return
    if data is None:
        data = encode(text)
    from thinkloop.guard import gaps

    cut = gaps.split(regex.pattern, regex.flags) if screen is None and pos == 0 and \
        end == len(text) else None
    if cut is not None:  # a counted gap: tried only before its rarer tail (guard/gaps.py)
        yield from gaps.finditer(regex, cut, text, data)
        return
    offsets = Offsets(text, data)
    byte_end = offsets.to_byte(end) if end < len(text) else len(data)
    at = offsets.to_byte(pos) if pos else 0
    search = searcher(engine)
    while at <= byte_end:
        hit = search(data, at, byte_end)
        if hit < 0:
            return
        start = offsets.to_char(hit)
        m = regex.match(text, start, end)
        if m is None:
            at = offsets.to_byte(start + 1) if start < end else byte_end + 1
            continue
        yield m
        nxt = m.end() if m.end() > start else start + 1
        if nxt > end:
            return
        at = offsets.to_byte(nxt)


def possible(regexes: tuple[re.Pattern[str], ...], text: str, data: bytes | None = None
             ) -> frozenset[int] | None:
    """The indices of ``regexes`` that may match in ``text`` (``data``: its UTF-8), by an
    RE2 pass of each of ``SETS`` sets for all of them, or None (any may). A regex that RE2
    runs (:func:`finditer`) is ruled out when the text lacks one of its pieces
    (guard/pieces.py: runs of its parts, as RE2 patterns, each matching a part of every
    match), or all the words one of which it cannot match without (guard/prefilter.py), as
    RE2 reads case.
    A long view's 28 passes, one per injection pattern, cost 50-90 ms a megabyte; a text
    that is no attack holds the pieces of few of them."""
    if not available() or len(text) <= SHORT:
        return None
    screen = _screen(tuple((r.pattern, r.flags) for r in regexes))
    if screen is None:
        return None
    sets, needs = screen
    data = encode(text) if data is None else data
    try:
        hits = frozenset((j, i) for j, entries in enumerate(sets)
                         for i in entries.Match(data) or ())
    except re2.error:  # pragma: no cover - a set of words compiles and runs
        return None
    return frozenset(i for i, need in enumerate(needs) if need <= hits)


# The regexes' pieces go into this many sets (a regex's all in one), each read in its own
# pass. A set's DFA holds a state per combination of its entries' partial matches that a text
# reaches: on 1 MB of the patterns' own words, one set built 45 ms of states the first time
# and two 27 ms, at 2-3 ms a pass more once built.
SETS = 2


@functools.lru_cache(maxsize=64)
def _screen(regexes: tuple[tuple[str, int], ...]
            ) -> tuple[tuple[Any, ...], tuple[frozenset[tuple[int, int]], ...]] | None:
    """RE2 sets of every regex's pieces and words (any case), and for each regex the entries
    (set, index) that must all match for it to (none: a regex the sets cannot rule out).

    ``SETS`` sets, not one per regex: a set's DFA reads the text once for all its entries.
    (Its DFA never gives up, as a single regex's does when it builds states too often: the
    entries are kept to words and short runs, whose states stay few.)"""
    from thinkloop.guard import gaps, pieces, prefilter

    options = re2.Options()
    options.max_mem = 64 << 20
    sets = tuple(re2.Set.SearchSet(options) for _ in range(SETS))
    needs: list[frozenset[tuple[int, int]]] = []
    for at, (pattern, flags) in enumerate(regexes):
        regex = re.compile(pattern, flags)
        # Every engine a pattern's search may use is compiled here, with the sets, not by
        # the first text that needs it (a counted gap's halves: 6 ms, on a scan's clock).
        gaps.split(pattern, flags)
        found = prefilter.factors(regex) if _compiled(pattern, flags) is not None else None
        if found is None:
            needs.append(frozenset())
            continue
        sources = [*pieces.pieces(regex), "(?i)(?:" + "|".join(
            "".join(map(_char, map(ord, w))) for w in sorted(found)) + ")"]
        need = set()
        for source in sources:
            try:
                need.add((at % SETS, sets[at % SETS].Add(source.encode())))
            except re2.error:  # a piece RE2 refuses: one condition fewer, still sound
                continue
        needs.append(frozenset(need))
    try:
        for entries in sets:
            entries.Compile()
    except re2.error:  # pragma: no cover
        return None
    return sets, tuple(needs)
