"""SQLite backend (the default): one file, WAL mode, aiosqlite.

One connection per store object; an asyncio lock serialises its transactions (aiosqlite would
otherwise interleave two coroutines' statements inside one transaction). Writers in other
processes are serialised by SQLite itself (``BEGIN IMMEDIATE`` with a busy timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

import aiosqlite

from thinkloop.core.events import Event
from thinkloop.lifetime import close_at_loop_exit, forget_at_loop_exit
from thinkloop.store.base import RunRecord, SpanRecord, StoreError, one_line, store_errors
from thinkloop.store.damage import check_length, damage_error, is_damage
from thinkloop.store.gateway import GatewayTables
from thinkloop.store.groupcommit import GroupCommit
from thinkloop.store.locks import KeyLocks, LocalLocks, file_lock, lock_path
from thinkloop.store.serialize import LoggedEvents, SpanRow, logged_rows, run_row, span_row
from thinkloop.store.sql import SQLITE, migrate, render
from thinkloop.store.sqljobs import JobTables
from thinkloop.store.sqlmanaged import ManagedTables
from thinkloop.store.sqlmemory import MemoryTables
from thinkloop.store.sqlruns import (
    ADD_CHECKPOINT,
    ADD_CHECKPOINT_AT,
    ADD_EVENT,
    ADD_EVENT_AT,
    LAST_SEQ,
    OLD_USAGE,
    SAVE_RUN,
    SAVE_SPAN,
    SESSION_USAGE,
    RunTables,
    session_usage,
)
from thinkloop.store.sqlsessions import SessionTables

T = TypeVar("T")
Work = Callable[[sqlite3.Connection], None]  # a write, run on the database thread


async def settled(aw: Awaitable[T]) -> T:
    """``aw`` awaited to its end even when the caller is cancelled meanwhile; the cancel is
    raised after it.

    A statement handed to aiosqlite's thread runs there whether or not its caller is still
    waiting: a caller cancelled at that await went on (to its ROLLBACK, or out of the
    transaction lock) while the statement was still to run, and a BEGIN that ran after the
    ROLLBACK left the connection inside a transaction nobody would end ("cannot start a
    transaction within a transaction" for every later write). Waiting for the statement keeps
    the connection's state the one the code believes it is in."""
    task = asyncio.ensure_future(aw)
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not task.cancelled():
            task.exception()  # seen: its outcome is dropped for the cancel
        raise asyncio.CancelledError
    return task.result()


class _Tx:
    """Statements on the one connection, their placeholders spelled ``?1``; each one settled
    (see :func:`settled`), so a cancel lands between statements."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self.db = db

    async def execute(self, sql: str, *args: Any) -> None:
        await settled(self.db.execute(render(sql, SQLITE.mark), args))

    async def executemany(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        await settled(self.db.executemany(render(sql, SQLITE.mark), rows))

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        return list(await settled(self.db.execute_fetchall(render(sql, SQLITE.mark), args)))


BUSY_TIMEOUT_S = 30.0


def _busy(exc: BaseException) -> bool:
    """Whether SQLite refused because another connection holds a lock ("database is locked")."""
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_BUSY


async def _use_wal(db: aiosqlite.Connection) -> None:
    """Switch the file to WAL, waiting for other connections as the busy timeout would.

    Switching takes a lock that SQLite does not wait for (the busy handler is not called), so
    a second process opening a new database while the first creates its tables was refused
    with "database is locked" (seen at 1 open in 40 with 6 opening at once)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = 0.005
    while True:
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() >= deadline:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.1)


@contextlib.asynccontextmanager
async def _immediate(db: aiosqlite.Connection) -> AsyncIterator[_Tx]:
    """A write transaction from its start: writers in other processes wait their turn.

    Each statement settles before a cancel is raised, and so does the ROLLBACK of a
    transaction that did not finish; what a cancel can still leave behind (a statement whose
    own task the event loop cancelled at exit) is reset by the store before its next use."""
    tx = _Tx(db)
    await tx.execute("BEGIN IMMEDIATE")
    try:
        yield tx
        await tx.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            await settled(_rollback(db))
        raise


def _in_one_tx(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], None]) -> None:
    """On the database thread: ``work`` in one write transaction."""
    conn.execute("BEGIN IMMEDIATE")
    _finish(conn, work)


