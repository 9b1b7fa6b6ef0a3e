"""``scan_input``: find prompt-injection patterns in text, obfuscated or not.

The patterns run over several *views* of the text. Each view keeps a map from its characters
back to the original, so a finding's ``span`` always points into the text the caller passed:

- canonical: NFKC, lower case, zero-width/format characters dropped, homoglyphs folded;
- leet: digits and symbols inside words read as letters (``1gn0r3`` -> ``ignore``);
- collapsed: single letters split by one separator joined (``i.g.n.o.r.e``, ``i g n o r e``);
- rot13 and reversed text, when the text asks for decoding or reading backwards;
- decoded blobs: base64, hex and percent-encoded runs (the span is the encoded run).
"""

from __future__ import annotations

import codecs
import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from thinkloop.guard import decoded, linear, prefilter, typos
from thinkloop.guard.patterns import (
    DEFAULT_PATTERNS,
    SEVERITY_RANK,
    InjectionPattern,
    Severity,
)


@dataclass(frozen=True, slots=True)
class Finding:
    pattern: str
    span: tuple[int, int]
    severity: Severity
    # Which view of the text matched: "text", "leet", "collapsed", "rot13", "base64", ...
    view: str = "text"
    # Which detector fired ("patterns", "classifier", "semantic") and why (the matched text,
    # or the score and the n-grams behind it).
    detector: str = "patterns"
    why: str = ""


