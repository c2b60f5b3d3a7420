"""One SQLite file, shared safely by every task of a process and every process on a host.

WAL lets readers run beside the single writer, ``busy_timeout`` makes a writer
wait its turn, and each unit of work is one statement or one ``BEGIN
IMMEDIATE`` transaction on aiosqlite's worker thread, so the event loop never
waits on the disk. The runtime's store and the chat layer's state keep their
tables in the same file through one of these, shared (``share``): one
connection per file and process.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

T = TypeVar("T")

URL_PREFIX = "sqlite:///"
# Long enough to ride out another process's write transaction or a WAL checkpoint,
# short enough that a wedged writer surfaces as an error instead of a hung bot.
BUSY_TIMEOUT_MS = 5_000

Work = Callable[[aiosqlite.Connection], Awaitable[T]]
Migrate = Callable[[aiosqlite.Connection], Awaitable[None]]
"""Creates or checks the tables, inside a write transaction, when the file is opened."""


def database_path(url: str) -> str:
    """The file path in a ``sqlite:///`` URL (three slashes: relative, four: absolute)."""
    if not url.startswith(URL_PREFIX):
        raise ValueError(f"not an SQLite URL: {url!r} (use sqlite:///path.db)")
    path = url[len(URL_PREFIX) :].split("?", 1)[0]
    if not path:
        raise ValueError(f"SQLite URL without a path: {url!r}")
    return path


Outcome = tuple[Any, Exception | None]