def _finish(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], None]) -> None:
    """``work`` and COMMIT inside the transaction just begun, or ROLLBACK on any error."""
    try:
        work(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


async def _on_thread(db: aiosqlite.Connection, work: Callable[[sqlite3.Connection], None]
                     ) -> None:
    """``work`` in one transaction and one trip to aiosqlite's thread (a trip is a thread
    hand-off each way, the cost that dominates a small write): BEGIN, the statements and
    COMMIT (or ROLLBACK) run there back to back, so no cancel can land between them."""
    # aiosqlite runs fn(*args) on its connection's thread (the same as its own calls). It is
    # private API, so pyproject caps aiosqlite below the next release: the public route (a
    # trip per statement: BEGIN, each executemany, COMMIT) would cost the group commit most
    # of what it saves at a few runs at a time.
    run = cast(Callable[..., Awaitable[None]], db._execute)
    await settled(run(_in_one_tx, db._conn, work))


Statements = tuple[tuple[str, Sequence[tuple[Any, ...]]], ...]


def _statements(stmts: Sequence[tuple[str, Sequence[tuple[Any, ...]]]]) -> Work | None:
    """A write of ``stmts``' rows (None: no rows), for the group commit.

    Tuples and a partial, not lists and a closure: a write waits in the queue until its
    group commits, so what it holds outlives a collection or two; tuples of plain values
    drop out of the collector's sight at its first pass, lists never do (issue 38)."""
    rendered = tuple((render(sql, SQLITE.mark), rows) for sql, rows in stmts if rows)
    return functools.partial(_execute, rendered) if rendered else None


def _execute(rendered: Statements, conn: sqlite3.Connection) -> None:
    for sql, rows in rendered:
        conn.executemany(sql, rows)


# The statements of a run's path, rendered once.
_CHECKPOINT_SQL = render(ADD_CHECKPOINT, SQLITE.mark)
_CHECKPOINT_AT = render(ADD_CHECKPOINT_AT, SQLITE.mark)
_EVENT_SQL = render(ADD_EVENT, SQLITE.mark)
_EVENT_AT = render(ADD_EVENT_AT, SQLITE.mark)
_LAST_SEQ = render(LAST_SEQ, SQLITE.mark)
_SPAN_SQL = render(SAVE_SPAN, SQLITE.mark)


class RowNumbers:
    """The last ``seq`` of the audit log and the checkpoint log of each run this store is
    told it writes alone (``count_rows``, while the run is live here), so that their rows
    are numbered here instead of each reading ``MAX(seq)`` (2-3 µs a row, 3-4 rows a model
    call; issue 38). A run's numbers are read from the table at its first write, in that
    write's transaction, so a resumed run goes on after its rows as before; a run not
    counted (any other writer) takes ``MAX(seq)`` per row. Commits follow queue order, and
    a number taken by a write that then failed is a gap, which ``ORDER BY seq`` ignores."""

    __slots__ = ("runs",)

    def __init__(self) -> None:
        # [events, checkpoints]; -1: not read yet. A run's list is made once and changed in
        # place (a commit on aiosqlite's thread never adds a run the loop dropped).
        self.runs: dict[str, list[int]] = {}

    def next(self, conn: sqlite3.Connection, run_id: str, log: int) -> int | None:
        last = self.runs.get(run_id)
        if last is None:
            return None
        if last[0] < 0:
            last[:] = conn.execute(_LAST_SEQ, (run_id,)).fetchone()
        last[log] += 1
        return last[log]


class _StepRows:
    """A step's records (see ``add_step_records``), or one checkpoint row, as one object in
    the queue, made into rows only as they are committed: the events' row is built from
    their bytes then, and the spans' rows are those the trace kept since they ended. Rows,
    their statement pairs and a partial were some fifteen objects, each held until its
    group committed and each counted by the collector, which then ran more often (issue 38);
    the checkpoint is its three fields here, not a tuple of them, and no events is None,
    not an empty list (two objects fewer for each queued tool-call row)."""

    __slots__ = ("data", "events", "kind", "numbers", "run_id", "spans", "ts")

    def __init__(self, numbers: RowNumbers, run_id: str, kind: str | None, data: bytes,
                 ts: float, events: LoggedEvents | list[tuple[str, int, float, str]] | None,
                 spans: Sequence[SpanRecord | SpanRow]) -> None:
        self.numbers, self.run_id, self.kind, self.data, self.ts = numbers, run_id, kind, data, ts
        self.events, self.spans = events, spans

    def __call__(self, conn: sqlite3.Connection) -> None:
        rows = _Rows()
        self.add_to(rows, conn)
        rows.flush(conn)

    def add_to(self, rows: _Rows, conn: sqlite3.Connection) -> None:
        """Its rows added to ``rows``, numbered now (in queue order); a run not counted here
        is written at once, after the rows before it, as its ``MAX(seq)`` needs them."""
        run_id, numbers, events = self.run_id, self.numbers, self.events
        if self.kind is not None:
            seq = numbers.next(conn, run_id, 1)
            if seq is None:
                rows.flush(conn)
                conn.execute(_CHECKPOINT_SQL, (run_id, self.kind, self.data, self.ts))
            else:
                rows.checkpoints.append((run_id, seq, self.kind, self.data, self.ts))
        if events:
            for row in events.rows() if isinstance(events, LoggedEvents) else events:
                seq = numbers.next(conn, run_id, 0)
                if seq is None:
                    rows.flush(conn)
                    conn.execute(_EVENT_SQL, (run_id, *row))
                else:
                    rows.events.append((run_id, seq, *row))
        for s in self.spans:
            rows.spans.append((run_id, *span_row(s)))


class _Rows:
    """The rows of a group's step records, one ``executemany`` per statement when flushed:
    a group holds about three writes per model call of every run in it (two hundred-odd
    at 200 runs), each a statement or two of its own before (issue 38). Numbered rows
    carry their ``seq``, so only the order within a table's spans (an upsert) matters,
    and that is kept."""

    __slots__ = ("checkpoints", "events", "spans")

    def __init__(self) -> None:
        self.checkpoints: list[tuple[Any, ...]] = []
        self.events: list[tuple[Any, ...]] = []
        self.spans: list[tuple[Any, ...]] = []

    def flush(self, conn: sqlite3.Connection) -> None:
        if self.checkpoints:
            conn.executemany(_CHECKPOINT_AT, self.checkpoints)
            self.checkpoints = []
        if self.events:
            conn.executemany(_EVENT_AT, self.events)
            self.events = []
        if self.spans:
            conn.executemany(_SPAN_SQL, self.spans)
            self.spans = []


def _commit_all(works: Sequence[Work], conn: sqlite3.Connection) -> None:
    """A group's writes in queue order; the rows of consecutive step records together."""
    rows = _Rows()
    for w in works:
        if type(w) is _StepRows:
            w.add_to(rows, conn)
        else:
            rows.flush(conn)
            w(conn)
    rows.flush(conn)


def _here(conn: sqlite3.Connection, work: Work) -> bool:
    """``work`` in one transaction on the event loop's own thread, if SQLite's write lock is
    free at once (False: another connection holds it; nothing was done).

    A group's commit is a few small inserts and a WAL append (no fsync with
    ``synchronous=NORMAL``; the WAL checkpoint, which syncs, is taken off this path), tens
    of µs; the trip to aiosqlite's thread and back (two thread hand-offs, the GIL passed
    back and forth, a task to settle it) cost more than the work (issue 38's profile). Only
    the wait for another process's lock would stall the loop, so that is never waited for
    here: the busy timeout is 0 while the lock is taken, and a busy database goes the
    thread's way, which waits as before. The commit is the same commit on the same
    connection, so what is durable and when is unchanged."""
    conn.execute("PRAGMA busy_timeout=0")
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY:  # any BUSY_*
            return False
        raise
    finally:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000:.0f}")
    _finish(conn, work)
    return True


