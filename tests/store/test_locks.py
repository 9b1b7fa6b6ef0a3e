"""The per-session file locks: exclusive under churn, and no file left behind per session."""

import asyncio
import os
import sys
from pathlib import Path

import thinkloop
from thinkloop.store import SQLiteStore
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


async def test_a_stores_try_locks_share_one_file_and_exclude_across_processes(
    tmp_path: Path,
) -> None:
    """A run's liveness lock is a byte of one file, not a file made and unlinked per run
    (issue 38), and it still keeps out another process, another store object and itself."""
    store = SQLiteStore(tmp_path / "t.db")
    other = SQLiteStore(tmp_path / "t.db")
    try:
        async with store.try_lock("run:a") as a, store.try_lock("run:b") as b:
            assert (a, b) == (True, True)
            assert sorted(p.name for p in (tmp_path / "t.db.locks").iterdir()) == ["keys.lock"]
            async with store.try_lock("run:a") as again, other.try_lock("run:a") as there:
                assert (again, there) == (False, False)
            probe = ("import asyncio, sys; from thinkloop.store import SQLiteStore\n"
                     "async def main():\n"
                     "    async with SQLiteStore(sys.argv[1]).try_lock('run:a') as t:\n"
                     "        print(t)\n"
                     "asyncio.run(main())")
            src = str(Path(thinkloop.__file__).parents[1])  # this checkout's, not another's
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", probe, str(tmp_path / "t.db"),
                stdout=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": src})
            out, _ = await proc.communicate()
            assert (proc.returncode, out.decode().strip()) == (0, "False")
        async with other.try_lock("run:a") as free:
            assert free is True
    finally:
        await store.aclose()
        await other.aclose()
