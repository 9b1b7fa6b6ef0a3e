"""Making any bytes or string valid text before it is stored or sent.

File names that are not UTF-8 come back from the OS as lone surrogates (``surrogateescape``);
JSON may carry ``\\ud800`` escapes. Neither can be encoded as UTF-8, so a store or a provider
would fail on them later; each bad byte or lone surrogate becomes U+FFFD here instead.
"""

from __future__ import annotations

import re

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(value: bytes | str) -> str:
    """``value`` as a string that always encodes as UTF-8."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", value)
    return value
