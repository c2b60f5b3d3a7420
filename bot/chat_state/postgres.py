"""Chat state in the store's PostgreSQL database, in tables of its own.

The tables are SQLite's (``sqlite``), kept by versioned migrations of their own
(the ``chat`` component, ``PostgresDatabase.migrate``), through the store's pool
when the store is on the same database. What SQLite gets from its single writer,
PostgreSQL gets from row locks: the intake queue and the timers are handed out
with ``SELECT ... FOR UPDATE SKIP LOCKED`` (each row to one taker, none waiting
for another), a delivery's dedupe claims lock their rows (``_postgres_intake``),
and a card's votes and a recent list are changed under a lock of their own. Keys
that are listed in order (records, grants) sort as the code does, by code point
(``COLLATE "C"``), whatever the database's collation. Each write to the intake
queue wakes the other replicas' workers (``NOTIFY``; ``_postgres_listen``).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from psycopg.rows import TupleRow

from agents import Store
from agents.stores import hold_lease
from agents.stores.postgres import PostgresStore
from agents.stores.postgres_db import Migration, PostgresDatabase

from ..types import Person
from ._deliveries import delivery
from ._ordering import least_above
from ._postgres_intake import FOLLOW, NOTIFY, SET_REFERENCES, Connection, IntakeBatches
from ._postgres_listen import Listener
from .base import (
    CARD_LOCK_TTL,
    CARD_PLACE,
    PERSON,
    CardPlace,
    IntakeEntry,
    ThreadNote,
    json_object,
)

__all__ = ["CHAT_MIGRATIONS", "PostgresChatState"]

# Lapsed dedupe claims and notes are harmless but would grow the tables forever; one
# sweep a minute per process keeps them bounded without a statement on every call.
SWEEP_INTERVAL = 60.0
LOCK_TIMEOUT_MS = 1000
"""How long a chat-state transaction waits for a row another connection holds."""

CHAT_MIGRATIONS: tuple[Migration, ...] = (
    (
        """CREATE TABLE seen (
            key text COLLATE "C" PRIMARY KEY, expires_at double precision NOT NULL)""",
        "CREATE INDEX seen_by_expiry ON seen (expires_at)",
        "CREATE TABLE thread_refs (thread_id text PRIMARY KEY, reference text NOT NULL)",
        "CREATE TABLE followed_threads (thread_id text PRIMARY KEY)",
        # Cards and votes are a few hundred bytes per pending call, kept as a record.
        """CREATE TABLE cards (
            run_id text NOT NULL, ask text NOT NULL, place text NOT NULL,
            PRIMARY KEY (run_id, ask))""",
        """CREATE TABLE votes (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, run_id text NOT NULL,
            ask text NOT NULL, user_id text NOT NULL, voter text NOT NULL,
            UNIQUE (run_id, ask, user_id))""",
        "CREATE INDEX votes_by_run ON votes (run_id)",
        # The intake queue: a free entry has lease_until <= now (0 until first taken).
        """CREATE TABLE inbox (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text NOT NULL,
            worker text, lease_until double precision NOT NULL DEFAULT 0,
            attempts integer NOT NULL DEFAULT 0)""",
        "CREATE INDEX inbox_by_lease ON inbox (lease_until, seq)",
        # Timed jobs (reminders, escalations): a row is handed out once, by deleting it.
        """CREATE TABLE timers (
            key text PRIMARY KEY, due double precision NOT NULL, data text NOT NULL)""",
        "CREATE INDEX timers_by_due ON timers (due)",
        # Standing approvals ("Approve for this thread"), by thread; a lapsed one is ignored.
        """CREATE TABLE grants (
            thread_id text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL,
            until double precision NOT NULL, granted_by text NOT NULL,
            PRIMARY KEY (thread_id, key))""",
        "CREATE INDEX grants_by_granter ON grants (granted_by)",
        # Who each waiting run waits for, so an inbox reads only its runs; pruned by readers.
        """CREATE TABLE waiting_index (
            scope text NOT NULL, name text NOT NULL, run_id text NOT NULL,
            PRIMARY KEY (scope, name, run_id))""",
        "CREATE INDEX waiting_by_run ON waiting_index (run_id)",
        # Notes adapters keep for a while (``set_note``); a lapsed one is ignored, then swept.
        """CREATE TABLE notes (
            key text PRIMARY KEY, value text NOT NULL, expires_at double precision NOT NULL)""",
        "CREATE INDEX notes_by_expiry ON notes (expires_at)",
        # Permanent records by key (``put_record``): an adapter's installations, as JSON.
        'CREATE TABLE records (key text COLLATE "C" PRIMARY KEY, value text NOT NULL)',
        # Short lists by key, newest last (``push_recent``): a person's recent decisions.
        """CREATE TABLE recent (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, key text NOT NULL,
            item text NOT NULL)""",
        "CREATE INDEX recent_by_key ON recent (key, seq)",
        # Card locks (votes, declines, expiry): a lease row, taken when free or lapsed.
        """CREATE TABLE card_locks (
            name text PRIMARY KEY, token text NOT NULL, until double precision NOT NULL)""",
    ),
)
"""The chat state's schema, version by version (``PostgresDatabase.migrate``)."""

