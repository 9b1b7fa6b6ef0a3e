"""Per-session locks: FIFO inside a process, advisory across processes.

Waiters in one process queue on an ``asyncio.Lock`` (so order of arrival is order of service
and only one of them holds an OS-level resource); the holder then takes the cross-process lock
(a ``flock`` on a per-session file for SQLite, ``pg_advisory_lock`` on PostgreSQL). Both are
released by the OS if the process dies, so a crashed run never leaves a session locked.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import hashlib
import os
import struct
from collections.abc import AsyncIterator, Iterator
from pathlib import Path


class LocalLocks:
    """asyncio locks by key, dropped when nobody holds or waits for them."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


def session_key(session_id: str) -> int:
    """A stable signed 64-bit key for PostgreSQL advisory locks."""
    digest = hashlib.blake2b(session_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _open_locked(path: Path) -> int | None:
    """The lock file's descriptor with its ``flock`` taken, or None if another holds it.

    A holder unlinks the file as it lets go (one file per session would otherwise pile up
    for ever), so a lock taken on a file no longer at ``path`` is no lock: try again on the
    file that is there now."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = -1
        if current == os.fstat(fd).st_ino:
            return fd
        os.close(fd)


def _release(path: Path, fd: int) -> None:
    # Unlinked while still held: a waiter that opened this file finds it gone and reopens.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    os.close(fd)


@contextlib.asynccontextmanager
async def file_lock(
    path: Path, poll_s: float = 0.005, max_poll_s: float = 0.05
) -> AsyncIterator[None]:
    """An exclusive ``flock`` taken by polling, so waiting stays cancellable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    delay = poll_s
    while (fd := _open_locked(path)) is None:
        await asyncio.sleep(delay)
        delay = min(delay * 2, max_poll_s)
    try:
        yield
    finally:
        _release(path, fd)


@contextlib.contextmanager
def try_file_lock(path: Path) -> Iterator[bool]:
    """Take the ``flock`` only if it is free; yields whether it was taken."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_locked(path)
    if fd is None:
        yield False
        return
    try:
        yield True
    finally:
        _release(path, fd)


# Linux's locks owned by an open file (not by the process, as ``lockf``'s are): two opens of
# one file conflict even in one process, and closing one drops only its own locks. None
# elsewhere: there :class:`KeyLocks` takes a file per key, as ``try_file_lock`` does.
_OFD_SETLK: int | None = getattr(fcntl, "F_OFD_SETLK", None)
_HASH_BITS = 62  # a lock's byte offset in the file: a key's hash, below off_t's sign bit


def _flock(kind: int, at: int) -> bytes:
    """A ``struct flock`` for one byte at ``at`` (l_type, l_whence, l_start, l_len, l_pid)."""
    return struct.pack("@hhqqi4x", kind, os.SEEK_SET, at, 1, 0)


class KeyLocks:
    """Try-locks by key across processes, each one byte of one file (at the key's hash).

    A file per key (:func:`try_file_lock`) costs a create, a lock, two stats and an unlink
    each time; a run takes one as it starts ("run:<id>", its liveness for resume), and at
    200 runs at once that was 40 µs a model call (issue 38's profile). Here it is one
    ``fcntl`` to take and one to let go, on a file opened once. Held by an open file, as
    ``flock`` is: released by the OS when the process dies. Keys held here are refused here
    too (one open file does not conflict with itself)."""

    def __init__(self, lock_dir: Path) -> None:
        self.path = lock_dir / "keys.lock"
        self._fd: int | None = None
        self._held: set[int] = set()
        self._opened = 0  # times the file was opened: a lock outlives no close of its file

    def _file(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            self._opened += 1
        return self._fd

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[bool]:
        """Take ``key``'s lock only if it is free; yields whether it was taken."""
        if _OFD_SETLK is None:
            with try_file_lock(lock_path(self.path.parent, "try:" + key)) as taken:
                yield taken
            return
        digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
        at = int.from_bytes(digest, "big") >> (64 - _HASH_BITS)
        if at in self._held:
            yield False
            return
        fd = self._file()
        try:
            fcntl.fcntl(fd, _OFD_SETLK, _flock(fcntl.F_WRLCK, at))
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            yield False
            return
        self._held.add(at)
        opened = self._opened
        try:
            yield True
        finally:
            if opened == self._opened:  # else closed meanwhile: the lock went with the file
                self._held.discard(at)
                fcntl.fcntl(fd, _OFD_SETLK, _flock(fcntl.F_UNLCK, at))

    def close(self) -> None:
        """Close the file (every lock held through it is let go)."""
        fd, self._fd = self._fd, None
        self._held.clear()
        if fd is not None:
            os.close(fd)


def lock_path(lock_dir: Path, session_id: str) -> Path:
    return lock_dir / (hashlib.sha1(session_id.encode()).hexdigest() + ".lock")


def session_lock(store: object, session_id: str) -> contextlib.AbstractAsyncContextManager[None]:
    """The store's cross-process session lock, or nothing for stores without one."""
    lock = getattr(store, "lock", None)
    if callable(lock):
        cm: contextlib.AbstractAsyncContextManager[None] = lock(session_id)
        return cm
    return contextlib.nullcontext()
