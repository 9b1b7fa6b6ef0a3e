"""off_loop: a short text is scanned where it is, a long one in a worker thread."""

from __future__ import annotations

import threading

from thinkloop.offload import OFF_LOOP_CHARS, off_loop


def where(text: str, *, suffix: str = "") -> str:
    return threading.current_thread().name + suffix


async def test_a_long_text_is_scanned_in_a_worker_thread_and_a_short_one_in_place() -> None:
    here = threading.current_thread().name
    assert await off_loop(OFF_LOOP_CHARS - 1, where, "x") == here
    away = await off_loop(OFF_LOOP_CHARS, where, "x", suffix="!")
    assert away.endswith("!") and away != here + "!"
