"""The PostgreSQL store (``postgresql://user:pass@host:5432/db``, or ``postgres://``).

Runs, the run lock (a lease row), heartbeats, thread history and the audit log, in
tables a person can query (the audit log's columns: ``seq``, ``at``, ``event``,
``tool``, ``actor``, ``requester``, ``via``, ``run_id``, ``thread_id``, and the entry
as stored). Every save is one transaction: the compare-and-set of each run's revision,
its audit entries (the chain's head row locked, so the chain never forks) and the
history it remembers. The chat layer keeps its own tables in the same database
(``bot.chat_state``), through the same pool (``db``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any, TypeVar

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from ..chain import (
    CHECKPOINT,
    GENESIS,
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
from .postgres_db import Migration, PostgresDatabase, Work

__all__ = ["MIGRATIONS", "PostgresStore"]

Connection = AsyncConnection[TupleRow]
T = TypeVar("T")

# The audit log only loses its start, to retention (``prune_audit``): the database
# refuses any other change of it, as SQLite's triggers do.
_APPEND_ONLY = """CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND OLD.seq <= (SELECT coalesce(anchor_seq, 0) FROM audit_chain) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'the audit log is append-only';
END $$"""

MIGRATIONS: tuple[Migration, ...] = (
    (
        """CREATE TABLE runs (
            run_id text PRIMARY KEY,
            born bigint GENERATED ALWAYS AS IDENTITY,
            revision integer NOT NULL,
            thread_id text,
            status text NOT NULL,
            is_root boolean NOT NULL,
            root_run_id text NOT NULL,
            paused boolean NOT NULL,
            live boolean NOT NULL,
            in_flight boolean NOT NULL,
            next_expiry double precision,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            alive_until double precision,
            snapshot text NOT NULL
        )""",
        "CREATE INDEX runs_paused_by_thread ON runs (thread_id, created_at, born) WHERE paused",
        "CREATE INDEX runs_paused_by_expiry ON runs (next_expiry) WHERE paused",
        "CREATE INDEX runs_in_flight ON runs (created_at, born) WHERE in_flight",
        "CREATE INDEX runs_live_by_thread ON runs (thread_id, created_at, born) WHERE live",
        "CREATE INDEX runs_done_by_change ON runs (updated_at) WHERE is_root AND NOT live",
        "CREATE INDEX runs_by_root ON runs (root_run_id)",
        "CREATE INDEX runs_roots_by_thread ON runs (thread_id) WHERE is_root",
        """CREATE TABLE history (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            thread_id text NOT NULL,
            message text NOT NULL
        )""",
        "CREATE INDEX history_by_thread ON history (thread_id, seq)",
        """CREATE TABLE audit (
            seq bigint PRIMARY KEY,
            at timestamptz NOT NULL,
            event text NOT NULL,
            tool text NOT NULL,
            actor text,
            requester text,
            via text,
            run_id text NOT NULL,
            thread_id text,
            entry text NOT NULL
        )""",
        "CREATE INDEX audit_by_run ON audit (run_id, seq)",
        "CREATE INDEX audit_by_thread ON audit (thread_id, seq)",
        "CREATE INDEX audit_by_tool ON audit (tool, at)",
        "CREATE INDEX audit_by_actor ON audit (actor, at)",
        # The chain's head (every append locks this row: one chain, never forked) and
        # the anchor the last prune left (``agents.chain``).
        f"""CREATE TABLE audit_chain (
            id integer PRIMARY KEY CHECK (id = 1),
            head_seq bigint NOT NULL DEFAULT 0,
            head_hash text NOT NULL DEFAULT '{GENESIS}',
            anchor_seq bigint,
            anchor_hash text,
            removed bigint NOT NULL DEFAULT 0,
            signature text
        )""",
        "INSERT INTO audit_chain (id) VALUES (1)",
        _APPEND_ONLY,
        """CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
            FOR EACH ROW EXECUTE FUNCTION audit_append_only()""",
        """CREATE TABLE locks (
            name text PRIMARY KEY,
            token text NOT NULL,
            expires_at double precision NOT NULL
        )""",
    ),
)
"""The runtime's schema, version by version (``PostgresDatabase.migrate``)."""