async def _nothing() -> None:
    pass


# Inline commits between two WAL checkpoints (SQLite's own: every 1000 pages, on commit).
CHECKPOINT_EVERY = 200


async def _rollback(db: aiosqlite.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        await db.execute("ROLLBACK")


@store_errors((sqlite3.Error, OSError), "SQLite store")
class SQLiteStore(SessionTables, MemoryTables, RunTables, JobTables, GatewayTables,
                   ManagedTables):
    """Sessions, memories and profiles in one SQLite file (``":memory:"`` for a scratch one)."""

    dialect = SQLITE

    def __init__(self, path: str | Path, *, migrate_upto: int | None = None) -> None:
        self.path = str(path)
        self._migrate_upto = migrate_upto
        self._db: aiosqlite.Connection | None = None
        self._tx_lock = asyncio.Lock()
        self._dirty = False  # an operation ended by an error or a cancel: reset before reuse
        self._open_lock = asyncio.Lock()
        self._local = LocalLocks()
        self._writes: GroupCommit[Work] = GroupCommit(self._commit)
        self._numbers = RowNumbers()
        self._since_checkpoint = 0  # group commits since the last WAL checkpoint
        self.lock_dir = None if self.path == ":memory:" else Path(self.path + ".locks")
        self._keys = None if self.lock_dir is None else KeyLocks(self.lock_dir)

    async def _open(self) -> aiosqlite.Connection:
        if self._db is not None:
            return self._db
        async with self._open_lock:
            if self._db is None:
                if self.path != ":memory:":
                    Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                    check_length(self.path)
                try:
                    # Used from the event loop's thread too (group commits, see _here);
                    # never at once: every use holds the store's transaction lock.
                    db = await aiosqlite.connect(self.path, isolation_level=None,
                                                 timeout=BUSY_TIMEOUT_S,
                                                 check_same_thread=False)
                except Exception as exc:
                    raise StoreError(
                        f"cannot open SQLite database {self.path}: {one_line(exc)}") from exc
                try:
                    await db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000:.0f}")
                    await _use_wal(db)
                    await db.execute("PRAGMA synchronous=NORMAL")
                    # The WAL checkpoint (it fsyncs) runs on the thread, every
                    # CHECKPOINT_EVERY group commits, not inside a commit on the loop.
                    await db.execute("PRAGMA wal_autocheckpoint=0")
                    async with _immediate(db) as tx:  # one migrator at a time
                        await migrate(tx, "sqlite", self._migrate_upto)
                except BaseException as exc:
                    # Close it, or its worker thread keeps the process from ever exiting.
                    await settled(db.close())
                    if _busy(exc):
                        raise StoreError(f"cannot use SQLite database {self.path}: another "
                                         f"connection kept it locked for {BUSY_TIMEOUT_S:g}s"
                                         ) from exc
                    if is_damage(exc):
                        raise damage_error(self.path, exc) from exc
                    if isinstance(exc, sqlite3.Error):
                        raise StoreError(f"cannot use SQLite database {self.path}: "
                                         f"{one_line(exc)} (is it a damaged or foreign "
                                         "file?)") from exc
                    raise
                self._db = db
                # Unclosed, its thread would keep the process alive after asyncio.run.
                close_at_loop_exit(self, self.aclose)
        return self._db

    @contextlib.asynccontextmanager
    async def _held(self) -> AsyncIterator[aiosqlite.Connection]:
        """The connection, for this coroutine alone (never inside another's transaction), and
        clean: after an operation ended by any error or cancel, whatever it left queued in
        aiosqlite's thread has run (a statement queued behind it has) and a transaction it
        left open is rolled back, before the next one starts. Without it, a cancel wedged
        the store: every later write failed with "cannot start a transaction within a
        transaction" until the process restarted (issue 30)."""
        db = await self._open()
        async with self._tx_lock:
            if self._dirty:
                await db.execute("SELECT 1")
                if db.in_transaction:
                    await _rollback(db)
                self._dirty = False
            try:
                yield db
            except BaseException:
                self._dirty = True
                raise

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[_Tx]:
        async with self._held() as db:
            async with _immediate(db) as tx:
                yield tx
            await self._wal_kept(db)

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        async with self._held() as db:
            return await _Tx(db).fetch(sql, *args)

    async def _commit(self, works: Sequence[Work]) -> None:
        """The group commit's writes (see :mod:`~thinkloop.store.groupcommit`), in order, in
        one transaction and one trip."""

        work = functools.partial(_commit_all, works)
        try:
            async with self._held() as db:
                if not _here(db._conn, work):
                    await _on_thread(db, work)
                await self._wal_kept(db)
        except (sqlite3.Error, OSError) as exc:
            # As the public methods' (store_errors): a write awaited without one of them
            # (add_step_records) gets the same one-line StoreError.
            raise StoreError(f"SQLite store failed: {one_line(exc)}") from exc

    async def _wal_kept(self, db: aiosqlite.Connection) -> None:
        """After a write: the WAL checkpointed every CHECKPOINT_EVERY writes, on the
        database thread (SQLite's own autocheckpoint is off: it ran inside a commit, and
        syncs, which on the loop's thread would stall every run)."""
        self._since_checkpoint += 1
        if self._since_checkpoint >= CHECKPOINT_EVERY:
            self._since_checkpoint = 0
            # Read to its end: a cursor left open keeps its statement in progress, and the
            # next COMMIT fails ("SQL statements in progress").
            await settled(db.execute_fetchall("PRAGMA wal_checkpoint(PASSIVE)"))

    async def _write(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Rows appended, committed with whatever else is queued (one trip for all)."""
        await self._write_many([(sql, rows)])

    async def _write_all(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """All the rows in one transaction (the group's), in one trip."""
        await self._write_many([(sql, rows)])

    async def _write_many(self, stmts: Sequence[tuple[str, Sequence[tuple[Any, ...]]]]
                          ) -> None:
        """Several statements' rows in one transaction (the group's), in one trip."""
        work = _statements(stmts)
        if work is not None:
            await self._writes.write(work)

    def add_step_records(self, run_id: str, checkpoint: tuple[str, bytes] | None,
                         events: Sequence[Event] | LoggedEvents,
                         spans: Sequence[SpanRecord | SpanRow]) -> Coroutine[Any, Any, None]:
        """A step's records in the group commit (see RunTables.add_step_records). Not a
        coroutine of its own: the run awaits the group commit's write itself, so a run
        waiting for its step's commit holds one coroutine there, not four (with 200 runs
        waiting at once, what they held alive was most of the collector's work, issue 38)."""
        if checkpoint is None and not events and not spans:
            return _nothing()
        kind, data = checkpoint if checkpoint is not None else (None, b"")
        # Objects' rows are made now (as RunTables' are); serialised ones as committed.
        logged = events if isinstance(events, LoggedEvents) else logged_rows(events)
        return self._writes.write(_StepRows(self._numbers, run_id, kind, data, time.time(),
                                            logged or None, spans))

    async def add_events(self, run_id: str, events: Sequence[Event] | LoggedEvents) -> None:
        if events:  # numbered as a step's are (RowNumbers)
            await self.add_step_records(run_id, None, events, ())

    async def add_checkpoint(self, run_id: str, kind: str, data: bytes) -> None:
        await self.add_step_records(run_id, (kind, data), (), ())

    def count_rows(self, run_id: str) -> None:
        """``run_id`` is live here and written by this store alone until :meth:`forget_rows`:
        its audit-log and checkpoint rows are numbered here (see :class:`RowNumbers`)."""
        self._numbers.runs.setdefault(run_id, [-1, -1])

    def forget_rows(self, run_id: str) -> None:
        self._numbers.runs.pop(run_id, None)

    def queue_checkpoint(self, run_id: str, kind: str, data: bytes) -> asyncio.Future[None]:
        """A checkpoint row queued, not waited for (see :meth:`GroupCommit.write_later`)."""
        return self._writes.write_later(
            _StepRows(self._numbers, run_id, kind, data, time.time(), None, ()))

    async def save_run(self, run: RunRecord) -> None:
        """The run's row and its session's usage, in one transaction (the group's)."""
        row = run_row(run)

        def work(conn: sqlite3.Connection) -> None:
            old = conn.execute(render(OLD_USAGE, SQLITE.mark), (run.id,)).fetchall()
            conn.execute(render(SAVE_RUN, SQLITE.mark), row)
            if run.session_id is not None:
                conn.execute(render(SESSION_USAGE, SQLITE.mark), session_usage(run, old))

        await self._writes.write(work)

    async def connect(self) -> None:
        """Open (and migrate) the database now: a damaged or locked file fails here, before
        anything runs on it, instead of at the first read."""
        await self._open()

    async def aclose(self) -> None:
        if self._keys is not None:
            self._keys.close()
        if self._db is not None:
            await self._writes.drained()
            db, self._db = self._db, None
            forget_at_loop_exit(self)
            await db.close()

    @contextlib.asynccontextmanager
    async def lock(self, session_id: str) -> AsyncIterator[None]:
        async with self._local.hold(session_id):
            if self.lock_dir is None:
                yield
                return
            async with file_lock(lock_path(self.lock_dir, session_id)):
                yield

    @contextlib.asynccontextmanager
    async def try_lock(self, key: str) -> AsyncIterator[bool]:
        """A lock across processes that is never waited for: yields whether it was taken."""
        if self._keys is None:
            yield True
            return
        with self._keys.hold(key) as taken:
            yield taken