# What ``forget`` removes: pruned runs' rows, then pruned threads'.
_FORGET_RUNS = (
    "DELETE FROM cards WHERE run_id = ANY(%s)",
    "DELETE FROM votes WHERE run_id = ANY(%s)",
    "DELETE FROM waiting_index WHERE run_id = ANY(%s)",
)
_FORGET_THREADS = (
    "DELETE FROM followed_threads WHERE thread_id = ANY(%s)",
    "DELETE FROM thread_refs WHERE thread_id = ANY(%s)",
    "DELETE FROM grants WHERE thread_id = ANY(%s)",
)
# A lock of the transaction's, for changes of several statements to one thing (a card's
# votes, a recent list) that must not interleave; its name is hashed to the lock's key.
_SERIALIZE = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
# Leases are timed by the server's clock, as Redis's are: replicas' clocks may differ.
_NOW = "extract(epoch from clock_timestamp())"
_TAKE_CARD_LOCK = f"""INSERT INTO card_locks (name, token, until) VALUES (%s, %s, {_NOW} + %s)
    ON CONFLICT (name) DO UPDATE SET token = excluded.token, until = excluded.until
    WHERE card_locks.until <= {_NOW}"""
_ADD_VOTE = """INSERT INTO votes (run_id, ask, user_id, voter) VALUES (%s, %s, %s, %s)
    ON CONFLICT DO NOTHING"""
_VOTES = "SELECT voter FROM votes WHERE run_id = %s AND ask = %s ORDER BY seq"
_TRIM_RECENT = """DELETE FROM recent WHERE key = %s AND seq <= (
    SELECT seq FROM recent WHERE key = %s ORDER BY seq DESC OFFSET %s LIMIT 1)"""
_SET_NOTE = """INSERT INTO notes (key, value, expires_at) VALUES (%s, %s, %s)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"""
_PUT_RECORD = """INSERT INTO records (key, value) VALUES (%s, %s)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value"""
_RECORDS_FROM = "SELECT key, value FROM records WHERE key >= %s"
_RECORDS_BELOW = " AND key < %s"
_SET_TIMER = """INSERT INTO timers (key, due, data) VALUES (%s, %s, %s)
    ON CONFLICT (key) DO UPDATE SET due = excluded.due, data = excluded.data"""
# Each due row to one taker: rows another transaction is taking are passed over.
_TAKE_DUE = """WITH due AS (
        SELECT key FROM timers WHERE due <= %s ORDER BY due LIMIT %s FOR UPDATE SKIP LOCKED)
    DELETE FROM timers USING due WHERE timers.key = due.key
    RETURNING timers.key, timers.data, timers.due"""
_TAKE = f"""UPDATE inbox SET worker = %s, lease_until = {_NOW} + %s, attempts = attempts + 1
    WHERE seq IN (SELECT seq FROM inbox WHERE {{free}} ORDER BY seq LIMIT %s
        FOR UPDATE SKIP LOCKED)
    RETURNING seq, body, attempts"""
_TAKE_OVER = _TAKE.format(free=f"lease_until <= {_NOW}")
_TAKE_NEW = _TAKE.format(free="lease_until = 0")
_LEASE = f"UPDATE inbox SET lease_until = {_NOW} + %s WHERE worker = %s AND seq = ANY(%s)"
_RELEASE = "UPDATE inbox SET lease_until = %s WHERE worker = %s AND seq = ANY(%s)"
RELEASED = 1.0
"""The lease of an entry handed back: it ended in 1970, so any take that takes over
takes it at once (and counts the attempt: its work may have begun)."""


