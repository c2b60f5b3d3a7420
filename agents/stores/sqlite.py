"""The embedded durable store (``sqlite:///relative.db`` or ``sqlite:////abs/path.db``).

One database file, shared safely by every process on the host: WAL lets readers
run beside the single writer, ``busy_timeout`` makes a writer wait its turn, and
each operation is one statement or one ``BEGIN IMMEDIATE`` transaction. Queries
run on aiosqlite's worker thread, so the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from ..messages import Message
from ..snapshot import AUDIT_ADAPTER, AuditEntry, RunSnapshot, dump_snapshot, load_snapshot, utcnow
from ._lease import hold_lease
from .base import StoreConflict

T = TypeVar("T")

URL_PREFIX = "sqlite:///"
SCHEMA_VERSION = 1
# Long enough to ride out another process's write transaction or a WAL checkpoint,
# short enough that a wedged writer surfaces as an error instead of a hung bot.
BUSY_TIMEOUT_MS = 5_000
# Expired dedupe keys are harmless but would grow the file forever; one sweep a
# minute per process keeps them bounded without a statement on every call.
SEEN_SWEEP_INTERVAL = 60.0

_SCHEMA = (
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        revision INTEGER NOT NULL,
        thread_id TEXT,
        status TEXT NOT NULL,
        is_root INTEGER NOT NULL,
        next_expiry REAL,
        in_flight INTEGER NOT NULL,
        created_at REAL NOT NULL,
        snapshot TEXT NOT NULL
    )""",
    # Partial indexes: only root runs a person or the recovery sweep cares about.
    """CREATE INDEX runs_paused_by_thread ON runs (thread_id, created_at)
        WHERE is_root = 1 AND status = 'paused'""",
    """CREATE INDEX runs_paused_by_expiry ON runs (next_expiry)
        WHERE is_root = 1 AND status = 'paused'""",
    "CREATE INDEX runs_in_flight ON runs (created_at) WHERE is_root = 1 AND in_flight = 1",
    """CREATE TABLE history (
        seq INTEGER PRIMARY KEY,
        thread_id TEXT NOT NULL,
        message TEXT NOT NULL
    )""",
    "CREATE INDEX history_by_thread ON history (thread_id, seq)",
    "CREATE TABLE seen (key TEXT PRIMARY KEY, expires_at REAL NOT NULL)",
    "CREATE INDEX seen_by_expiry ON seen (expires_at)",
    "CREATE TABLE thread_refs (thread_id TEXT PRIMARY KEY, reference TEXT NOT NULL)",
    """CREATE TABLE audit (
        seq INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        thread_id TEXT,
        entry TEXT NOT NULL
    )""",
    "CREATE INDEX audit_by_run ON audit (run_id, seq)",
    "CREATE INDEX audit_by_thread ON audit (thread_id, seq)",
    # The audit log is evidence: the database itself refuses to rewrite it.
    """CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
    """CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
    "CREATE TABLE locks (name TEXT PRIMARY KEY, token TEXT NOT NULL, expires_at REAL NOT NULL)",
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)

_RUN_COLUMNS = (
    "run_id, revision, thread_id, status, is_root, next_expiry, in_flight, created_at, snapshot"
)
_INSERT_RUN = f"""INSERT INTO runs ({_RUN_COLUMNS})
    VALUES (:run_id, :revision, :thread_id, :status, :is_root, :next_expiry, :in_flight,
            :created_at, :snapshot)
    ON CONFLICT (run_id) DO NOTHING"""
_UPDATE_RUN = """UPDATE runs SET revision = :revision, thread_id = :thread_id,
        status = :status, is_root = :is_root, next_expiry = :next_expiry,
        in_flight = :in_flight, created_at = :created_at, snapshot = :snapshot
    WHERE run_id = :run_id AND revision = :expected"""
_TAKE_LOCK = """INSERT INTO locks (name, token, expires_at) VALUES (?, ?, ?)
    ON CONFLICT (name) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at
    WHERE locks.expires_at <= ?"""
_MARK_SEEN = """INSERT INTO seen (key, expires_at) VALUES (?, ?)
    ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at
    WHERE seen.expires_at <= ?"""
_TRIM_HISTORY = """DELETE FROM history WHERE thread_id = ? AND seq <= (
    SELECT seq FROM history WHERE thread_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)"""

Work = Callable[[aiosqlite.Connection], Awaitable[T]]


def database_path(url: str) -> str:
    """The file path in a ``sqlite:///`` URL (three slashes: relative, four: absolute)."""
    if not url.startswith(URL_PREFIX):
        raise ValueError(f"not an SQLite URL: {url!r} (use sqlite:///path.db)")
    path = url[len(URL_PREFIX) :].split("?", 1)[0]
    if not path:
        raise ValueError(f"SQLite URL without a path: {url!r}")
    return path


