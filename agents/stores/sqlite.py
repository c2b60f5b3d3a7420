"""The embedded durable store (``sqlite:///relative.db`` or ``sqlite:////abs/path.db``).

One database file, shared safely by every process on the host (see
``sqlite_file``). The chat layer keeps its own tables in the same file.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from itertools import chain, takewhile
from typing import Any

import aiosqlite

from ..chain import (
    CHECKPOINT,
    GENESIS,
    AuditAnchor,
    AuditChain,
    Link,
    Seal,
    anchor,
    anchor_of,
    checkpoint,
    head_of,
    link,
)
from ..messages import Message
from ..snapshot import (
    AUDIT_ADAPTER,
    AuditEntry,
    RunSnapshot,
    load_snapshot,
    next_revision,
    run_index,
)
from ._lease import hold_lease
from .base import (
    AUDIT_PRUNE_BATCH,
    AUDIT_READ_BATCH,
    PRUNE_BATCH,
    Pruned,
    Remember,
    SavesInOne,
    StoreConflict,
    check_audit,
)
from .sqlite_file import SQLiteFile, changes, database_path

__all__ = ["SQLiteStore", "database_path"]

SCHEMA_VERSION = 8
"""2: ``runs.paused`` and the other index columns written from ``run_index`` alone.
3: ``runs.alive_until``, the heartbeat of the process driving a run.
4: ``runs_live_by_thread``, a thread's root runs that wait or work (``thread_runs``).
5: ``runs.updated_at`` and ``runs.root_run_id``, so finished runs are pruned (``prune``).
6: ``audit_horizon``, so the start of the audit log is pruned (``prune_audit``).
7: the horizon keeps the chain's anchor (``agents.chain``): the last entry removed.
8: ``audit_head``, the chain's head kept apart (moved by a trigger as each entry goes
in), so entries cut from the end are found as on the other stores."""
_CURRENT = f"PRAGMA user_version = {SCHEMA_VERSION}"

# Partial indexes: only the runs a person or the recovery sweep cares about.
_LIVE = "(paused = 1 OR in_flight = 1)"
"""A root run that waits or works; queries repeat it exactly, so SQLite uses the index."""
_LIVE_INDEX = f"CREATE INDEX runs_live_by_thread ON runs (thread_id, created_at) WHERE {_LIVE}"
_DONE = "(is_root = 1 AND paused = 0 AND in_flight = 0)"
"""A finished root run (neither waits nor works): what ``prune`` may remove, once old."""
_PRUNE_INDEXES = (
    f"CREATE INDEX runs_done_by_change ON runs (updated_at) WHERE {_DONE}",
    "CREATE INDEX runs_by_root ON runs (root_run_id)",
    "CREATE INDEX runs_roots_by_thread ON runs (thread_id) WHERE is_root = 1",
)
_RUN_INDEXES = (
    "CREATE INDEX runs_paused_by_thread ON runs (thread_id, created_at) WHERE paused = 1",
    "CREATE INDEX runs_paused_by_expiry ON runs (next_expiry) WHERE paused = 1",
    "CREATE INDEX runs_in_flight ON runs (created_at) WHERE in_flight = 1",
)
# What a prune leaves of the chain it shortened (``agents.chain.AuditAnchor``): none
# while ``hash`` is null.
_ANCHOR = (
    "ALTER TABLE audit_horizon ADD COLUMN hash TEXT",
    "ALTER TABLE audit_horizon ADD COLUMN removed INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE audit_horizon ADD COLUMN signature TEXT",
)
# The audit log only ever loses its start (``prune_audit``): ``audit_horizon`` holds the
# last ``seq`` removed, in one row that only grows, and the audit table refuses to
# delete a row above it, to append one at or below it, or to replace one.
_AUDIT_HORIZON = (
    """CREATE TABLE audit_horizon (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        seq INTEGER NOT NULL
    )""",
    "INSERT INTO audit_horizon (id, seq) VALUES (1, 0)",
    """CREATE TRIGGER audit_horizon_one_row BEFORE INSERT ON audit_horizon
        BEGIN SELECT RAISE(ABORT, 'the audit horizon is one row'); END""",
    """CREATE TRIGGER audit_horizon_only_grows BEFORE UPDATE ON audit_horizon
        WHEN NEW.seq < OLD.seq OR NEW.id IS NOT OLD.id
        BEGIN SELECT RAISE(ABORT, 'the audit horizon only moves forward'); END""",
    """CREATE TRIGGER audit_horizon_kept BEFORE DELETE ON audit_horizon
        BEGIN SELECT RAISE(ABORT, 'the audit horizon is kept'); END""",
    """CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
        WHEN OLD.seq > (SELECT seq FROM audit_horizon)
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
    # INSERT OR REPLACE would delete the row it replaces without the trigger above.
    """CREATE TRIGGER audit_no_replace BEFORE INSERT ON audit
        WHEN EXISTS (SELECT 1 FROM audit WHERE seq = NEW.seq)
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
    """CREATE TRIGGER audit_after_horizon AFTER INSERT ON audit
        WHEN NEW.seq <= (SELECT seq FROM audit_horizon)
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
)
# The chain's head, kept apart from the entries: a trigger moves it with each insert,
# in the same statement, and it never goes back. Entries cut from the end (the
# triggers dropped) leave it ahead of the last entry: ``audit verify`` says so.
_AUDIT_HEAD = (
    """CREATE TABLE audit_head (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        seq INTEGER NOT NULL,
        hash TEXT
    )""",
    """INSERT INTO audit_head (id, seq, hash)
        SELECT 1, seq, json_extract(entry, '$.hash') FROM audit
            WHERE seq = (SELECT max(seq) FROM audit)
        UNION ALL SELECT 1, seq, hash FROM audit_horizon
        ORDER BY 2 DESC LIMIT 1""",
    """CREATE TRIGGER audit_head_one_row BEFORE INSERT ON audit_head
        BEGIN SELECT RAISE(ABORT, 'the audit head is one row'); END""",
    """CREATE TRIGGER audit_head_only_grows BEFORE UPDATE ON audit_head
        WHEN NEW.seq <= OLD.seq OR NEW.id IS NOT OLD.id
        BEGIN SELECT RAISE(ABORT, 'the audit head only moves forward'); END""",
    """CREATE TRIGGER audit_head_kept BEFORE DELETE ON audit_head
        BEGIN SELECT RAISE(ABORT, 'the audit head is kept'); END""",
    """CREATE TRIGGER audit_moves_head AFTER INSERT ON audit
        BEGIN
            UPDATE audit_head SET seq = NEW.seq, hash = json_extract(NEW.entry, '$.hash');
        END""",
)
_SCHEMA = (
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        revision INTEGER NOT NULL,
        thread_id TEXT,
        status TEXT NOT NULL,
        is_root INTEGER NOT NULL,
        paused INTEGER NOT NULL DEFAULT 0,
        next_expiry REAL,
        in_flight INTEGER NOT NULL,
        created_at REAL NOT NULL,
        snapshot TEXT NOT NULL,
        alive_until REAL,
        updated_at REAL,
        root_run_id TEXT
    )""",
    *_RUN_INDEXES,
    _LIVE_INDEX,
    *_PRUNE_INDEXES,
    """CREATE TABLE history (
        seq INTEGER PRIMARY KEY,
        thread_id TEXT NOT NULL,
        message TEXT NOT NULL
    )""",
    "CREATE INDEX history_by_thread ON history (thread_id, seq)",
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
    *_AUDIT_HORIZON,
    *_ANCHOR,
    *_AUDIT_HEAD,
    "CREATE TABLE locks (name TEXT PRIMARY KEY, token TEXT NOT NULL, expires_at REAL NOT NULL)",
    _CURRENT,
)
# Version 1 computed "paused" in its queries; version 2 stores what run_index says.
_FROM_VERSION_1 = (
    "ALTER TABLE runs ADD COLUMN paused INTEGER NOT NULL DEFAULT 0",
    "UPDATE runs SET paused = (is_root = 1 AND status = 'paused')",
    "UPDATE runs SET next_expiry = NULL WHERE paused = 0",
    "UPDATE runs SET in_flight = (is_root = 1 AND in_flight = 1)",
    "DROP INDEX IF EXISTS runs_paused_by_thread",
    "DROP INDEX IF EXISTS runs_paused_by_expiry",
    "DROP INDEX IF EXISTS runs_in_flight",
    *_RUN_INDEXES,
)
# Version 3 keeps heartbeats beside the snapshot, so a beat never touches it.
_FROM_VERSION_2 = ("ALTER TABLE runs ADD COLUMN alive_until REAL",)
# Version 4 finds a thread's live runs through an index of their own.
_FROM_VERSION_3 = (_LIVE_INDEX,)
# Version 5 keeps each run's last change and root beside it, so old finished trees
# are found and removed through indexes; older rows take them from their snapshot.
_FROM_VERSION_4 = (
    "ALTER TABLE runs ADD COLUMN updated_at REAL",
    "ALTER TABLE runs ADD COLUMN root_run_id TEXT",
    """UPDATE runs SET
        updated_at = (julianday(json_extract(snapshot, '$.updated_at')) - 2440587.5) * 86400.0,
        root_run_id = coalesce(json_extract(snapshot, '$.root_run_id'), run_id)""",
    *_PRUNE_INDEXES,
)
# Version 6 lets the audit log lose its start, and nothing else of it.
_FROM_VERSION_5 = ("DROP TRIGGER audit_no_delete", *_AUDIT_HORIZON)
# Version 7 chains the audit log: a prune keeps the anchor of what it removed.
_FROM_VERSION_6 = (*_ANCHOR, f"UPDATE audit_horizon SET hash = '{GENESIS}' WHERE seq > 0")
# Version 8 keeps the chain's head apart, as the other stores do.
_FROM_VERSION_7 = _AUDIT_HEAD
_MIGRATIONS = (
    _FROM_VERSION_1,
    _FROM_VERSION_2,
    _FROM_VERSION_3,
    _FROM_VERSION_4,
    _FROM_VERSION_5,
    _FROM_VERSION_6,
    _FROM_VERSION_7,
)
"""From version ``i``, the steps of ``_MIGRATIONS[i - 1:]`` in order."""

_RUN_COLUMNS = (
    "run_id, revision, thread_id, status, is_root, paused, next_expiry, in_flight, created_at,"
    " snapshot, updated_at, root_run_id"
)
_INSERT_RUN = f"""INSERT INTO runs ({_RUN_COLUMNS})
    VALUES (:run_id, :revision, :thread_id, :status, :is_root, :paused, :next_expiry,
            :in_flight, :created_at, :snapshot, :updated_at, :root_run_id)
    ON CONFLICT (run_id) DO NOTHING"""
_UPDATE_RUN = """UPDATE runs SET revision = :revision, thread_id = :thread_id,
        status = :status, is_root = :is_root, paused = :paused, next_expiry = :next_expiry,
        in_flight = :in_flight, created_at = :created_at, snapshot = :snapshot,
        updated_at = :updated_at, root_run_id = :root_run_id
    WHERE run_id = :run_id AND revision = :expected"""
_TAKE_LOCK = """INSERT INTO locks (name, token, expires_at) VALUES (?, ?, ?)
    ON CONFLICT (name) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at
    WHERE locks.expires_at <= ?"""
# Queries repeat ``_DONE`` exactly, so SQLite uses its partial index.
_DUE_ROOTS = f"""SELECT run_id, thread_id FROM runs WHERE {_DONE} AND updated_at < ?
    ORDER BY updated_at, rowid LIMIT ?"""
_THREAD_ROOTS = "SELECT 1 FROM runs WHERE thread_id = ? AND is_root = 1"
_TRIM_HISTORY = """DELETE FROM history WHERE thread_id = ? AND seq <= (
    SELECT seq FROM history WHERE thread_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)"""


_LOAD_HISTORY = "SELECT message FROM history WHERE thread_id = ? ORDER BY seq"


async def _append_history(
    db: aiosqlite.Connection, thread_id: str, messages: Sequence[Message], window: int
) -> None:
    """Append to a thread's history and keep its newest ``window`` (inside a transaction)."""
    rows = [(thread_id, m.model_dump_json()) for m in messages]
    await db.executemany("INSERT INTO history (thread_id, message) VALUES (?, ?)", rows)
    if window > 0:
        await changes(db, _TRIM_HISTORY, (thread_id, thread_id, window))
    else:
        await changes(db, "DELETE FROM history WHERE thread_id = ?", (thread_id,))


