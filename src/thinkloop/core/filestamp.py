"""When a text read from a file may be kept: the file's stamp, and whether it had settled.

A reader that keeps what it read (an agent's bootstrap texts, the gateway's agents file)
reads again once the stamp changes. A read within a second of the file's last change is not
kept: two writes within one tick of the file system's clock can leave the same mtime and
size, so the second would go unseen.
"""

from __future__ import annotations

import os
import time

Stamp = tuple[int, int, int]
SETTLED_NS = 1_000_000_000


def stamp_of(st: os.stat_result) -> Stamp:
    """A file's (mtime, size, inode): any edit, replacement or move changes one of them."""
    return st.st_mtime_ns, st.st_size, st.st_ino


def settled(stamp: Stamp) -> bool:
    """Whether the file with ``stamp`` had not changed for a second (what was read under it
    may be kept)."""
    return time.time_ns() - stamp[0] > SETTLED_NS