# Cyrillic and Greek letters that look like Latin ones; and the dotless "ı", which Python's
# re reads as "i" when ignoring case and RE2 does not (a long text's views are screened by
# RE2: "ıgnore previous instructions" was found in a message and missed in a long text).
_HOMOGLYPHS = str.maketrans({
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "х": "x", "у": "y", "і": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "ɡ": "g", "һ": "h", "ӏ": "l", "α": "a", "ο": "o", "ε": "e", "ι": "i",
    "ν": "v", "τ": "t", "κ": "k", "ρ": "p", "ı": "i",
})
_LEET = {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"}
# One letter, then the same separator after every letter: "i.g.n.o.r.e", "i g n o r e".
_SPLIT = re.compile(r"(?<![^\W_])[^\W_]([ .\-_*·|/])(?:[^\W_]\1){1,}[^\W_](?![^\W_])")
# The same without its lookarounds and with the separator spelt out: what RE2 can screen for.
_SPLIT_SCREEN = re.compile("|".join(rf"[^\W_]{re.escape(sep)}(?:[^\W_]{re.escape(sep)})+[^\W_]"
                                    for sep in " .-_*·|/"))
_LEET_TABLE = str.maketrans(_LEET)
_MIXED = re.compile(r"[a-z][0-9@$]|[0-9@$][a-z]")
# A whole run of digits, @ and $ with no letter: the leet view leaves these as they are. It
# starts only where a run does (the lookbehind), so a failed try stays within one run: linear.
_PURE_RUN = re.compile(r"(?<![a-z0-9@$])([0-9@$]+)(?![a-z0-9@$])")
_ROT_HINT = re.compile(r"\brot\s*-?\s*13|caesar|cipher|decode|decrypt|unscramble")
_REV_HINT = re.compile(r"backwards?|revers|right[\s-]+to[\s-]+left|mirror")


@dataclass(frozen=True, slots=True)
class _View:
    name: str
    text: str
    # origin[i] = index in the original text of text[i]: a range, a tuple, a numpy array or a
    # _Skipping (long views), read by index and length.
    origin: Any
    whole: tuple[int, int] | None = None  # decoded views: every match spans the encoded run
    data: bytes | None = None  # the text as UTF-8 for RE2, when it was needed before


def _canonical(text: str, base: int = 0) -> _View:
    if text.isascii():  # the common case: nothing to fold but case
        return _View("text", text.lower(), range(base, base + len(text)))
    # Each character is folded alone, so the text is folded a distinct character at a time
    # and rewritten by one C pass (str.translate); a loop per character took 1 s on 1 MB.
    codes = _code_points(text) if len(text) > linear.SHORT else None
    # A long text's distinct characters counted by numpy: set() made a string object of
    # each character beyond Latin-1 (20 ms on 1 MB of mixed scripts).
    distinct = "".join(set(text)) if codes is None else \
        "".join(map(chr, _distinct_codes(codes)))
    fold = _folds(distinct)
    if not fold:  # nothing changes (lone surrogates, scripts with no case)
        return _View("text", text, range(base, base + len(text)))
    if codes is not None:  # long, and no lone surrogates
        return _canonical_long(text, base, fold, codes)
    out = text.translate(fold)
    if all(len(v) == 1 for v in fold.values()):
        return _View("text", out, range(base, base + len(text)))
    # Where a character became none or several, the map repeats its index that many times.
    sizes = text.translate({ord(c): chr(len(fold.get(ord(c), c))) for c in distinct}
                           ).encode("latin-1")
    if max(sizes) <= 1:  # dropped characters only: the kept indices, in C
        return _View("text", out, tuple(itertools.compress(range(base, base + len(text)),
                                                           sizes)))
    import numpy as np  # a base dependency; each index repeated in C

    # The map stays a numpy array: a list of a million ints took 0.2 s to build.
    origin = np.repeat(np.arange(base, base + len(text)), np.frombuffer(sizes, np.uint8))
    return _View("text", out, origin)


def _code_points(text: str) -> Any:
    """``text``'s code points (numpy), or None for a text with lone surrogates (encoding
    them through "surrogatepass" cost a handler call each: 45 ms on 1 MB of them)."""
    import numpy as np

    try:
        return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    except UnicodeEncodeError:
        return None


def _distinct_codes(codes: Any) -> list[int]:
    """The distinct values of ``codes`` (code points), in order."""
    import numpy as np

    return list(np.flatnonzero(np.bincount(codes)).tolist())


def _canonical_long(text: str, base: int, fold: dict[int, str], codes: Any) -> _View:
    """``_canonical`` of a long text by numpy over its code points (str.translate with a
    dict costs a lookup per character: 0.3 s on 1 MB of mixed scripts): each code point
    looked up in a table of what it becomes, and the characters that become several (a
    ligature) written by one fancy-indexing pass over their occurrences."""
    import numpy as np

    top = max(fold) + 1
    into = np.arange(top, dtype=np.uint32)  # code point -> code point it becomes (1 to 1)
    sizes = np.ones(top, dtype=np.int64)  # code point -> how many it becomes
    flat, at = [0], np.zeros(top, dtype=np.int64)  # the longer ones' code points, and where
    for c, v in fold.items():
        sizes[c] = len(v)
        if len(v) == 1:
            into[c] = ord(v)
        elif len(v) > 1:
            at[c] = len(flat)
            flat.extend(map(ord, v))
    folded = codes < top
    size = np.ones(len(codes), dtype=np.int64)
    size[folded] = sizes[codes[folded]]
    origin = np.arange(base, base + len(text))
    if not (size != 1).any():
        out = codes.copy()
        out[folded] = into[codes[folded]]
        return _View("text", out.tobytes().decode("utf-32-le"), origin)
    origin = np.repeat(origin, size)  # each index as often as its character's fold is long
    begin = np.cumsum(size) - size  # where each character's fold begins in the view
    out = np.zeros(int(size.sum()), dtype=np.uint32)
    one = size == 1
    out[begin[one]] = np.where(folded[one], into[np.where(folded, codes, 0)[one]],
                               codes[one])
    many = np.nonzero(size > 1)[0]
    if len(many):
        k = size[many]
        nth = np.arange(int(k.sum())) - np.repeat(np.cumsum(k) - k, k)
        out[np.repeat(begin[many], k) + nth] = np.array(flat, dtype=np.uint32)[
            np.repeat(at[codes[many]], k) + nth]
    return _View("text", out.tobytes().decode("utf-32-le"), origin)


def _folds(chars: str) -> dict[int, str]:
    """What each of ``chars`` (distinct) becomes: nothing for a format character (Cf), else
    its NFKC form, lower-cased, homoglyphs folded. The characters are normalised in one call,
    split by NULs (a NUL is a starter: nothing composes or reorders across it)."""
    folded = unicodedata.normalize("NFKC", "\x00".join(chars)).lower().translate(_HOMOGLYPHS)
    parts = folded.split("\x00")
    if len(parts) != len(chars):  # cannot happen (NFKC keeps NULs); the slow way, then
        parts = [unicodedata.normalize("NFKC", c).lower().translate(_HOMOGLYPHS)
                 for c in chars]
    fold: dict[int, str] = {}
    for c, v in zip(chars, parts, strict=True):
        if unicodedata.category(c) == "Cf":
            fold[ord(c)] = ""
        elif v != c:
            fold[ord(c)] = v
    return fold


def _leet(view: _View) -> _View | None:
    # Only inside runs (of letters, digits, @ and $) that hold a letter, so plain numbers
    # ("2024", "$5") stay as they are. Such a run holds a letter next to a digit, @ or $:
    # without one anywhere (one C search) there is no leet view. Translating a run of letters
    # changes nothing, so the text is translated whole but for its runs with no letter, split
    # out in C (a Python call per run took 0.3 s on a 1 MB base64 word cut by "/" and "+").
    if linear.search(_MIXED, view.text, view.data) is None:
        return None
    parts = _PURE_RUN.split(view.text)  # the runs kept as they are at the odd indices
    parts[0::2] = map(str.translate, parts[0::2], itertools.repeat(_LEET_TABLE))
    text = "".join(parts)
    return _View("leet", text, view.origin) if text != view.text else None


def _collapsed(view: _View) -> _View | None:
    # Where RE2 finds the screen alone: re's lookbehind tried at every letter of a megabyte
    # took 0.1 s.
    splits = [m.span() for m in linear.finditer(_SPLIT, view.text, data=view.data,
                                                screen=_SPLIT_SCREEN)]
    if not splits:
        return None
    if len(view.text) > linear.SHORT:
        return _collapsed_long(view, splits)
    keep = bytearray(b"\x01") * len(view.text)  # C bytes, not a list of a million bools
    for start, end in splits:
        keep[start + 1:end:2] = bytes(len(range(start + 1, end, 2)))
    text = "".join(itertools.compress(view.text, keep))
    origin = tuple(itertools.compress(view.origin, keep))
    return _View("collapsed", text, origin)


def _collapsed_long(view: _View, splits: list[tuple[int, int]]) -> _View:
    """``_collapsed`` of a long text: every split's letters (every second character) and the
    text between splits, sliced and joined by C maps, and a map that finds an index past the
    dropped separators by binary search (a Python step per split, and the text and map
    rebuilt a character at a time, took 0.3 s on 1 MB of random words)."""
    import numpy as np

    text = view.text
    bounds = [0, *itertools.chain.from_iterable(splits), len(text)]
    steps = itertools.cycle((1, 2))  # between splits whole, in a split every second one
    out = "".join(map(text.__getitem__, map(slice, bounds[:-1], bounds[1:], steps)))
    start, end = np.array(splits, dtype=np.int64).T
    count = (end - start - 1) // 2  # a split is letter, separator, ..., letter
    nth = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    dropped = np.repeat(start + 1, count) + 2 * nth
    return _View("collapsed", out, _Skipping(view.origin, dropped))


class _Skipping:
    """A view's map with some of its indices dropped (in order), read one index at a time:
    index i of what is kept is i plus the number of dropped indices before it."""

    def __init__(self, origin: Sequence[int], dropped: Any) -> None:
        import numpy as np

        self.origin = origin
        self.size = len(origin) - len(dropped)
        self.shifted = dropped - np.arange(len(dropped))  # dropped index - drops before it

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> int:
        if not -self.size <= i < self.size:
            raise IndexError(i)
        i %= self.size
        return int(self.origin[i + int(self.shifted.searchsorted(i, side="right"))])


_LETTERS = re.compile(r"([a-z]{4,})")


def _typos(view: _View) -> _View | None:
    # Most texts hold no typo of a key word: their distinct words say so, a long text's
    # read from its bytes in bulk (typos.candidates) without splitting it.
    if len(view.text) > linear.SHORT:
        found = typos.typo_words(typos.candidates(
            view.data if view.data is not None else linear.encode(view.text)))
    else:
        found = typos.typo_words(set(_LETTERS.split(view.text)[1::2]))
    if not found:
        return None
    if len(view.text) > linear.SHORT and view.data is not None and \
            len(view.data) == len(view.text):  # ASCII: by numpy over its bytes
        made = typos.fixed(view.data, view.origin, found)
        if made is not None:
            return _View("typo", *made)
    # The text split in C into its words (odd indices) and what lies between them.
    parts = _LETTERS.split(view.text)
    words = parts[1::2]
    # Each word swapped for its key word, if it is a typo, by C maps (a callback per word
    # from re.sub took 0.5 s on a 1 MB text of typos).
    fixed = parts.copy()
    fixed[1::2] = map(found.get, words, words)
    text = "".join(fixed)
    if all(size == len(key) for size, key in zip(map(len, found), found.values(),
                                                   strict=True)):
        return _View("typo", text, view.origin)  # letters swapped or changed: the same map
    return _View("typo", text, typos.stretched(view.origin, parts, found))


def _views(text: str) -> Iterator[_View]:
    canon = _canonical(text)
    if linear.available():  # encoded once, for the patterns and the hints below
        canon = replace(canon, data=linear.encode(canon.text))
    yield canon
    for derived in (_leet(canon), _collapsed(canon), _typos(canon)):
        if derived is not None:
            yield derived
    # A model only follows rot13 or reversed text when told to decode it, so those views run
    # only when the text says so (they would double the cost of every scan otherwise).
    data = canon.data
    if linear.search(_ROT_HINT, canon.text, data):
        yield _View("rot13", codecs.encode(canon.text, "rot13"), canon.origin)
    if linear.search(_REV_HINT, canon.text, data):
        yield _View("reversed", canon.text[::-1], canon.origin[::-1])
    for name, plain, (start, end) in decoded.decoded(text):
        if decoded.printable(plain):
            # NULs in decoded bytes are binary data (an IBAN read as base64), not an attack.
            yield _View(name, _canonical(plain.replace("\x00", "")).text, (), (start, end))


def _span(view: _View, start: int, end: int) -> tuple[int, int]:
    if view.whole is not None:
        return view.whole
    origin, size = view.origin, len(view.origin)
    if start < min(end, size):
        first, last = origin[start], origin[min(end, size) - 1]
    else:
        first = last = origin[min(start, size - 1)]
    # Every view's map runs one way (the reversed view's backwards): its ends are its bounds.
    # (int(): a map may be a numpy array.)
    return (int(min(first, last)), int(max(first, last)) + 1)


# Without RE2 (guard/linear.py), long views are matched a window at a time (each window's
# matches that start in it, with an overlap for their length): one regex call never holds the
# interpreter for long, so a scan in a worker thread lets the event loop run between windows.
_WINDOW = 16_384
_OVERLAP = 1_024


@functools.lru_cache(maxsize=256)
def _factors(regex: re.Pattern[str]) -> frozenset[str] | None:
    return prefilter.factors(regex)


def _matches(regex: re.Pattern[str], text: str, data: bytes | None = None
             ) -> Iterator[re.Match[str]]:
    if linear.available():
        # RE2 finds where a match can start, re confirms there: linear in the text.
        yield from linear.finditer(regex, text, data=data)
        return
    # Only around the words the pattern cannot match without (guard/prefilter.py); a match
    # is at most _OVERLAP long on either side of its word, as across windows below.
    for lo, hi in prefilter.spans(text, _factors(regex), _OVERLAP):
        if hi - lo <= _WINDOW + _OVERLAP:
            yield from regex.finditer(text, lo, hi)
            continue
        for start in range(lo, hi, _WINDOW):
            end = min(hi, start + _WINDOW + _OVERLAP)
            for m in regex.finditer(text, start, end):
                if m.start() < start + _WINDOW:
                    yield m


# A pattern's findings in one view stop at this many: what a scan decides (which patterns
# were found, so whether it blocks, and what the warning names) is settled by the first of
# them, and a 1 MB text of the words the patterns look for, over and over, had 20,000
# findings, each confirmed by re (a third of a second).
PER_VIEW = 50


def scan_input(
    text: str, patterns: Iterable[InjectionPattern] = DEFAULT_PATTERNS
) -> list[Finding]:
    """Every injection pattern found in ``text``; ``span`` indexes ``text`` itself.

    One finding per (pattern, span), and at most ``PER_VIEW`` per pattern and view; the
    plain view wins over derived ones. Ordered by position, then by severity (highest first).
    """
    found: dict[tuple[str, tuple[int, int]], Finding] = {}
    pats = tuple(patterns)
    regexes = tuple(p.regex for p in pats)
    for view in _views(text):
        data = view.data if view.data is not None or not linear.available() \
            else linear.encode(view.text)
        maybe = linear.possible(regexes, view.text, data)  # None: any pattern may match
        # A message-sized view is matched by re alone, as _matches would (linear.finditer
        # passes it straight to re): without two generators a pattern, the most of a
        # short message's scan.
        plain = linear.available() and len(view.text) <= linear.SHORT
        for p in pats if maybe is None else (pats[i] for i in sorted(maybe)):
            found_in = p.regex.finditer(view.text) if plain else \
                _matches(p.regex, view.text, data)
            for m in itertools.islice(found_in, PER_VIEW):
                span = _span(view, m.start(), m.end())
                found.setdefault((p.name, span), Finding(
                    p.name, span, p.severity, view.name, "patterns", m.group()[:80]))
    return sorted(found.values(), key=lambda f: (f.span[0], -SEVERITY_RANK[f.severity]))
