"""Process tuning for hosts of many concurrent runs (a gateway, a batch job); opt in, never
applied on import.

Under concurrency most of the loop's overhead is the cyclic garbage collector: every run
allocates messages, events and frames, each young-generation collection walks them, and each
full collection walks every object alive, including the tens of thousands that importing
the engine created and that never die. ``tune_gc`` moves those start-up objects out of the
collector's sight (``gc.freeze``) and makes young collections rarer.
"""

from __future__ import annotations

import gc

# CPython's default is 700 allocations between young collections: far too eager for a
# process allocating a few hundred objects per model call at thousands of calls a second.
YOUNG_THRESHOLD = 50_000


def tune_gc(young_threshold: int = YOUNG_THRESHOLD) -> tuple[int, int, int]:
    """Freeze everything allocated so far and collect the young generation every
    ``young_threshold`` allocations. Call once, after start-up (imports, agents built).
    Returns the previous thresholds, for :func:`gc.set_threshold` to undo it."""
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(young_threshold, before[1], before[2])
    return before


def freeze_for_exit() -> None:
    """Freeze every object still alive, for a process about to exit with everything closed
    and flushed: the interpreter's last collections walk every tracked object (with the
    embedding model's torch loaded, ~1.3 s of a Ctrl-C) to free memory the OS takes back
    anyway. ``atexit`` functions still run; ``__del__`` of objects in cycles may not, as
    Python never promised at exit."""
    gc.freeze()