class GroupCommit:
    """Units of work that arrive together share one transaction, and so one fsync.

    Each commit waits for the disk (``synchronous = FULL``). A burst of small
    writes (a bot's inbox under load) would wait for one fsync each, in a row;
    instead, the ones that arrive while a transaction runs go together in the
    next. Each keeps its own outcome (a savepoint each), in arrival order, so a
    write sees the ones before it in the same batch.
    """

    def __init__(self, file: SQLiteFile) -> None:
        self._file = file
        self._waiting: list[tuple[Work[Any], asyncio.Future[Any]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def run(self, work: Work[T]) -> T:
        """Run ``work`` in the next shared transaction; its own result or exception."""
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._waiting.append((work, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write(), name="sqlite-group-commit")
            self._writer.add_done_callback(self._abandon)
        return await asyncio.shield(done)

    def _abandon(self, writer: asyncio.Task[None]) -> None:
        """The writer never leaves a caller waiting, whatever ended it (even before it ran)."""
        if writer is not self._writer:
            return  # a newer writer has the queue now
        gone = RuntimeError("the group-commit writer stopped")
        waiting, self._waiting = self._waiting, []
        for _, done in waiting:
            if not done.done():
                done.set_exception(gone)

    async def _write(self) -> None:
        while self._waiting:
            batch = list(self._waiting)  # stays waiting (for _abandon) until resolved
            writes = [work for work, _ in batch]

            async def each(
                db: aiosqlite.Connection, writes: list[Work[Any]] = writes
            ) -> list[Outcome]:
                outcomes: list[Outcome] = []
                for work in writes:
                    await db.execute("SAVEPOINT grouped")
                    try:
                        outcomes.append((await work(db), None))
                    except Exception as exc:
                        if not db.in_transaction:
                            raise  # SQLite rolled it all back (disk full...): the batch fails
                        await db.execute("ROLLBACK TO grouped")
                        outcomes.append((None, exc))
                    await db.execute("RELEASE grouped")
                return outcomes

            try:
                outcomes = await self._file.run(each, transaction=True)
            except Exception as exc:  # the commit itself: every write of the batch failed
                outcomes = [(None, exc)] * len(batch)
            self._waiting = self._waiting[len(batch) :]
            for (_, done), (result, error) in zip(batch, outcomes, strict=True):
                if done.done():
                    continue
                if error is not None:
                    done.set_exception(error)
                else:
                    done.set_result(result)


class SQLiteFile:
    """A lazily opened connection to one file, with serialized units of work."""

    def __init__(self, url: str, migrate: Migrate) -> None:
        self.path = database_path(url)
        self._migrate = migrate
        self._db: aiosqlite.Connection | None = None
        self._opening = asyncio.Lock()
        # One connection: statements of concurrent tasks must not land in each
        # other's transactions, so each unit of work holds this mutex.
        self._mutex = asyncio.Lock()
        self._shared: list[Migrate] = []
        self._commits = GroupCommit(self)
        self._unapplied: list[Migrate] = []

    def share(self, migrate: Migrate) -> SQLiteFile:
        """This file for another user of it, whose tables ``migrate`` creates.

        One connection per file and process: its writers then queue in this
        process instead of contending for SQLite's file lock (which waits by
        sleeping). ``migrate`` runs, in a transaction, before the next unit of work.
        """
        self._shared.append(migrate)
        if self._db is not None:  # open already: before the next unit of work
            self._unapplied.append(migrate)
        return self

    async def run(self, work: Work[T], *, transaction: bool = False) -> T:
        """Run ``work(db)`` alone on the connection, as a transaction if asked."""
        # Shielded: a caller cancelled mid-way must not leave half a transaction open
        # on the shared connection, so the unit of work always runs to its end.
        return await asyncio.shield(self._serialized(work, transaction))

    async def grouped(self, work: Work[T]) -> T:
        """Run ``work`` as its own savepoint in a transaction shared with the units of
        work that arrive meanwhile (``GroupCommit``): one fsync for a burst."""
        return await self._commits.run(work)

    async def fetch(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """The rows of one query."""

        async def work(db: aiosqlite.Connection) -> list[Any]:
            return list(await db.execute_fetchall(sql, params))

        return await self.run(work)

    async def changes(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> int:
        """Run one statement; how many rows it changed."""
        return await self.run(lambda db: changes(db, sql, params))

    async def ping(self) -> bool:
        """Whether the file opens and answers a query."""
        try:
            await self.fetch("SELECT 1", ())
        except (sqlite3.Error, OSError, ValueError):
            return False
        return True

    async def close(self) -> None:
        """Close the connection (and its worker thread); the next call reopens it."""
        async with self._opening:
            db, self._db = self._db, None
            if db is not None:
                async with self._mutex:
                    await db.close()

    async def _serialized(self, work: Work[T], transaction: bool) -> T:
        db = await self._connection()
        async with self._mutex:
            while self._unapplied:
                async with transaction_on(db, enabled=True):
                    await self._unapplied[0](db)
                self._unapplied.pop(0)
            async with transaction_on(db, enabled=transaction):
                return await work(db)

    async def _connection(self) -> aiosqlite.Connection:
        if self._db is None:
            async with self._opening:
                if self._db is None:
                    self._db = await self._open()
        return self._db

    async def _open(self) -> aiosqlite.Connection:
        if self.path != ":memory:":
            await asyncio.to_thread(Path(self.path).parent.mkdir, parents=True, exist_ok=True)
        # isolation_level=None: no implicit transactions; we issue BEGIN IMMEDIATE.
        db = await aiosqlite.connect(self.path, isolation_level=None)
        try:
            await db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            await _into_wal(db)
            # FULL: a decision that was reported as saved survives a power cut, which
            # at-most-once execution of non-idempotent tools depends on.
            await db.execute("PRAGMA synchronous = FULL")
            async with transaction_on(db, enabled=True):
                await self._migrate(db)
                for migrate in self._shared:  # every user's tables, on every (re)open
                    await migrate(db)
            self._unapplied = []
        except BaseException:
            await db.close()
            raise
        return db


async def _into_wal(db: aiosqlite.Connection) -> None:
    """``PRAGMA journal_mode = WAL``, tried again for up to ``BUSY_TIMEOUT_MS``: while
    another connection switches a new file too, SQLite may refuse at once ("database is
    locked") rather than wait out ``busy_timeout`` (a replica starting beside another)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            await db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.01)


@asynccontextmanager
async def transaction_on(db: aiosqlite.Connection, *, enabled: bool) -> AsyncIterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any error), when enabled."""
    if not enabled:
        yield
        return
    # IMMEDIATE takes the write lock up front: a deferred transaction that reads
    # then writes can fail with SQLITE_BUSY where waiting would have succeeded.
    await db.execute("BEGIN IMMEDIATE")
    try:
        yield
        await db.commit()
    except BaseException:
        # Also after a failed COMMIT: the connection must leave the transaction.
        await db.rollback()
        raise


async def changes(
    db: aiosqlite.Connection, sql: str, params: Sequence[Any] | dict[str, Any]
) -> int:
    """Run one statement on ``db``; how many rows it changed."""
    async with db.execute(sql, params) as cursor:
        return cursor.rowcount
