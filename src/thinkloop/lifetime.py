"""Closing what was opened on an event loop when that loop ends, so nobody has to.

A store's aiosqlite thread, an aiohttp session or an asyncpg pool left open when
``asyncio.run`` returns makes the process print ``Event loop is closed`` tracebacks or
``Unclosed client session`` at exit, or hang on a non-daemon thread. Whatever opens such a
resource registers its closer here; ``asyncio.run`` (and ``asyncio.Runner``) end by running
``loop.shutdown_asyncgens()``, which finalises a parked async generator per loop whose
``finally`` awaits every closer still registered. Closing by hand earlier is fine: closers
must be idempotent, and they run after the loop has cancelled (and waited for) its tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger("thinkloop")

Closer = Callable[[], Awaitable[None]]


@dataclass
class _LoopExit:
    closers: dict[int, Closer] = field(default_factory=dict)
    gen: AsyncGenerator[None, None] | None = None


_EXITS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopExit] = (
    weakref.WeakKeyDictionary())


async def _parked(exit_: _LoopExit) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        while exit_.closers:
            _, closer = exit_.closers.popitem()
            try:
                await closer()
            except Exception:
                log.exception("closing a resource at event loop exit failed")


def close_at_loop_exit(owner: object, closer: Closer) -> None:
    """Await ``closer`` when the running loop shuts down (once per ``owner`` and loop)."""
    loop = asyncio.get_running_loop()
    exit_ = _EXITS.get(loop)
    if exit_ is None:
        exit_ = _EXITS[loop] = _LoopExit()
        gen = _parked(exit_)
        # Park it at its yield: the first step registers it with this loop (the loop's
        # asyncgen hooks), so loop.shutdown_asyncgens() will finalise it.
        with contextlib.suppress(StopIteration):
            gen.asend(None).send(None)
        exit_.gen = gen
    exit_.closers[id(owner)] = closer


def forget_at_loop_exit(owner: object) -> None:
    """``owner`` was closed by hand: nothing to do for it at loop exit."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    exit_ = _EXITS.get(loop)
    if exit_ is not None:
        exit_.closers.pop(id(owner), None)
