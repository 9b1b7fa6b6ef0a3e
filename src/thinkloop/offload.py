"""CPU work on untrusted text, off the event loop when the text is long.

Every scanner of untrusted text (the input guard, the secrets vault, the sensitivity
classifier, the answer sanitizer, provenance's host extraction) runs through
:func:`off_loop`: a short text is scanned where it is (a thread hop costs more than the
scan), a long one in a worker thread, so one user's megabyte never stalls the event loop that
serves the other runs of the process (a 96 KB line once froze a gateway for 43 s).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

OFF_LOOP_CHARS = 4000  # texts this long are scanned in a worker thread


async def off_loop(size: int, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)``, in a worker thread when ``size`` (the characters it reads)
    is ``OFF_LOOP_CHARS`` or more."""
    if size < OFF_LOOP_CHARS:
        return fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)
