"""Encoded runs in a text and what they decode to: the input guard's decoded views
(guard/scan.py), each finding's span the encoded run.

Base64 runs (``B64``; in a long text found by numpy, guard/blobs.py), words of hex digits and
runs of words holding percent-escapes, each decoded as UTF-8 (bytes that are not read as
U+FFFD); ``printable`` tells a decoded text from binary data.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Iterable, Iterator

from thinkloop.guard import blobs, linear

B64 = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
# A word of 20 or more hex digits; an odd count is refused after the match. The same matches
# as pairs of digits repeated, which re matched a group at a time (0.25 s on 1 MB of digits).
HEX = re.compile(r"\b[0-9a-fA-F]{20,}\b")
# Runs of words holding %XX escapes. A match starts only where a word does ((?<!\S)): tried
# from every position, the scan of one long word was quadratic (20 KB: 1.5 s).
PCT = re.compile(r"(?<!\S)\S*%[0-9a-fA-F]{2}\S*(?:\s+\S*%[0-9a-fA-F]{2}\S*)*")


def decoded(text: str) -> Iterator[tuple[str, str, tuple[int, int]]]:
    """(view name, decoded text, span of the encoded run) for runs that decode to text."""
    utf8 = linear.encode(text) if linear.available() else None
    # B64 by re on a message; in a long text, where RE2 finds a run at all, by numpy
    # (guard/blobs.py: the same spans, less runs that can only be binary), as re tried up to
    # 16 characters at each letter (13 ms on 1 MB of random words) and RE2 cost a call a run.
    runs: Iterable[tuple[int, int]] = ()
    if len(text) <= linear.SHORT:
        runs = (m.span() for m in B64.finditer(text))
    elif linear.may_match(B64, text, utf8):
        runs = blobs.base64_runs(text, utf8 if utf8 is not None else linear.encode(text),
                                 text_only=True)
    for start, end in runs:
        raw = text[start:end]
        try:
            data = binascii.a2b_base64(raw + "=" * (-len(raw) % 4), strict_mode=True)
        except (binascii.Error, ValueError):
            continue
        yield "base64", data.decode("utf-8", "replace"), (start, end)
    for m in HEX.finditer(text) if linear.may_match(HEX, text, utf8) else ():
        if not len(m.group()) % 2:
            yield "hex", bytes.fromhex(m.group()).decode("utf-8", "replace"), m.span()
    for m in linear.finditer(PCT, text, data=utf8):
        yield "percent", _unquote(m.group()), m.span()


_ESCAPE = re.compile(r"%([0-9a-fA-F]{2})")


def _unquote(run: str) -> str:
    """``urllib.parse.unquote``, with its per-escape Python loop done by C maps instead (a
    1 MB run of escapes took 0.3 s), or by numpy for a long run (a part per escape: 0.25 s
    on 1 MB)."""
    if len(run) > linear.SHORT and run.isascii():
        return _unquote_ascii(run)
    parts = _ESCAPE.split(run)
    out: list[bytes] = [b""] * len(parts)
    out[0::2] = map(str.encode, parts[0::2])
    out[1::2] = map(bytes.fromhex, parts[1::2])
    return b"".join(out).decode("utf-8", "replace")


def _unquote_ascii(run: str) -> str:
    """``_unquote`` of an ASCII run, by numpy: each "%" with two hex digits after it becomes
    their byte (escapes cannot overlap: a hex digit is no "%"), the digits are dropped."""
    import numpy as np

    raw = np.frombuffer(run.encode("ascii"), dtype=np.uint8)
    value = np.full(256, -1, dtype=np.int16)
    for digits in ("0123456789", "abcdef", "ABCDEF"):
        value[np.frombuffer(digits.encode(), dtype=np.uint8)] = \
            np.arange(len(digits)) + (0 if digits[0] == "0" else 10)
    high, low = value[raw[1:-1]], value[raw[2:]]
    at = np.nonzero((raw[:-2] == ord("%")) & (high >= 0) & (low >= 0))[0]
    out = raw.copy()
    out[at] = high[at] * 16 + low[at]
    keep = np.ones(len(raw), dtype=bool)
    keep[at + 1] = keep[at + 2] = False
    return out[keep].tobytes().decode("utf-8", "replace")


def printable(text: str) -> bool:
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