_RUN_COLUMNS = (
    "run_id, revision, thread_id, status, is_root, root_run_id, paused, live, in_flight,"
    " next_expiry, created_at, updated_at, snapshot"
)
_INSERT_RUN = f"""INSERT INTO runs ({_RUN_COLUMNS})
    VALUES (%(run_id)s, %(revision)s, %(thread_id)s, %(status)s, %(is_root)s,
            %(root_run_id)s, %(paused)s, %(live)s, %(in_flight)s, %(next_expiry)s,
            %(created_at)s, %(updated_at)s, %(snapshot)s)
    ON CONFLICT (run_id) DO NOTHING"""
_UPDATE_RUN = """UPDATE runs SET revision = %(revision)s, thread_id = %(thread_id)s,
        status = %(status)s, is_root = %(is_root)s, root_run_id = %(root_run_id)s,
        paused = %(paused)s, live = %(live)s, in_flight = %(in_flight)s,
        next_expiry = %(next_expiry)s, created_at = %(created_at)s,
        updated_at = %(updated_at)s, snapshot = %(snapshot)s
    WHERE run_id = %(run_id)s AND revision = %(expected)s"""
_TAKE_LOCK = """INSERT INTO locks (name, token, expires_at) VALUES (%s, %s, %s)
    ON CONFLICT (name) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at
    WHERE locks.expires_at <= %s"""
_DONE = "is_root AND NOT live"
"""A finished root run (neither waits nor works): what ``prune`` may remove, once old."""
_DUE_ROOTS = f"""SELECT run_id, thread_id FROM runs WHERE {_DONE} AND updated_at < %s
    ORDER BY updated_at, born LIMIT %s"""
_THREAD_ROOTS = "SELECT 1 FROM runs WHERE thread_id = %s AND is_root"
_LOAD_HISTORY = "SELECT message FROM history WHERE thread_id = %s ORDER BY seq"
_TRIM_HISTORY = """DELETE FROM history WHERE thread_id = %s AND seq <= (
    SELECT seq FROM history WHERE thread_id = %s ORDER BY seq DESC OFFSET %s LIMIT 1)"""
_INSERT_AUDIT = """INSERT INTO audit
    (seq, at, event, tool, actor, requester, via, run_id, thread_id, entry)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"""


