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

import base64
import binascii
import codecs
import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from thinkloop.guard import linear, prefilter
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


# Cyrillic and Greek letters that look like Latin ones.
_HOMOGLYPHS = str.maketrans({
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "х": "x", "у": "y", "і": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "ɡ": "g", "һ": "h", "ӏ": "l", "α": "a", "ο": "o", "ε": "e", "ι": "i",
    "ν": "v", "τ": "t", "κ": "k", "ρ": "p",
})
_LEET = {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"}
# One letter, then the same separator after every letter: "i.g.n.o.r.e", "i g n o r e".
_SPLIT = re.compile(r"(?<![^\W_])[^\W_]([ .\-_*·|/])(?:[^\W_]\1){1,}[^\W_](?![^\W_])")
# The same without its lookarounds and with the separator spelt out: what RE2 can screen for.
_SPLIT_SCREEN = re.compile("|".join(rf"[^\W_]{re.escape(sep)}(?:[^\W_]{re.escape(sep)})+[^\W_]"
                                    for sep in " .-_*·|/"))
_LEET_TABLE = str.maketrans(_LEET)
_MIXED = re.compile(r"[a-z][0-9@$]|[0-9@$][a-z]")
# A whole run of letters, digits, @ and $ that mixes them. It starts only where a run does
# (the lookbehind), so the backtracking to find the mix stays within one run: linear.
_MIXED_RUN = re.compile(r"(?<![a-z0-9@$])[a-z0-9@$]*?(?:[a-z][0-9@$]|[0-9@$][a-z])[a-z0-9@$]*")
_ROT_HINT = re.compile(r"\brot\s*-?\s*13|caesar|cipher|decode|decrypt|unscramble")
_REV_HINT = re.compile(r"backwards?|revers|right[\s-]+to[\s-]+left|mirror")
_B64 = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_HEX = re.compile(r"\b(?:[0-9a-fA-F]{2}){10,}\b")
# Runs of words holding %XX escapes. A match starts only where a word does ((?<!\S)): tried
# from every position, the scan of one long word was quadratic (20 KB: 1.5 s).
_PCT = re.compile(r"(?<!\S)\S*%[0-9a-fA-F]{2}\S*(?:\s+\S*%[0-9a-fA-F]{2}\S*)*")


@dataclass(frozen=True, slots=True)
class _View:
    name: str
    text: str
    origin: Sequence[int]  # origin[i] = index in the original text of text[i]
    whole: tuple[int, int] | None = None  # decoded views: every match spans the encoded run


def _canonical(text: str, base: int = 0) -> _View:
    if text.isascii():  # the common case: nothing to fold but case
        return _View("text", text.lower(), range(base, base + len(text)))
    chars: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        if unicodedata.category(ch) == "Cf":
            continue
        norm = unicodedata.normalize("NFKC", ch).lower().translate(_HOMOGLYPHS)
        chars.extend(norm)
        origin.extend([base + i] * len(norm))
    return _View("text", "".join(chars), tuple(origin))


def _leet(view: _View) -> _View | None:
    # Only inside runs that hold a letter, so plain numbers ("2024", "$5") stay as they are.
    # Such a run holds a letter next to a digit, @ or $: without one anywhere (one C search)
    # there is no leet view, and only the runs that have one are translated. (A Python call
    # per word took seconds on a 1 MB text.)
    if linear.search(_MIXED, view.text) is None:
        return None
    text = _MIXED_RUN.sub(lambda m: m.group().translate(_LEET_TABLE), view.text)
    return _View("leet", text, view.origin) if text != view.text else None


def _collapsed(view: _View) -> _View | None:
    if linear.available() and len(view.text) > linear.SHORT \
            and linear.search(_SPLIT_SCREEN, view.text) is None:
        return None
    splits = [m.span() for m in _SPLIT.finditer(view.text)]
    if not splits:
        return None
    keep = [True] * len(view.text)
    for start, end in splits:
        keep[start + 1:end:2] = [False] * len(range(start + 1, end, 2))
    text = "".join(itertools.compress(view.text, keep))
    origin = tuple(itertools.compress(view.origin, keep))
    return _View("collapsed", text, origin)


# Words an attack cannot do without; a typo of one (``iunstructions``, ``ignroe``) is read as
# the word itself in the "typo" view.
KEYWORDS = frozenset((
    "ignore", "disregard", "forget", "previous", "prior", "instructions", "instruction",
    "prompt", "system", "guidelines", "override", "bypass", "reveal", "repeat", "beginning",
    "conversation", "restrictions", "jailbreak", "developer", "earlier", "directives",
    "original", "initial", "disclose", "unrestricted", "unfiltered"))
_LETTERS = re.compile(r"[a-z]{4,}")
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


@functools.lru_cache(maxsize=8192)
def _keyword(word: str) -> str | None:
    """The key word ``word`` is a typo of (distance 1, or 2 for words of 8+ letters)."""
    if word in KEYWORDS or any(_inflects(word, key) for key in KEYWORDS):
        return None  # an inflection ("ignores", "prompted") is a word, not a typo
    limit = 2 if len(word) >= 8 else 1
    near = [(_osa(word, key, limit), key) for key in sorted(KEYWORDS) if key[0] in word[:2]]
    best = min(near, default=(limit + 1, ""))
    return best[1] if best[0] <= limit else None


def _inflects(word: str, key: str) -> bool:
    stems = (key, key[:-1]) if key.endswith("e") else (key,)
    return any(word.startswith(s) and word[len(s):] in _INFLECTIONS for s in stems)


def _typos(view: _View) -> _View | None:
    # Most texts hold no typo of a key word: their distinct words (one C pass) say so.
    if not any(_keyword(w) for w in set(_LETTERS.findall(view.text))):
        return None
    chars: list[str] = []
    origin: list[int] = []
    last = 0
    for m in _LETTERS.finditer(view.text):
        key = _keyword(m.group())
        if key is None:
            continue
        chars.append(view.text[last:m.start()])
        origin.extend(view.origin[last:m.start()])
        chars.append(key)
        span = view.origin[m.start():m.end()]
        origin.extend(span[min(i, len(span) - 1)] for i in range(len(key)))
        last = m.end()
    if not chars:
        return None
    chars.append(view.text[last:])
    origin.extend(view.origin[last:])
    return _View("typo", "".join(chars), tuple(origin))


def _decoded_blobs(text: str) -> Iterator[tuple[str, str, tuple[int, int]]]:
    """(view name, decoded text, span of the encoded run) for runs that decode to text."""
    utf8 = linear.encode(text) if linear.available() else None
    for m in linear.finditer(_B64, text, data=utf8):
        raw = m.group()
        try:
            data = base64.b64decode(raw + "=" * (-len(raw) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        yield "base64", data.decode("utf-8", "replace"), m.span()
    for m in _HEX.finditer(text):
        yield "hex", bytes.fromhex(m.group()).decode("utf-8", "replace"), m.span()
    for m in linear.finditer(_PCT, text, data=utf8):
        yield "percent", _unquote(m.group()), m.span()


_ESCAPE = re.compile(r"%([0-9a-fA-F]{2})")


def _unquote(run: str) -> str:
    """``urllib.parse.unquote``, with its per-escape Python loop done by C maps instead (a
    1 MB run of escapes took 0.3 s)."""
    parts = _ESCAPE.split(run)
    out: list[bytes] = [b""] * len(parts)
    out[0::2] = map(str.encode, parts[0::2])
    out[1::2] = map(bytes.fromhex, parts[1::2])
    return b"".join(out).decode("utf-8", "replace")


def _printable(text: str) -> bool:
    # Bytes that are not UTF-8 decode to U+FFFD, which is printable: a long word read as
    # base64 is binary, not text (and canonicalising its view cost seconds).
    if not text or text.count("\ufffd") > 0.1 * len(text):
        return False
    if text.isprintable():
        return True
    # Count by distinct character (a set and str.count are C loops; a loop per character
    # took 0.15 s on 1 MB).
    odd = [c for c in set(text) if not (c.isprintable() or c.isspace())]
    return sum(map(text.count, odd)) <= 0.1 * len(text)


def _views(text: str) -> Iterator[_View]:
    canon = _canonical(text)
    yield canon
    for derived in (_leet(canon), _collapsed(canon), _typos(canon)):
        if derived is not None:
            yield derived
    # A model only follows rot13 or reversed text when told to decode it, so those views run
    # only when the text says so (they would double the cost of every scan otherwise).
    data = linear.encode(canon.text) if linear.available() else None
    if linear.search(_ROT_HINT, canon.text, data):
        yield _View("rot13", codecs.encode(canon.text, "rot13"), canon.origin)
    if linear.search(_REV_HINT, canon.text, data):
        yield _View("reversed", canon.text[::-1], canon.origin[::-1])
    for name, decoded, (start, end) in _decoded_blobs(text):
        if _printable(decoded):
            # NULs in decoded bytes are binary data (an IBAN read as base64), not an attack.
            yield _View(name, _canonical(decoded.replace("\x00", "")).text, (), (start, end))


def _span(view: _View, start: int, end: int) -> tuple[int, int]:
    if view.whole is not None:
        return view.whole
    picked = view.origin[start:end] or (view.origin[min(start, len(view.origin) - 1)],)
    # Every view's map runs one way (the reversed view's backwards): its ends are its bounds.
    first, last = picked[0], picked[-1]
    return (min(first, last), max(first, last) + 1)


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


def scan_input(
    text: str, patterns: Iterable[InjectionPattern] = DEFAULT_PATTERNS
) -> list[Finding]:
    """Every injection pattern found in ``text``; ``span`` indexes ``text`` itself.

    One finding per (pattern, span); the plain view wins over derived ones. Ordered by
    position, then by severity (highest first).
    """
    found: dict[tuple[str, tuple[int, int]], Finding] = {}
    pats = tuple(patterns)
    for view in _views(text):
        data = linear.encode(view.text) if linear.available() else None
        for p in pats:
            for m in _matches(p.regex, view.text, data):
                span = _span(view, m.start(), m.end())
                found.setdefault((p.name, span), Finding(
                    p.name, span, p.severity, view.name, "patterns", m.group()[:80]))
    return sorted(found.values(), key=lambda f: (f.span[0], -SEVERITY_RANK[f.severity]))