class SQLiteStore:
    """The store protocol over one SQLite file, safe across processes on one host."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._path = database_path(url)
        self._db: aiosqlite.Connection | None = None
        self._opening = asyncio.Lock()
        # One connection per store: statements of concurrent tasks must not land in
        # each other's transactions, so each unit of work holds this mutex.
        self._mutex = asyncio.Lock()
        self._next_seen_sweep = 0.0

    async def load_run(self, run_id: str) -> RunSnapshot | None:
        """The snapshot of a run, or ``None``."""
        rows = await self._fetch("SELECT snapshot FROM runs WHERE run_id = ?", (run_id,))
        return load_snapshot(rows[0][0]) if rows else None

    async def save_run(self, snapshot: RunSnapshot) -> RunSnapshot:
        """Compare-and-set on ``revision``, one SQL statement; see ``Store.save_run``."""
        saved = snapshot.model_copy(
            deep=True, update={"revision": snapshot.revision + 1, "updated_at": utcnow()}
        )
        params = _run_params(saved, expected=snapshot.revision)

        async def work(db: aiosqlite.Connection) -> tuple[bool, int | None]:
            sql = _INSERT_RUN if snapshot.revision == 0 else _UPDATE_RUN
            if await _changes(db, sql, params) == 1:
                return True, snapshot.revision
            # Only for the error message; the decision was made by the statement above.
            rows = await db.execute_fetchall(
                "SELECT revision FROM runs WHERE run_id = ?", (snapshot.run_id,)
            )
            return False, next((int(row[0]) for row in rows), None)

        done, actual = await self._run(work)
        if not done:
            raise StoreConflict(snapshot.run_id, snapshot.revision, actual)
        return saved

    def lock(self, name: str, *, ttl: float = 30.0) -> AbstractAsyncContextManager[None]:
        """A lease row in the ``locks`` table, taken when free or expired."""

        async def take(token: str) -> bool:
            now = time.time()
            params = (name, token, now + ttl, now)
            return await self._run(lambda db: _changes(db, _TAKE_LOCK, params)) == 1

        async def give_back(token: str) -> None:
            sql = "DELETE FROM locks WHERE name = ? AND token = ?"
            await self._run(lambda db: _changes(db, sql, (name, token)))

        return hold_lease(name, ttl, take=take, give_back=give_back)

    async def paused_runs(self, thread_id: str) -> list[str]:
        """Root runs of the thread waiting for a person, oldest first."""
        rows = await self._fetch(
            """SELECT run_id FROM runs WHERE is_root = 1 AND status = 'paused'
                AND thread_id = ? ORDER BY created_at, rowid""",
            (thread_id,),
        )
        return [row[0] for row in rows]

    async def runs_expiring(self, before: datetime) -> list[str]:
        """Root paused runs with a waiting call expiring before ``before``, soonest first."""
        rows = await self._fetch(
            """SELECT run_id FROM runs WHERE is_root = 1 AND status = 'paused'
                AND next_expiry < ? ORDER BY next_expiry, rowid""",
            (before.timestamp(),),
        )
        return [row[0] for row in rows]

    async def runs_in_flight(self) -> list[str]:
        """Root runs with a claimed call whose outcome was never recorded, oldest first."""
        rows = await self._fetch(
            """SELECT run_id FROM runs WHERE is_root = 1 AND in_flight = 1
                ORDER BY created_at, rowid""",
            (),
        )
        return [row[0] for row in rows]

    async def load_history(self, thread_id: str) -> list[Message]:
        """The thread's remembered conversation, oldest first."""
        rows = await self._fetch(
            "SELECT message FROM history WHERE thread_id = ? ORDER BY seq", (thread_id,)
        )
        return [Message.model_validate_json(row[0]) for row in rows]

    async def append_history(
        self, thread_id: str, messages: Sequence[Message], *, window: int
    ) -> None:
        """Append and trim to ``window`` in one transaction."""
        rows = [(thread_id, m.model_dump_json()) for m in messages]

        async def work(db: aiosqlite.Connection) -> None:
            await db.executemany("INSERT INTO history (thread_id, message) VALUES (?, ?)", rows)
            if window > 0:
                await _changes(db, _TRIM_HISTORY, (thread_id, thread_id, window))
            else:
                await _changes(db, "DELETE FROM history WHERE thread_id = ?", (thread_id,))

        await self._run(work, transaction=True)

    async def seen_before(self, key: str, *, ttl: float) -> bool:
        """Set-if-absent-or-expired in one statement."""
        now = time.time()
        sweep = now >= self._next_seen_sweep
        if sweep:
            self._next_seen_sweep = now + SEEN_SWEEP_INTERVAL

        async def work(db: aiosqlite.Connection) -> int:
            if sweep:
                await _changes(db, "DELETE FROM seen WHERE expires_at <= ?", (now,))
            return await _changes(db, _MARK_SEEN, (key, now + ttl, now))

        return await self._run(work) == 0

    async def put_reference(self, thread_id: str, reference: dict[str, Any]) -> None:
        """Keep (or replace) the thread's opaque JSON reference."""
        sql = """INSERT INTO thread_refs (thread_id, reference) VALUES (?, ?)
            ON CONFLICT (thread_id) DO UPDATE SET reference = excluded.reference"""
        params = (thread_id, json.dumps(reference, ensure_ascii=False))
        await self._run(lambda db: _changes(db, sql, params))

    async def get_reference(self, thread_id: str) -> dict[str, Any] | None:
        """The stored reference of a thread, or ``None``."""
        rows = await self._fetch(
            "SELECT reference FROM thread_refs WHERE thread_id = ?", (thread_id,)
        )
        return _json_object(rows[0][0]) if rows else None

    async def append_audit(self, entry: AuditEntry) -> None:
        """Append one entry; triggers forbid changing it afterwards."""
        sql = "INSERT INTO audit (run_id, thread_id, entry) VALUES (?, ?, ?)"
        params = (entry.run_id, entry.thread_id, entry.model_dump_json())
        await self._run(lambda db: _changes(db, sql, params))

    async def list_audit(
        self, *, run_id: str | None = None, thread_id: str | None = None
    ) -> list[AuditEntry]:
        """Audit entries of a run and/or a thread (all when neither), oldest first."""
        where = ["1 = 1"]
        params: list[str] = []
        if run_id is not None:
            where.append("run_id = ?")
            params.append(run_id)
        if thread_id is not None:
            where.append("thread_id = ?")
            params.append(thread_id)
        rows = await self._fetch(
            f"SELECT entry FROM audit WHERE {' AND '.join(where)} ORDER BY seq", params
        )
        return [AUDIT_ADAPTER.validate_json(row[0]) for row in rows]

    async def ping(self) -> bool:
        """Whether the database file opens and answers a query."""
        try:
            await self._fetch("SELECT 1", ())
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

    async def _fetch(self, sql: str, params: Sequence[Any]) -> list[Any]:
        async def work(db: aiosqlite.Connection) -> list[Any]:
            return list(await db.execute_fetchall(sql, params))

        return await self._run(work)

    async def _run(self, work: Work[T], *, transaction: bool = False) -> T:
        # Shielded: a caller cancelled mid-way must not leave half a transaction open
        # on the shared connection, so the unit of work always runs to its end.
        return await asyncio.shield(self._serialized(work, transaction))

    async def _serialized(self, work: Work[T], transaction: bool) -> T:
        db = await self._connection()
        async with self._mutex, self._transaction(db, enabled=transaction):
            return await work(db)

    @asynccontextmanager
    async def _transaction(self, db: aiosqlite.Connection, *, enabled: bool) -> AsyncIterator[None]:
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

    async def _connection(self) -> aiosqlite.Connection:
        if self._db is None:
            async with self._opening:
                if self._db is None:
                    self._db = await self._open()
        return self._db

    async def _open(self) -> aiosqlite.Connection:
        if self._path != ":memory:":
            await asyncio.to_thread(Path(self._path).parent.mkdir, parents=True, exist_ok=True)
        # isolation_level=None: no implicit transactions; we issue BEGIN IMMEDIATE.
        db = await aiosqlite.connect(self._path, isolation_level=None)
        try:
            await db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            await db.execute("PRAGMA journal_mode = WAL")
            # FULL: a decision that was reported as saved survives a power cut, which
            # at-most-once execution of non-idempotent tools depends on.
            await db.execute("PRAGMA synchronous = FULL")
            await self._migrate(db)
        except BaseException:
            await db.close()
            raise
        return db

    async def _migrate(self, db: aiosqlite.Connection) -> None:
        async with self._transaction(db, enabled=True):
            rows = list(await db.execute_fetchall("PRAGMA user_version"))
            version = int(rows[0][0])
            if version == 0:
                for statement in _SCHEMA:
                    await db.execute(statement)
            elif version != SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self._path}: schema version {version}, this code knows {SCHEMA_VERSION}"
                )


async def _changes(
    db: aiosqlite.Connection, sql: str, params: Sequence[Any] | dict[str, Any]
) -> int:
    async with db.execute(sql, params) as cursor:
        return cursor.rowcount


def _run_params(saved: RunSnapshot, *, expected: int) -> dict[str, Any]:
    expiry = saved.next_expiry()
    return {
        "run_id": saved.run_id,
        "revision": saved.revision,
        "expected": expected,
        "thread_id": saved.thread_id,
        "status": saved.status,
        "is_root": int(saved.is_root),
        "next_expiry": expiry.timestamp() if expiry is not None else None,
        "in_flight": int(saved.in_flight),
        "created_at": saved.created_at.timestamp(),
        "snapshot": dump_snapshot(saved),
    }


def _json_object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"stored reference is not a JSON object: {text[:80]!r}")
    return value