class PostgresStore(SavesInOne):
    """The store protocol over one PostgreSQL database, shared by every replica.

    Attributes:
        url: The URL the store was opened with.
        db: The database's pool and schemas (the chat state uses them too).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.db = PostgresDatabase(url)

    async def _run(self, work: Work[T], *, transaction: bool = False) -> T:
        """``work`` on a connection (``PostgresDatabase.run``), once the runtime's
        schema is up to date."""
        await self.db.migrate("runtime", MIGRATIONS)
        return await self.db.run(work, transaction=transaction)

    async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[TupleRow]:
        async def work(connection: Connection) -> list[TupleRow]:
            cursor = await connection.execute(sql, params)
            return await cursor.fetchall()

        return await self._run(work)

    async def _execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        async def work(connection: Connection) -> int:
            cursor = await connection.execute(sql, params)
            return cursor.rowcount

        return await self._run(work)

    async def load_run(self, run_id: str) -> RunSnapshot | None:
        """The snapshot of a run, or ``None``."""
        rows = await self._fetch("SELECT snapshot FROM runs WHERE run_id = %s", (run_id,))
        return load_snapshot(rows[0][0]) if rows else None

    async def _save(
        self,
        snapshots: Sequence[RunSnapshot],
        audit: Sequence[AuditEntry],
        *,
        remember: Remember | None = None,
        read_history: bool = False,
    ) -> tuple[list[RunSnapshot], list[Message]]:
        """One transaction: each run's compare-and-set on ``revision``, its audit entries
        and the history it remembers; rolled back at the first that fails."""
        check_audit(snapshots[0], audit)
        prepared = [(snapshot, *next_revision(snapshot)) for snapshot in snapshots]
        thread = snapshots[0].thread_id

        async def work(connection: Connection) -> list[TupleRow]:
            for snapshot, saved, data in prepared:
                sql = _INSERT_RUN if snapshot.revision == 0 else _UPDATE_RUN
                params = _run_params(saved, data, expected=snapshot.revision)
                cursor = await connection.execute(sql, params)
                if cursor.rowcount != 1:
                    # Only for the error message; the statement above decided. The
                    # exception rolls the transaction back.
                    cursor = await connection.execute(
                        "SELECT revision FROM runs WHERE run_id = %s", (snapshot.run_id,)
                    )
                    row = await cursor.fetchone()
                    actual = int(row[0]) if row is not None else None
                    raise StoreConflict(snapshot.run_id, snapshot.revision, actual)
            if audit:
                await _append_audit(connection, audit)
            if remember is not None and thread is not None:
                await _append_history(connection, thread, remember.messages, remember.window)
            if read_history and thread is not None:
                cursor = await connection.execute(_LOAD_HISTORY, (thread,))
                return await cursor.fetchall()
            return []

        rows = await self._run(work, transaction=True)
        history = [Message.model_validate_json(row[0]) for row in rows]
        return [saved for _, saved, _ in prepared], history

    def lock(
        self, name: str, *, ttl: float = 30.0, wait: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        """A lease row in the ``locks`` table, taken when free or expired."""

        async def take(token: str) -> bool:
            now = time.time()
            return await self._execute(_TAKE_LOCK, (name, token, now + ttl, now)) == 1

        async def give_back(token: str) -> None:
            await self._execute("DELETE FROM locks WHERE name = %s AND token = %s", (name, token))

        return hold_lease(name, ttl if wait is None else wait, take=take, give_back=give_back)

    async def beat(self, run_id: str, until: datetime) -> None:
        """Set the run's ``alive_until`` column (the snapshot and revision stay)."""
        sql = "UPDATE runs SET alive_until = %s WHERE run_id = %s"
        await self._execute(sql, (until.timestamp(), run_id))

    async def alive_until(self, run_id: str) -> datetime | None:
        """The run's ``alive_until`` column."""
        rows = await self._fetch("SELECT alive_until FROM runs WHERE run_id = %s", (run_id,))
        stamp = rows[0][0] if rows else None
        return datetime.fromtimestamp(stamp, UTC) if stamp is not None else None

    async def paused_runs(self, thread_id: str) -> list[str]:
        """Root runs of the thread paused for a person, oldest first."""
        sql = "SELECT run_id FROM runs WHERE paused AND thread_id = %s ORDER BY created_at, born"
        return [row[0] for row in await self._fetch(sql, (thread_id,))]

    async def thread_runs(self, thread_id: str) -> list[str]:
        """Root runs of the thread that wait for a person or work, oldest first."""
        sql = "SELECT run_id FROM runs WHERE live AND thread_id = %s ORDER BY created_at, born"
        return [row[0] for row in await self._fetch(sql, (thread_id,))]

    async def runs_expiring(self, before: datetime) -> list[str]:
        """Root paused runs with a pending call expiring before ``before``, soonest first."""
        sql = """SELECT run_id FROM runs WHERE paused AND next_expiry < %s
            ORDER BY next_expiry, born"""
        return [row[0] for row in await self._fetch(sql, (before.timestamp(),))]

    async def runs_in_flight(self) -> list[str]:
        """Root runs with a claimed call whose outcome was never recorded, oldest first."""
        sql = "SELECT run_id FROM runs WHERE in_flight ORDER BY created_at, born"
        return [row[0] for row in await self._fetch(sql)]

    async def load_history(self, thread_id: str) -> list[Message]:
        """The thread's remembered conversation, oldest first."""
        rows = await self._fetch(_LOAD_HISTORY, (thread_id,))
        return [Message.model_validate_json(row[0]) for row in rows]

    async def append_history(
        self, thread_id: str, messages: Sequence[Message], *, window: int
    ) -> None:
        """Append and trim to ``window``, in one transaction."""

        async def work(connection: Connection) -> None:
            await _append_history(connection, thread_id, messages, window)

        await self._run(work, transaction=True)

    async def append_audit(self, entry: AuditEntry) -> None:
        """Append one entry to the chain; the database refuses changing it afterwards."""

        async def work(connection: Connection) -> None:
            await _append_audit(connection, [entry])

        await self._run(work, transaction=True)

    async def list_audit(
        self, *, run_id: str | None = None, thread_id: str | None = None
    ) -> list[AuditEntry]:
        """Audit entries of a run and/or a thread (all when neither), oldest first."""
        where = ["TRUE"]
        params: list[str] = []
        if run_id is not None:
            where.append("run_id = %s")
            params.append(run_id)
        if thread_id is not None:
            where.append("thread_id = %s")
            params.append(thread_id)
        sql = f"SELECT entry FROM audit WHERE {' AND '.join(where)} ORDER BY seq"
        return [AUDIT_ADAPTER.validate_json(row[0]) for row in await self._fetch(sql, params)]

    async def audit_chains(self) -> list[AuditChain]:
        """The one chain, with its head and anchor, read in one snapshot (a repeatable
        read transaction: nothing held up)."""

        async def work(connection: Connection) -> tuple[TupleRow | None, list[str]]:
            await connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cursor = await connection.execute(
                """SELECT head_seq, head_hash, anchor_seq, anchor_hash, removed, signature
                    FROM audit_chain"""
            )
            row = await cursor.fetchone()
            cursor = await connection.execute("SELECT entry FROM audit ORDER BY seq")
            return row, [str(line) for (line,) in await cursor.fetchall()]

        row, lines = await self._run(work, transaction=True)
        assert row is not None  # the migration's one row
        head_seq, head_hash, *left = row
        head = Link(seq=head_seq, hash=head_hash) if head_seq else None
        return [AuditChain(0, lines, anchor_of(left), head)]

    async def read_audit(
        self, chain: int, after: int, *, limit: int = AUDIT_READ_BATCH
    ) -> list[str]:
        """The lines above ``after``, by ``seq``."""
        if chain != 0:
            return []
        sql = "SELECT entry FROM audit WHERE seq > %s ORDER BY seq LIMIT %s"
        return [str(row[0]) for row in await self._fetch(sql, (after, limit))]

    async def seal_audit(self, seal: Seal) -> int:
        """A signed checkpoint after the chain's head, unless the head is one."""

        async def work(connection: Connection) -> int:
            head = await _chain_head(connection)
            if head.seq == 0:
                return 0
            cursor = await connection.execute("SELECT event FROM audit WHERE seq = %s", (head.seq,))
            row = await cursor.fetchone()
            if row is not None and row[0] == CHECKPOINT:
                return 0
            await _append_audit(connection, [checkpoint(head, 0, seal)], head)
            return 1

        return await self._run(work, transaction=True)

    async def prunable(self, before: datetime, *, limit: int = PRUNE_BATCH) -> Pruned:
        """The oldest due roots, their trees and the threads left with no other root
        run; see ``Store.prunable``. Read without a transaction: ``prune`` checks again."""

        async def work(connection: Connection) -> Pruned:
            cursor = await connection.execute(_DUE_ROOTS, (before.timestamp(), limit))
            due = await cursor.fetchall()
            if not due:
                return Pruned(before=before)
            roots = [str(row[0]) for row in due]
            cursor = await connection.execute(
                "SELECT run_id FROM runs WHERE root_run_id = ANY(%s)", (roots,)
            )
            trees = await cursor.fetchall()
            alone: list[str] = []
            for thread_id in sorted({str(row[1]) for row in due if row[1] is not None}):
                cursor = await connection.execute(
                    f"{_THREAD_ROOTS} AND NOT run_id = ANY(%s) LIMIT 1", (thread_id, roots)
                )
                if await cursor.fetchone() is None:
                    alone.append(thread_id)
            return Pruned(
                before=before,
                root_ids=tuple(roots),
                run_ids=tuple(sorted(str(row[0]) for row in trees)),
                thread_ids=tuple(alone),
            )

        return await self._run(work)

    async def prune(self, due: Pruned) -> Pruned:
        """One transaction: the batch's roots still due, with their trees, then the
        history of the batch's threads with no root run left; see ``Store.prune``."""
        if not due.root_ids and not due.thread_ids:
            return Pruned(before=due.before)

        async def work(connection: Connection) -> Pruned:
            cursor = await connection.execute(
                f"""SELECT run_id FROM runs WHERE run_id = ANY(%s) AND {_DONE}
                    AND updated_at < %s FOR UPDATE""",
                (list(due.root_ids), due.before.timestamp()),
            )
            roots = sorted(str(row[0]) for row in await cursor.fetchall())
            cursor = await connection.execute(
                "DELETE FROM runs WHERE root_run_id = ANY(%s) RETURNING run_id", (roots,)
            )
            removed = sorted(str(row[0]) for row in await cursor.fetchall())
            gone: list[str] = []
            for thread_id in due.thread_ids:
                cursor = await connection.execute(f"{_THREAD_ROOTS} LIMIT 1", (thread_id,))
                if await cursor.fetchone() is None:
                    await connection.execute(
                        "DELETE FROM history WHERE thread_id = %s", (thread_id,)
                    )
                    gone.append(thread_id)
            return Pruned(
                before=due.before,
                root_ids=tuple(r for r in due.root_ids if r in roots),
                run_ids=tuple(removed),
                thread_ids=tuple(gone),
            )

        return await self._run(work, transaction=True)

    async def prune_audit(
        self, before: datetime, *, limit: int = AUDIT_PRUNE_BATCH, seal: Seal | None = None
    ) -> int:
        """Moves the chain's anchor past the oldest entries older than ``before`` and
        deletes them (the trigger allows no other delete), in one transaction."""

        async def work(connection: Connection) -> int:
            cursor = await connection.execute(
                """SELECT anchor_seq, anchor_hash, removed, signature FROM audit_chain
                    FOR UPDATE"""
            )
            row = await cursor.fetchone()
            assert row is not None  # the migration's one row
            previous = anchor_of(row)
            cursor = await connection.execute(
                "SELECT seq, at, entry FROM audit ORDER BY seq LIMIT %s", (limit,)
            )
            due = []
            for seq, at, entry in await cursor.fetchall():
                if at >= before:
                    break
                due.append((seq, entry))
            if not due:
                return 0
            last = head_of(due[-1][1])
            left = anchor(Link(seq=due[-1][0], hash=last.hash), previous, len(due), 0, seal)
            await connection.execute(
                """UPDATE audit_chain SET anchor_seq = %s, anchor_hash = %s, removed = %s,
                    signature = %s""",
                (left.seq, left.hash, left.removed, left.signature),
            )
            cursor = await connection.execute("DELETE FROM audit WHERE seq <= %s", (left.seq,))
            return cursor.rowcount

        return await self._run(work, transaction=True)

    async def ping(self) -> bool:
        """Whether the server answers a query, once the runtime's schema is up to date.

        Raises:
            SchemaTooNew: A newer bot migrated the database further than this one knows.
        """
        await self.db.migrate("runtime", MIGRATIONS)
        return await self.db.ping()

    async def close(self) -> None:
        """Close the pool; the next call opens a new one."""
        await self.db.close()


