"""Making any bytes or string valid text before it is stored or sent; a validation error as
one line.

File names that are not UTF-8 come back from the OS as lone surrogates (``surrogateescape``);
JSON may carry ``\\ud800`` escapes. Neither can be encoded as UTF-8, so a store or a provider
would fail on them later; each bad byte or lone surrogate becomes U+FFFD here instead.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

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


class _Invalid(Protocol):
    """A pydantic ``ValidationError`` or FastAPI's ``RequestValidationError``."""

    def errors(self) -> Sequence[Mapping[str, Any]]: ...


def validation_summary(exc: _Invalid, root: str = "(root)", skip: Collection[str] = ()) -> str:
    """``loc: message; ...`` for each error; ``root`` names an error of the whole value, and
    ``skip`` drops location parts that mean nothing to the reader (FastAPI's ``body``)."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc'] if p not in skip) or root}: {e['msg']}"
        for e in exc.errors())