class SQLiteStore(SavesInOne):
    """The store protocol over one SQLite file, safe across processes on one host."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.file = SQLiteFile(url, self._migrate)
        """The file's one connection in this process (the chat state shares it)."""
        self._file = self.file
        self._run = self._file.run
        self._fetch = self._file.fetch

    async def load_run(self, run_id: str) -> RunSnapshot | None:
        """The snapshot of a run, or ``None``."""
        rows = await self._fetch("SELECT snapshot FROM runs WHERE run_id = ?", (run_id,))
        return load_snapshot(rows[0][0]) if rows else None

    async def _save(
        self,
        snapshots: Sequence[RunSnapshot],
        audit: Sequence[AuditEntry],
        *,
        remember: Remember | None = None,
        read_history: bool = False,
    ) -> tuple[list[RunSnapshot], list[Message]]:
        """One transaction: each run's compare-and-set (one statement), its audit entries
        and the history it remembers; rolled back at the first that fails."""
        check_audit(snapshots[0], audit)
        prepared = [(snapshot, *next_revision(snapshot)) for snapshot in snapshots]
        thread = snapshots[0].thread_id
        remembered = remember if thread is not None else None

        async def work(db: aiosqlite.Connection) -> list[Any]:
            for snapshot, saved, data in prepared:
                sql = _INSERT_RUN if snapshot.revision == 0 else _UPDATE_RUN
                params = _run_params(saved, data, expected=snapshot.revision)
                if await changes(db, sql, params) != 1:
                    # Only for the error message; the statement above decided.
                    rows = await db.execute_fetchall(
                        "SELECT revision FROM runs WHERE run_id = ?", (snapshot.run_id,)
                    )
                    actual = next((int(row[0]) for row in rows), None)
                    raise StoreConflict(snapshot.run_id, snapshot.revision, actual)
            if audit:
                await _append_audit(db, audit)
            if remembered is not None and thread is not None:
                await _append_history(db, thread, remembered.messages, remembered.window)
            if read_history and thread is not None:
                return list(await db.execute_fetchall(_LOAD_HISTORY, (thread,)))
            return []

        # A conflict raised in a transaction rolls back what came before it.
        many = len(prepared) > 1 or bool(audit) or remembered is not None
        rows = await self._run(work, transaction=many)
        history = [Message.model_validate_json(row[0]) for row in rows]
        return [saved for _, saved, _ in prepared], history

    def lock(
        self, name: str, *, ttl: float = 30.0, wait: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        """A lease row in the ``locks`` table, taken when free or expired."""

        async def take(token: str) -> bool:
            now = time.time()
            params = (name, token, now + ttl, now)
            return await self._run(lambda db: changes(db, _TAKE_LOCK, params)) == 1

        async def give_back(token: str) -> None:
            sql = "DELETE FROM locks WHERE name = ? AND token = ?"
            await self._run(lambda db: changes(db, sql, (name, token)))

        return hold_lease(name, ttl if wait is None else wait, take=take, give_back=give_back)

    async def beat(self, run_id: str, until: datetime) -> None:
        """Set the run's ``alive_until`` column (the snapshot and revision stay)."""
        sql = "UPDATE runs SET alive_until = ? WHERE run_id = ?"
        await self._run(lambda db: changes(db, sql, (until.timestamp(), run_id)))

    async def alive_until(self, run_id: str) -> datetime | None:
        """The run's ``alive_until`` column."""
        rows = await self._fetch("SELECT alive_until FROM runs WHERE run_id = ?", (run_id,))
        stamp = rows[0][0] if rows else None
        return datetime.fromtimestamp(stamp, UTC) if stamp is not None else None

    async def paused_runs(self, thread_id: str) -> list[str]:
        """Root runs of the thread paused for a person, oldest first."""
        rows = await self._fetch(
            """SELECT run_id FROM runs WHERE paused = 1 AND thread_id = ?
                ORDER BY created_at, rowid""",
            (thread_id,),
        )
        return [row[0] for row in rows]

    async def thread_runs(self, thread_id: str) -> list[str]:
        """Root runs of the thread that wait for a person or work, oldest first."""
        rows = await self._fetch(
            f"""SELECT run_id FROM runs WHERE {_LIVE} AND thread_id = ?
                ORDER BY created_at, rowid""",
            (thread_id,),
        )
        return [row[0] for row in rows]

    async def runs_expiring(self, before: datetime) -> list[str]:
        """Root paused runs with a pending call expiring before ``before``, soonest first."""
        rows = await self._fetch(
            """SELECT run_id FROM runs WHERE paused = 1 AND next_expiry < ?
                ORDER BY next_expiry, rowid""",
            (before.timestamp(),),
        )
        return [row[0] for row in rows]

    async def runs_in_flight(self) -> list[str]:
        """Root runs with a claimed call whose outcome was never recorded, oldest first."""
        rows = await self._fetch(
            "SELECT run_id FROM runs WHERE in_flight = 1 ORDER BY created_at, rowid",
            (),
        )
        return [row[0] for row in rows]

    async def load_history(self, thread_id: str) -> list[Message]:
        """The thread's remembered conversation, oldest first."""
        rows = await self._fetch(_LOAD_HISTORY, (thread_id,))
        return [Message.model_validate_json(row[0]) for row in rows]

    async def append_history(
        self, thread_id: str, messages: Sequence[Message], *, window: int
    ) -> None:
        """Append and trim to ``window`` in one transaction."""

        async def work(db: aiosqlite.Connection) -> None:
            await _append_history(db, thread_id, messages, window)

        await self._run(work, transaction=True)

    async def append_audit(self, entry: AuditEntry) -> None:
        """Append one entry to the chain; triggers forbid changing it afterwards."""
        await self._run(lambda db: _append_audit(db, [entry]), transaction=True)

    async def audit_chains(self) -> list[AuditChain]:
        """The one chain, as stored, with the anchor of the last prune and its head: one
        statement, so one snapshot of all, without holding writers up (WAL)."""
        rows = await self._fetch(_CHAIN, ())
        first, lines = rows[0], [str(row[5]) for row in rows[1:]]
        head_seq, head_hash = first[6:8]
        head = Link(seq=int(head_seq), hash=str(head_hash)) if head_seq and head_hash else None
        return [AuditChain(0, lines, anchor_of(first[1:5]), head)]

    async def read_audit(
        self, chain: int, after: int, *, limit: int = AUDIT_READ_BATCH
    ) -> list[str]:
        """The lines above ``after``, by the table's ``seq`` (the chain's, since version 7)."""
        if chain != 0:
            return []
        sql = "SELECT entry FROM audit WHERE seq > ? ORDER BY seq LIMIT ?"
        return [str(row[0]) for row in await self._fetch(sql, (after, limit))]

    async def seal_audit(self, seal: Seal) -> int:
        """A signed checkpoint after the chain's head, unless the head is one."""

        async def work(db: aiosqlite.Connection) -> int:
            head, event = await _chain_head(db)
            if head.seq == 0 or event == CHECKPOINT:
                return 0
            await _append_audit(db, [checkpoint(head, 0, seal)], head)
            return 1

        return await self._run(work, transaction=True)

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

    async def prunable(self, before: datetime, *, limit: int = PRUNE_BATCH) -> Pruned:
        """The oldest due roots, their trees and the threads left with no other root
        run; see ``Store.prunable``. Read without a transaction: ``prune`` checks again."""

        async def work(db: aiosqlite.Connection) -> Pruned:
            due = list(await db.execute_fetchall(_DUE_ROOTS, (before.timestamp(), limit)))
            if not due:
                return Pruned(before=before)
            roots = [str(row[0]) for row in due]
            marks = ",".join("?" * len(roots))
            trees = await db.execute_fetchall(
                f"SELECT run_id FROM runs WHERE root_run_id IN ({marks})", roots
            )
            alone: list[str] = []
            for thread_id in sorted({str(row[1]) for row in due if row[1] is not None}):
                others = f"{_THREAD_ROOTS} AND run_id NOT IN ({marks}) LIMIT 1"
                if not list(await db.execute_fetchall(others, (thread_id, *roots))):
                    alone.append(thread_id)
            return Pruned(
                before=before,
                root_ids=tuple(roots),
                run_ids=tuple(sorted(str(row[0]) for row in trees)),
                thread_ids=tuple(alone),
            )

        return await self._run(work)

    async def prune(self, due: Pruned) -> Pruned:
        """One write transaction: the batch's roots still due, with their trees, then the
        history of the batch's threads with no root run left; see ``Store.prune``."""
        if not due.root_ids and not due.thread_ids:
            return Pruned(before=due.before)

        async def work(db: aiosqlite.Connection) -> Pruned:
            marks = ",".join("?" * len(due.root_ids))
            still = f"""SELECT run_id FROM runs WHERE run_id IN ({marks}) AND {_DONE}
                AND updated_at < ?"""
            params = (*due.root_ids, due.before.timestamp())
            roots = {str(row[0]) for row in await db.execute_fetchall(still, params)}
            removed = await db.execute_fetchall(
                f"DELETE FROM runs WHERE root_run_id IN ({','.join('?' * len(roots))})"
                " RETURNING run_id",
                sorted(roots),
            )
            gone: list[str] = []
            for thread_id in due.thread_ids:
                if not list(await db.execute_fetchall(f"{_THREAD_ROOTS} LIMIT 1", (thread_id,))):
                    await changes(db, "DELETE FROM history WHERE thread_id = ?", (thread_id,))
                    gone.append(thread_id)
            return Pruned(
                before=due.before,
                root_ids=tuple(r for r in due.root_ids if r in roots),
                run_ids=tuple(sorted(str(row[0]) for row in removed)),
                thread_ids=tuple(gone),
            )

        return await self._run(work, transaction=True)

    async def prune_audit(
        self, before: datetime, *, limit: int = AUDIT_PRUNE_BATCH, seal: Seal | None = None
    ) -> int:
        """Moves ``audit_horizon`` past the oldest entries older than ``before``, with the
        chain's anchor, and deletes them (the triggers allow no other delete), in one
        transaction."""

        async def work(db: aiosqlite.Connection) -> int:
            head = await db.execute_fetchall(
                "SELECT seq, entry FROM audit ORDER BY seq LIMIT ?", (limit,)
            )
            due = list(takewhile(lambda row: _entry_time(row[1]) < before, head))
            if not due:
                return 0
            last = head_of(due[-1][1])
            at = Link(seq=int(due[-1][0]), hash=last.hash)
            left = anchor(at, await _anchor(db), len(due), 0, seal)
            await changes(
                db,
                "UPDATE audit_horizon SET seq = ?, hash = ?, removed = ?, signature = ?",
                (left.seq, left.hash, left.removed, left.signature),
            )
            return await changes(db, "DELETE FROM audit WHERE seq <= ?", (left.seq,))

        return await self._run(work, transaction=True)

    async def ping(self) -> bool:
        """Whether the database file opens and answers a query."""
        return await self._file.ping()

    async def close(self) -> None:
        """Close the connection (and its worker thread); the next call reopens it."""
        await self._file.close()

    async def _migrate(self, db: aiosqlite.Connection) -> None:
        rows = list(await db.execute_fetchall("PRAGMA user_version"))
        version = int(rows[0][0])
        if version == 0:
            steps: Sequence[str] = _SCHEMA
        elif version < SCHEMA_VERSION:
            steps = (*chain.from_iterable(_MIGRATIONS[version - 1 :]), _CURRENT)
        else:
            steps = ()
        for statement in steps:
            await db.execute(statement)
        if not steps and version != SCHEMA_VERSION:
            raise RuntimeError(
                f"{self._file.path}: schema version {version}, this code knows {SCHEMA_VERSION}"
            )


# The chain's head as kept apart (``audit_head``), with the event of its entry when
# that is still there: what comes next is linked after it, so entries cut from the end
# leave a gap ``audit verify`` names, never a chain that reads whole. A row from before
# the chain has no hash.
_HEAD = """SELECT h.seq, h.hash, json_extract(a.entry, '$.event')
    FROM audit_head AS h LEFT JOIN audit AS a ON a.seq = h.seq"""
_INSERT_AUDIT = "INSERT INTO audit (seq, run_id, thread_id, entry) VALUES (?, ?, ?, ?)"


async def _chain_head(db: aiosqlite.Connection) -> tuple[Link, str | None]:
    """The chain's head and the event of its last entry (inside a transaction)."""
    seq, digest, event = next(iter(await db.execute_fetchall(_HEAD)))
    return Link(seq=int(seq), hash=digest or GENESIS), event


async def _append_audit(
    db: aiosqlite.Connection, entries: Sequence[AuditEntry], head: Link | None = None
) -> None:
    """Link ``entries`` after the chain's ``head`` (read when not given) and insert them
    (inside a transaction)."""
    if head is None:
        head, _ = await _chain_head(db)
    lines, _ = link(entries, head)
    rows = [
        (head.seq + n, entry.run_id, entry.thread_id, line)
        for n, (entry, line) in enumerate(zip(entries, lines, strict=True), start=1)
    ]
    await db.executemany(_INSERT_AUDIT, rows)


# The horizon's row (with the head) first, then every entry in order.
_CHAIN = """SELECT 0 AS part, h.seq, h.hash, h.removed, h.signature, NULL, head.seq, head.hash
        FROM audit_horizon AS h, audit_head AS head
    UNION ALL SELECT 1, seq, NULL, NULL, NULL, entry, NULL, NULL FROM audit
    ORDER BY part, seq"""


async def _anchor(db: aiosqlite.Connection) -> AuditAnchor | None:
    """Where the last prune left the chain (``None``: never pruned, or before the chain)."""
    rows = await db.execute_fetchall("SELECT seq, hash, removed, signature FROM audit_horizon")
    return anchor_of(next(iter(rows)))


def _entry_time(data: str) -> datetime:
    return AUDIT_ADAPTER.validate_json(data).at


def _run_params(saved: RunSnapshot, data: str, *, expected: int) -> dict[str, Any]:
    index = run_index(saved)
    return {
        "run_id": saved.run_id,
        "revision": saved.revision,
        "expected": expected,
        "thread_id": saved.thread_id,
        "status": saved.status,
        "is_root": int(saved.is_root),
        "paused": int(index.paused),
        "next_expiry": index.expires_at.timestamp() if index.expires_at else None,
        "in_flight": int(index.in_flight),
        "created_at": saved.created_at.timestamp(),
        "snapshot": data,
        "updated_at": saved.updated_at.timestamp(),
        "root_run_id": saved.root_run_id,
    }