async def _chain_head(connection: Connection) -> Link:
    """The chain's head, its row locked until the transaction ends (inside one)."""
    cursor = await connection.execute(
        "SELECT head_seq, head_hash FROM audit_chain WHERE id = 1 FOR UPDATE"
    )
    row = await cursor.fetchone()
    assert row is not None  # the migration's one row
    return Link(seq=int(row[0]), hash=str(row[1]))


async def _append_audit(
    connection: Connection, entries: Sequence[AuditEntry], head: Link | None = None
) -> None:
    """Link ``entries`` after the chain's head (locked, read when not given), insert
    them and move the head (inside a transaction)."""
    if head is None:
        head = await _chain_head(connection)
    lines, after = link(entries, head)
    rows = [
        (
            head.seq + n,
            entry.at,
            entry.event,
            entry.tool_name,
            entry.actor,
            entry.requester,
            entry.via,
            entry.run_id,
            entry.thread_id,
            line,
        )
        for n, (entry, line) in enumerate(zip(entries, lines, strict=True), start=1)
    ]
    async with connection.cursor() as cursor:
        await cursor.executemany(_INSERT_AUDIT, rows)
    await connection.execute(
        "UPDATE audit_chain SET head_seq = %s, head_hash = %s", (after.seq, after.hash)
    )


