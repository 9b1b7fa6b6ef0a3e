"""Where a long text's base64 runs are, for the input guard's decoded views (guard/decoded.py),
found by numpy over its UTF-8 bytes.

``[A-Za-z0-9+/]{16,}={0,2}``, searched by ``re``, is tried at every character of a run of
that class until 16 of them follow: 1 MB of random words (14,000 runs of 16 letters or more,
and many more shorter ones) took 13 ms, a fifth of a long scan's views. Its matches are the
text's maximal runs of the class 16 characters or longer, each with up to two "=" after it
(greedy, and a run shorter than 16 holds no match from any of its characters), which numpy
finds in a few passes.
"""

from __future__ import annotations

import functools
from typing import Any


def runs(mask: Any) -> tuple[Any, Any]:
    """The starts and ends of the maximal runs of True in ``mask`` (a numpy bool array): two
    bool comparisons a byte, where np.diff's int8 copies took 4 ms on 1 MB."""
    import numpy as np

    edges = np.flatnonzero(mask[1:] != mask[:-1]) + 1
    if len(mask) and mask[0]:
        edges = np.concatenate(([0], edges))
    if len(mask) and mask[-1]:
        edges = np.concatenate((edges, [len(mask)]))
    return edges[0::2], edges[1::2]


@functools.lru_cache(maxsize=1)
def _base64_class() -> Any:
    import numpy as np

    table = np.zeros(256, dtype=bool)
    for lo, hi in ((b"A", b"Z"), (b"a", b"z"), (b"0", b"9")):
        table[lo[0]:hi[0] + 1] = True
    table[[ord("+"), ord("/")]] = True
    return table


def base64_runs(text: str, data: bytes, shortest: int = 16, text_only: bool = False
                ) -> list[tuple[int, int]]:
    """The spans (in ``text``'s characters) of ``[A-Za-z0-9+/]{shortest,}={0,2}``'s
    matches in ``text``, in order; ``data`` is ``text`` as UTF-8 (a lone surrogate as
    U+FFFD, linear.encode), whose bytes of a character beyond ASCII are never in the class.
    ``text_only``: without the runs that certainly decode to binary (``_binary``)."""
    import numpy as np

    raw = np.frombuffer(data, dtype=np.uint8)
    starts, ends = runs(np.take(_base64_class(), raw))
    keep = ends - starts >= shortest
    if text_only:  # the short runs: a long one costs one C call a kilobyte anyway
        short = keep & (ends - starts < _LONG)
        keep[short] = ~_binary(raw, starts[short], ends[short])
    starts, ends = starts[keep], ends[keep]
    if not len(starts):
        return []
    pad = np.concatenate((raw == ord("="), np.zeros(2, dtype=bool)))
    ends = ends + pad[ends] + (pad[ends] & pad[ends + 1])
    if len(data) != len(text):  # bytes to characters: less the continuation bytes before
        continuation = np.concatenate(([0], np.cumsum((raw & 0xC0) == 0x80)))
        starts, ends = starts - continuation[starts], ends - continuation[ends]
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


# Runs this long or longer are left to the caller to decode, binary or not.
_LONG = 1024


@functools.lru_cache(maxsize=1)
def _sextets() -> Any:
    import numpy as np

    value = np.zeros(256, dtype=np.uint8)
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    value[np.frombuffer(alphabet, dtype=np.uint8)] = np.arange(64)
    return value


def _binary(raw: Any, starts: Any, ends: Any) -> Any:
    """Which runs (``raw[start:end]``, base64 characters) certainly decode to no text, as
    guard/decoded.py's ``printable`` reads a decoded run: more than a tenth U+FFFD, or more
    than a tenth control characters. Read from the bytes of each run's whole quads, a
    prefix of what it decodes to, with counts that can only grow with the rest: bytes that
    are never UTF-8 (C0, C1, F5-FF) and continuation bytes after no lead byte are a U+FFFD
    each, and ASCII control bytes a control character each. Against a tenth of the most
    bytes the run can decode to, as the decoded text has no more characters. 1 MB of
    random words has 14,000 runs, each decoded in Python, as good as all binary."""
    import numpy as np

    size = ends - starts
    quads = size // 4
    run = np.repeat(np.arange(len(starts)), quads)
    nth = np.arange(len(run)) - np.repeat(np.cumsum(quads) - quads, quads)
    at = np.repeat(starts, quads) + 4 * nth
    v = [_sextets()[raw[at + k]] for k in range(4)]  # uint8: no shift below overflows
    stream = np.stack(((v[0] << 2) | (v[1] >> 4), ((v[1] & 15) << 4) | (v[2] >> 2),
                       ((v[2] & 3) << 6) | v[3]), axis=1).ravel()
    run = np.repeat(run, 3)
    never = (stream >= 0xF5) | (stream == 0xC0) | (stream == 0xC1)
    after_none = np.ones(len(stream), dtype=bool)  # what comes before leads nothing
    after_none[1:] = (stream[:-1] < 0x80) | never[:-1] | (run[1:] != run[:-1])
    stray = ((stream & 0xC0) == 0x80) & after_none
    control = (stream < 0x09) | ((stream > 0x0D) & (stream < 0x1C)) | (stream == 0x7F)
    most = 3 * quads + np.array([0, 0, 1, 2])[size % 4]
    bad = np.bincount(run, weights=never | stray, minlength=len(starts))
    odd = np.bincount(run, weights=control, minlength=len(starts))
    return (bad > 0.1 * most) | (odd > 0.1 * most)