class PostgresChatState:
    """The chat state in the store's PostgreSQL database, in tables of its own.

    Args:
        url: The store's URL (``postgresql://``).
        store: The store; its pool is shared when it is on the same database.
    """

    def __init__(self, url: str, store: Store) -> None:
        # The store's pool when it is the same database: one set of connections.
        if isinstance(store, PostgresStore) and store.url == url:
            self.db, self._owns_db = store.db, False
        else:
            self.db, self._owns_db = PostgresDatabase(url), True
        self._next_seen_sweep = 0.0
        self._next_note_sweep = 0.0
        self._token = secrets.token_hex(8)
        """This process's name in the intake's word: its own writes need no waking."""
        self._intake = IntakeBatches(self._transaction, token=self._token)
        self._listener = Listener(self.db.conninfo, own=self._token)

    async def _connection(self) -> AbstractAsyncContextManager[Connection]:
        """A connection, once the chat state's schema is up to date."""
        await self.db.migrate("chat", CHAT_MIGRATIONS)
        return self.db.connection()

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Connection]:
        """A transaction that waits at most ``LOCK_TIMEOUT`` for a row another holds (a
        replica stalled mid-write must not stall this one's writes: ``LockNotAvailable``)."""
        async with await self._connection() as connection, connection.transaction():
            await connection.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
            yield connection

    async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[TupleRow]:
        async def work(connection: Connection) -> list[TupleRow]:
            cursor = await connection.execute(sql, params)
            return await cursor.fetchall()

        await self.db.migrate("chat", CHAT_MIGRATIONS)
        return await self.db.run(work)

    async def _execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        async def work(connection: Connection) -> int:
            cursor = await connection.execute(sql, params)
            return cursor.rowcount

        await self.db.migrate("chat", CHAT_MIGRATIONS)
        return await self.db.run(work)

    def card_lock(
        self, run_id: str, ask: str, *, wait: float = 30.0
    ) -> AbstractAsyncContextManager[None]:
        name = f"{run_id}:{ask}"

        async def take(token: str) -> bool:
            return await self._execute(_TAKE_CARD_LOCK, (name, token, CARD_LOCK_TTL)) == 1

        async def give_back(token: str) -> None:
            sql = "DELETE FROM card_locks WHERE name = %s AND token = %s"
            await self._execute(sql, (name, token))

        return hold_lease(f"card {name}", wait, take=take, give_back=give_back)

    async def follow(self, thread_id: str) -> None:
        await self._execute(FOLLOW, ([thread_id],))

    async def follows(self, thread_id: str) -> bool:
        sql = "SELECT 1 FROM followed_threads WHERE thread_id = %s"
        return bool(await self._fetch(sql, (thread_id,)))

    async def set_conversation_ref(self, thread_id: str, ref: dict[str, Any]) -> None:
        await self._execute(SET_REFERENCES, ([thread_id], [json.dumps(ref, ensure_ascii=False)]))

    async def conversation_ref(self, thread_id: str) -> dict[str, Any] | None:
        sql = "SELECT reference FROM thread_refs WHERE thread_id = %s"
        rows = await self._fetch(sql, (thread_id,))
        return json_object(rows[0][0]) if rows else None

    async def set_card(self, run_id: str, ask: str, place: CardPlace) -> None:
        sql = """INSERT INTO cards (run_id, ask, place) VALUES (%s, %s, %s)
            ON CONFLICT (run_id, ask) DO UPDATE SET place = excluded.place"""
        await self._execute(sql, (run_id, ask, CARD_PLACE.dump_json(place).decode()))

    async def card_of(self, run_id: str, ask: str) -> CardPlace | None:
        sql = "SELECT place FROM cards WHERE run_id = %s AND ask = %s"
        rows = await self._fetch(sql, (run_id, ask))
        return CARD_PLACE.validate_json(rows[0][0]) if rows else None

    async def add_vote(self, run_id: str, ask: str, voter: Person) -> list[Person]:
        """The vote and the card's votes read after it under the card's own lock: of
        votes at once, the last to commit reads them all."""
        async with self._transaction() as connection:
            await connection.execute(_SERIALIZE, (f"votes:{run_id}:{ask}",))
            vote = (run_id, ask, voter.id, PERSON.dump_json(voter).decode())
            await connection.execute(_ADD_VOTE, vote)
            cursor = await connection.execute(_VOTES, (run_id, ask))
            rows = await cursor.fetchall()
        return [PERSON.validate_json(row[0]) for row in rows]

    async def votes(self, run_id: str, ask: str) -> list[Person]:
        rows = await self._fetch(_VOTES, (run_id, ask))
        return [PERSON.validate_json(row[0]) for row in rows]

    async def set_grant(self, thread_id: str, key: str, until: float, granted_by: str) -> None:
        sql = """INSERT INTO grants (thread_id, key, until, granted_by) VALUES (%s, %s, %s, %s)
            ON CONFLICT (thread_id, key) DO UPDATE
            SET until = excluded.until, granted_by = excluded.granted_by"""
        await self._execute(sql, (thread_id, key, until, granted_by))

    async def grant(self, thread_id: str, key: str, now: float) -> str | None:
        sql = "SELECT granted_by FROM grants WHERE thread_id = %s AND key = %s AND until > %s"
        rows = await self._fetch(sql, (thread_id, key, now))
        return str(rows[0][0]) if rows else None

    async def revoke_grants(self, thread_id: str) -> int:
        return await self._execute("DELETE FROM grants WHERE thread_id = %s", (thread_id,))

    async def revoke_grant(self, thread_id: str, key: str) -> bool:
        sql = "DELETE FROM grants WHERE thread_id = %s AND key = %s"
        return await self._execute(sql, (thread_id, key)) > 0

    async def grants_given(self, granted_by: str, scope: str, now: float) -> list[tuple[str, str]]:
        # starts_with, not LIKE: a scope's own % and _ are not patterns.
        sql = """SELECT thread_id, key FROM grants WHERE granted_by = %s AND until > %s
            AND starts_with(thread_id, %s) ORDER BY thread_id, key"""
        rows = await self._fetch(sql, (granted_by, now, scope))
        return [(str(row[0]), str(row[1])) for row in rows]

    async def index_waiting(self, scope: str, names: Sequence[str], run_id: str) -> None:
        sql = """INSERT INTO waiting_index (scope, name, run_id)
            SELECT %s, unnest(%s::text[]), %s ON CONFLICT DO NOTHING"""
        if names:
            await self._execute(sql, (scope, list(names), run_id))

    async def waiting_for(self, scope: str, names: Sequence[str]) -> set[str]:
        sql = "SELECT DISTINCT run_id FROM waiting_index WHERE scope = %s AND name = ANY(%s)"
        if not names:
            return set()
        return {str(row[0]) for row in await self._fetch(sql, (scope, list(names)))}

    async def unindex_waiting(self, scope: str, names: Sequence[str], run_id: str) -> None:
        sql = "DELETE FROM waiting_index WHERE scope = %s AND name = ANY(%s) AND run_id = %s"
        if names:
            await self._execute(sql, (scope, list(names), run_id))

    async def set_note(self, key: str, value: str, *, ttl: float) -> None:
        now = time.time()
        if now >= self._next_note_sweep:  # lapsed notes would grow the table forever
            self._next_note_sweep = now + SWEEP_INTERVAL
            await self._execute("DELETE FROM notes WHERE expires_at <= %s", (now,))
        await self._execute(_SET_NOTE, (key, value, now + ttl))

    async def note(self, key: str) -> str | None:
        sql = "SELECT value FROM notes WHERE key = %s AND expires_at > %s"
        rows = await self._fetch(sql, (key, time.time()))
        return str(rows[0][0]) if rows else None

    async def take_note(self, key: str) -> str | None:
        """One ``DELETE ... RETURNING``: of takers at once, one gets the row."""
        sql = "DELETE FROM notes WHERE key = %s RETURNING value, expires_at"
        rows = await self._fetch(sql, (key,))
        return str(rows[0][0]) if rows and float(rows[0][1]) > time.time() else None

    async def put_record(self, key: str, value: str) -> None:
        await self._execute(_PUT_RECORD, (key, value))

    async def record(self, key: str) -> str | None:
        rows = await self._fetch("SELECT value FROM records WHERE key = %s", (key,))
        return str(rows[0][0]) if rows else None

    async def drop_records(self, keys: Sequence[str]) -> int:
        if not keys:
            return 0
        return await self._execute("DELETE FROM records WHERE key = ANY(%s)", (sorted(set(keys)),))

    async def records(self, prefix: str) -> list[tuple[str, str]]:
        # A range of the primary key, not LIKE: a prefix's own % and _ are no patterns.
        above = least_above(prefix)
        if above is None:
            rows = await self._fetch(_RECORDS_FROM + " ORDER BY key", (prefix,))
        else:
            sql = _RECORDS_FROM + _RECORDS_BELOW + " ORDER BY key"
            rows = await self._fetch(sql, (prefix, above))
        return [(str(row[0]), str(row[1])) for row in rows]

    async def push_recent(self, key: str, item: str, *, keep: int) -> None:
        async with self._transaction() as connection:
            await connection.execute(_SERIALIZE, (f"recent:{key}",))
            await connection.execute("INSERT INTO recent (key, item) VALUES (%s, %s)", (key, item))
            await connection.execute(_TRIM_RECENT, (key, key, keep))

    async def recent(self, key: str) -> list[str]:
        sql = "SELECT item FROM recent WHERE key = %s ORDER BY seq DESC"
        return [str(row[0]) for row in await self._fetch(sql, (key,))]

    async def set_timer(self, key: str, due: float, data: str) -> None:
        await self._execute(_SET_TIMER, (key, due, data))

    async def take_due(self, now: float, *, limit: int = 100) -> list[tuple[str, str]]:
        """The due rows locked (``SKIP LOCKED``: those another taker holds are its) and
        deleted, in one statement."""
        rows = await self._fetch(_TAKE_DUE, (now, limit))
        return [(str(key), str(data)) for key, data, _ in sorted(rows, key=lambda r: r[2])]

    async def enqueue(
        self, body: str, *, keys: Sequence[str], ttl: float, note: ThreadNote | None = None
    ) -> str | None:
        """The follow check, the claim, the insert, the note and the word to the other
        replicas, in one transaction with the deliveries handed in meanwhile
        (``IntakeBatches``)."""
        now = time.time()
        sweep = now >= self._next_seen_sweep
        if sweep:
            self._next_seen_sweep = now + SWEEP_INTERVAL
        return await self._intake.enqueue(
            delivery(body, keys, ttl=ttl, note=note, now=now, sweep=sweep)
        )

    async def take(
        self, worker: str, *, count: int, lease: float, take_over: bool = True
    ) -> list[IntakeEntry]:
        """One ``UPDATE`` of the oldest free rows, locked with ``SKIP LOCKED``: rows
        another worker is taking are passed over, never waited for."""
        sql = _TAKE_OVER if take_over else _TAKE_NEW
        params = (worker, lease, count)
        rows = sorted(await self._fetch(sql, params))
        return [IntakeEntry(id=str(seq), body=body, attempts=n) for seq, body, n in rows]

    async def renew(self, worker: str, ids: Sequence[str], *, lease: float) -> None:
        if ids:
            await self._execute(_LEASE, (lease, worker, [int(i) for i in ids]))

    async def release(self, worker: str, ids: Sequence[str]) -> None:
        """The lease ended, and word sent: another replica takes them at once."""
        if not ids:
            return
        async with self._transaction() as connection:
            cursor = await connection.execute(_RELEASE, (RELEASED, worker, [int(i) for i in ids]))
            if cursor.rowcount:
                await connection.execute(NOTIFY, (self._token,))

    async def done(self, entry_id: str) -> None:
        await self._execute("DELETE FROM inbox WHERE seq = %s", (int(entry_id),))

    async def wait_for_entries(self) -> None:
        """Word from the listening connection (``_postgres_listen``)."""
        await self._listener.wait()

    async def forget(self, run_ids: Sequence[str], thread_ids: Sequence[str]) -> None:
        """Every pruned run's and thread's rows, a statement per table, in one transaction."""
        steps = [
            *((sql, list(run_ids)) for sql in _FORGET_RUNS if run_ids),
            *((sql, list(thread_ids)) for sql in _FORGET_THREADS if thread_ids),
        ]
        if not steps:
            return
        async with self._transaction() as connection:
            for sql, names in steps:
                await connection.execute(sql, (names,))

    async def close(self) -> None:
        await self._listener.close()
        if self._owns_db:  # a shared pool is the store's to close
            await self.db.close()