async def _append_history(
    connection: Connection, thread_id: str, messages: Sequence[Message], window: int
) -> None:
    """Append to a thread's history and keep its newest ``window`` (inside a transaction)."""
    if messages:
        rows = [(thread_id, m.model_dump_json()) for m in messages]
        async with connection.cursor() as cursor:
            await cursor.executemany(
                "INSERT INTO history (thread_id, message) VALUES (%s, %s)", rows
            )
    if window > 0:
        await connection.execute(_TRIM_HISTORY, (thread_id, thread_id, window))
    else:
        await connection.execute("DELETE FROM history WHERE thread_id = %s", (thread_id,))


def _run_params(saved: RunSnapshot, data: str, *, expected: int) -> dict[str, Any]:
    index = run_index(saved)
    return {
        "run_id": saved.run_id,
        "revision": saved.revision,
        "expected": expected,
        "thread_id": saved.thread_id,
        "status": saved.status,
        "is_root": saved.is_root,
        "root_run_id": saved.root_run_id,
        "paused": index.paused,
        "live": index.live,
        "in_flight": index.in_flight,
        "next_expiry": index.expires_at.timestamp() if index.expires_at else None,
        "created_at": saved.created_at.timestamp(),
        "updated_at": saved.updated_at.timestamp(),
        "snapshot": data,
    }
