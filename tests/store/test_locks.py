"""The per-session file locks: exclusive under churn, and no file left behind per session."""

import asyncio
from pathlib import Path

from thinkloop.store.locks import file_lock, try_file_lock


async def test_a_released_lock_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "s.lock"
    async with file_lock(path):
        assert path.exists()
    with try_file_lock(path) as taken:
        assert taken
    assert list(path.parent.iterdir()) == []


async def test_holders_never_overlap_while_files_come_and_go(tmp_path: Path) -> None:
    """Forty waiters on one path, each unlinking the file as it lets go: a waiter that locked
    the unlinked file must not count as a holder beside the one on the new file."""
    path = tmp_path / "s.lock"
    inside, most, turns = 0, 0, 0

    async def one() -> None:
        nonlocal inside, most, turns
        for _ in range(5):
            async with file_lock(path, poll_s=0.0005, max_poll_s=0.001):
                inside += 1
                most = max(most, inside)
                with try_file_lock(path) as taken:
                    assert not taken
                await asyncio.sleep(0)
                inside -= 1
                turns += 1

    await asyncio.gather(*(one() for _ in range(40)))
    assert (most, turns) == (1, 200)
    assert not path.exists()


def test_threads_racing_open_and_unlink_never_hold_it_together(tmp_path: Path) -> None:
    """Across threads (as across processes) a holder can unlink the file between another's
    open and its flock; that other then holds a lock on a file nobody else will open."""
    import sys
    import threading

    path = tmp_path / "s.lock"
    guard = threading.Lock()
    inside, most, turns = 0, 0, 0

    def one() -> None:
        nonlocal inside, most, turns
        for _ in range(5000):
            with try_file_lock(path) as taken:
                if not taken:
                    continue
                with guard:
                    inside += 1
                    most = max(most, inside)
                with guard:
                    inside -= 1
                    turns += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert turns > 0 and most == 1
