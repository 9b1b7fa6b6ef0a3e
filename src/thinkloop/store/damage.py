"""A damaged SQLite file, told apart from a busy or unreadable one, in one line that says what
to do: a truncated copy or a file overwritten with something else is not fixed by retrying."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from thinkloop.core.errors import DamagedStoreError
from thinkloop.store.base import one_line

MAGIC = b"SQLite format 3\x00"
# What SQLite says of a file it cannot read as a database.
DAMAGE_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})


def is_damage(exc: BaseException) -> bool:
    return getattr(exc, "sqlite_errorcode", None) in DAMAGE_CODES


def damaged(path: str, why: str) -> DamagedStoreError:
    return DamagedStoreError(
        f"SQLite database {path} is damaged or not a thinkloop database ({why}): move it "
        f"aside (mv {path} {path}.damaged) to start a new one, or choose another store "
        "(THINKLOOP_DATABASE_URL, --db)")


def damage_error(path: str, exc: BaseException) -> DamagedStoreError:
    return damaged(path, one_line(exc))


def check_length(path: str) -> None:
    """Raise :class:`DamagedStoreError` if the file is shorter than its header says.

    SQLite itself reads a truncated file until it reaches a missing page, so the damage shows
    mid-run; the header's page count (valid when its two change counters agree) shows it at
    once. A file with a write-ahead log is left to SQLite: pages still in the log may be
    what makes up the difference."""
    file = Path(path)
    wal = Path(path + "-wal")
    try:
        if wal.exists() and wal.stat().st_size > 0:
            return
        with file.open("rb") as f:
            head = f.read(100)
        size = file.stat().st_size
    except OSError:
        return  # absent or unreadable: opening it says so
    if len(head) < 100 or not head.startswith(MAGIC) or head[24:28] != head[92:96]:
        return
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    expected = int.from_bytes(head[28:32], "big") * page
    if size < expected:
        raise damaged(path, f"truncated: {size} of its {expected} bytes")
