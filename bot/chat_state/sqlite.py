"""Chat state in the store's SQLite file, in tables of its own.

``seen`` and ``thread_refs`` keep the names (and rows) they had when the store
kept them, so an upgrade carries dedupe claims and conversation references
over; what else the chat layer kept before is not (README, "Upgrading").
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import aiosqlite

from agents import Store
from agents.stores import SQLiteFile, changes, database_path, hold_lease

from ..types import Person
from ._deliveries import delivery
from ._ordering import least_above
from ._sqlite_intake import FOLLOW, SET_REFERENCE, IntakeBatches
from .base import (
    CARD_LOCK_TTL,
    CARD_PLACE,
    PERSON,
    CardPlace,
    IntakeEntry,
    ThreadNote,
    json_object,
)

# Expired dedupe claims are harmless but would grow the file forever; one sweep a
# minute per process keeps them bounded without a statement on every call.
SEEN_SWEEP_INTERVAL = 60.0

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS seen (key TEXT PRIMARY KEY, expires_at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS seen_by_expiry ON seen (expires_at)",
    """CREATE TABLE IF NOT EXISTS thread_refs (
        thread_id TEXT PRIMARY KEY, reference TEXT NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS followed_threads (thread_id TEXT PRIMARY KEY)",
    # Cards and votes are a few hundred bytes per pending call, kept as a record.
    """CREATE TABLE IF NOT EXISTS cards (
        run_id TEXT NOT NULL, call_id TEXT NOT NULL, place TEXT NOT NULL,
        PRIMARY KEY (run_id, call_id))""",
    # The inbox: a free entry has lease_until <= now (0 until first taken).
    """CREATE TABLE IF NOT EXISTS inbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL, worker TEXT,
        lease_until REAL NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS inbox_by_lease ON inbox (lease_until, seq)",
    # Timed jobs (reminders, escalations): a row is handed out once, by deleting it.
    """CREATE TABLE IF NOT EXISTS timers (
        key TEXT PRIMARY KEY, due REAL NOT NULL, data TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS timers_by_due ON timers (due)",
    # Standing approvals ("Approve for this thread"), by thread; a lapsed one is ignored.
    """CREATE TABLE IF NOT EXISTS grants (
        thread_id TEXT NOT NULL, key TEXT NOT NULL, until REAL NOT NULL,
        granted_by TEXT NOT NULL, PRIMARY KEY (thread_id, key))""",
    "CREATE INDEX IF NOT EXISTS grants_by_granter ON grants (granted_by)",
    # Who each waiting run waits for, so an inbox reads only its runs; pruned by readers.
    """CREATE TABLE IF NOT EXISTS waiting_index (
        scope TEXT NOT NULL, name TEXT NOT NULL, run_id TEXT NOT NULL,
        PRIMARY KEY (scope, name, run_id))""",
    # Notes adapters keep for a while (``set_note``); a lapsed one is ignored, then replaced.
    """CREATE TABLE IF NOT EXISTS notes (
        key TEXT PRIMARY KEY, value TEXT NOT NULL, expires_at REAL NOT NULL)""",
    # Permanent records by key (``put_record``): an adapter's installations, as JSON.
    """CREATE TABLE IF NOT EXISTS records (key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    # Short lists by key, newest last (``push_recent``): a person's recent decisions.
    """CREATE TABLE IF NOT EXISTS recent (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, item TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS recent_by_key ON recent (key, seq)",
    # Card locks (votes, declines, expiry): a lease row, taken when free or lapsed.
    """CREATE TABLE IF NOT EXISTS card_locks (
        name TEXT PRIMARY KEY, token TEXT NOT NULL, until REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS votes (
        seq INTEGER PRIMARY KEY, run_id TEXT NOT NULL, call_id TEXT NOT NULL,
        user_id TEXT NOT NULL, voter TEXT NOT NULL, UNIQUE (run_id, call_id, user_id))""",
    # A pruned run's entries are found without reading the whole waiting index.
    "CREATE INDEX IF NOT EXISTS waiting_by_run ON waiting_index (run_id)",
    "CREATE INDEX IF NOT EXISTS notes_by_expiry ON notes (expires_at)",
)
# What ``forget`` removes: a pruned run's rows, then a pruned thread's.
_FORGET_RUN = (
    "DELETE FROM cards WHERE run_id = ?",
    "DELETE FROM votes WHERE run_id = ?",
    "DELETE FROM waiting_index WHERE run_id = ?",
)
_FORGET_THREAD = (
    "DELETE FROM followed_threads WHERE thread_id = ?",
    "DELETE FROM thread_refs WHERE thread_id = ?",
    "DELETE FROM grants WHERE thread_id = ?",
)
_TAKE_CARD_LOCK = """INSERT INTO card_locks (name, token, until) VALUES (?, ?, ?)
    ON CONFLICT (name) DO UPDATE SET token = excluded.token, until = excluded.until
    WHERE card_locks.until <= ?"""
_TRIM_RECENT = """DELETE FROM recent WHERE key = ? AND seq NOT IN
    (SELECT seq FROM recent WHERE key = ? ORDER BY seq DESC LIMIT ?)"""
_SET_NOTE = """INSERT INTO notes (key, value, expires_at) VALUES (?, ?, ?)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"""
_NOTE = "SELECT value FROM notes WHERE key = ? AND expires_at > ?"
_TAKE_NOTE = "DELETE FROM notes WHERE key = ? RETURNING value, expires_at"
_PUT_RECORD = """INSERT INTO records (key, value) VALUES (?, ?)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value"""
_RECORDS_FROM = "SELECT key, value FROM records WHERE key >= ?"
_RECORDS_BELOW = " AND key < ?"
_TAKE = """UPDATE inbox SET worker = ?, lease_until = ?, attempts = attempts + 1
    WHERE seq IN (SELECT seq FROM inbox WHERE lease_until <= ? ORDER BY seq LIMIT ?)
    RETURNING seq, body, attempts"""
_TAKE_NEW = """UPDATE inbox SET worker = ?, lease_until = ?, attempts = attempts + 1
    WHERE seq IN (SELECT seq FROM inbox WHERE lease_until = 0 ORDER BY seq LIMIT ?)
    RETURNING seq, body, attempts"""
_VOTES = "SELECT voter FROM votes WHERE run_id = ? AND call_id = ? ORDER BY seq"
_SET_TIMER = """INSERT INTO timers (key, due, data) VALUES (?, ?, ?)
    ON CONFLICT (key) DO UPDATE SET due = excluded.due, data = excluded.data"""
_TAKE_DUE = """DELETE FROM timers
    WHERE key IN (SELECT key FROM timers WHERE due <= ? ORDER BY due LIMIT ?)
    RETURNING key, data, due"""


class SQLiteChatState:
    """The chat state in the store's file (on the store's connection), in tables of its
    own."""

    def __init__(self, url: str, store: Store) -> None:
        shared = getattr(store, "file", None)
        # The store's connection when it is the same file: one queue of writers.
        if isinstance(shared, SQLiteFile) and shared.path == database_path(url):
            self._file, self._owns_file = shared.share(_migrate), False
        else:
            self._file, self._owns_file = SQLiteFile(url, _migrate), True
        self._next_seen_sweep = 0.0
        self._next_note_sweep = 0.0
        self._intake = IntakeBatches(self._file)

    def card_lock(
        self, run_id: str, ask: str, *, wait: float = 30.0
    ) -> AbstractAsyncContextManager[None]:
        name = f"{run_id}:{ask}"

        async def take(token: str) -> bool:
            now = time.time()
            params = (name, token, now + CARD_LOCK_TTL, now)
            return await self._file.changes(_TAKE_CARD_LOCK, params) == 1

        async def give_back(token: str) -> None:
            sql = "DELETE FROM card_locks WHERE name = ? AND token = ?"
            await self._file.changes(sql, (name, token))

        return hold_lease(f"card {name}", wait, take=take, give_back=give_back)

    async def follow(self, thread_id: str) -> None:
        await self._file.changes(FOLLOW, (thread_id,))

    async def follows(self, thread_id: str) -> bool:
        sql = "SELECT 1 FROM followed_threads WHERE thread_id = ?"
        return bool(await self._file.fetch(sql, (thread_id,)))

    async def set_conversation_ref(self, thread_id: str, ref: dict[str, Any]) -> None:
        await self._file.changes(SET_REFERENCE, (thread_id, json.dumps(ref, ensure_ascii=False)))

    async def conversation_ref(self, thread_id: str) -> dict[str, Any] | None:
        sql = "SELECT reference FROM thread_refs WHERE thread_id = ?"
        rows = await self._file.fetch(sql, (thread_id,))
        return json_object(rows[0][0]) if rows else None

    async def set_card(self, run_id: str, ask: str, place: CardPlace) -> None:
        sql = """INSERT INTO cards (run_id, call_id, place) VALUES (?, ?, ?)
            ON CONFLICT (run_id, call_id) DO UPDATE SET place = excluded.place"""
        text = CARD_PLACE.dump_json(place).decode()
        await self._file.changes(sql, (run_id, ask, text))

    async def card_of(self, run_id: str, ask: str) -> CardPlace | None:
        sql = "SELECT place FROM cards WHERE run_id = ? AND call_id = ?"
        rows = await self._file.fetch(sql, (run_id, ask))
        return CARD_PLACE.validate_json(rows[0][0]) if rows else None

    async def add_vote(self, run_id: str, ask: str, voter: Person) -> list[Person]:
        insert = """INSERT OR IGNORE INTO votes (run_id, call_id, user_id, voter)
            VALUES (?, ?, ?, ?)"""
        params = (run_id, ask, voter.id, PERSON.dump_json(voter).decode())

        async def work(db: aiosqlite.Connection) -> list[Any]:
            await changes(db, insert, params)
            return list(await db.execute_fetchall(_VOTES, (run_id, ask)))

        rows = await self._file.run(work, transaction=True)
        return [PERSON.validate_json(row[0]) for row in rows]

    async def set_grant(self, thread_id: str, key: str, until: float, granted_by: str) -> None:
        sql = """INSERT INTO grants (thread_id, key, until, granted_by) VALUES (?, ?, ?, ?)
            ON CONFLICT (thread_id, key) DO UPDATE
            SET until = excluded.until, granted_by = excluded.granted_by"""
        await self._file.changes(sql, (thread_id, key, until, granted_by))

    async def grant(self, thread_id: str, key: str, now: float) -> str | None:
        sql = "SELECT granted_by FROM grants WHERE thread_id = ? AND key = ? AND until > ?"
        rows = await self._file.fetch(sql, (thread_id, key, now))
        return str(rows[0][0]) if rows else None

    async def revoke_grants(self, thread_id: str) -> int:
        return await self._file.changes("DELETE FROM grants WHERE thread_id = ?", (thread_id,))

    async def index_waiting(self, scope: str, names: Sequence[str], run_id: str) -> None:
        sql = "INSERT OR IGNORE INTO waiting_index (scope, name, run_id) VALUES (?, ?, ?)"

        async def work(db: aiosqlite.Connection) -> None:
            for name in names:
                await changes(db, sql, (scope, name, run_id))

        await self._file.run(work, transaction=True)

    async def waiting_for(self, scope: str, names: Sequence[str]) -> set[str]:
        if not names:
            return set()
        marks = ", ".join("?" * len(names))  # placeholders only: the names are parameters
        sql = f"SELECT DISTINCT run_id FROM waiting_index WHERE scope = ? AND name IN ({marks})"
        return {str(row[0]) for row in await self._file.fetch(sql, (scope, *names))}

    async def unindex_waiting(self, scope: str, names: Sequence[str], run_id: str) -> None:
        sql = "DELETE FROM waiting_index WHERE scope = ? AND name = ? AND run_id = ?"

        async def work(db: aiosqlite.Connection) -> None:
            for name in names:
                await changes(db, sql, (scope, name, run_id))

        await self._file.run(work, transaction=True)

    async def revoke_grant(self, thread_id: str, key: str) -> bool:
        sql = "DELETE FROM grants WHERE thread_id = ? AND key = ?"
        return await self._file.changes(sql, (thread_id, key)) > 0

    async def grants_given(self, granted_by: str, scope: str, now: float) -> list[tuple[str, str]]:
        # substr, not LIKE: a scope's own % and _ are not patterns.
        sql = """SELECT thread_id, key FROM grants WHERE granted_by = ? AND until > ?
            AND substr(thread_id, 1, length(?)) = ? ORDER BY thread_id, key"""
        rows = await self._file.fetch(sql, (granted_by, now, scope, scope))
        return [(str(row[0]), str(row[1])) for row in rows]

    async def set_note(self, key: str, value: str, *, ttl: float) -> None:
        now = time.time()
        if now >= self._next_note_sweep:  # lapsed notes would grow the file forever
            self._next_note_sweep = now + SEEN_SWEEP_INTERVAL
            await self._file.changes("DELETE FROM notes WHERE expires_at <= ?", (now,))
        await self._file.changes(_SET_NOTE, (key, value, now + ttl))

    async def note(self, key: str) -> str | None:
        rows = await self._file.fetch(_NOTE, (key, time.time()))
        return str(rows[0][0]) if rows else None

    async def take_note(self, key: str) -> str | None:
        async def work(db: aiosqlite.Connection) -> str | None:
            rows = list(await db.execute_fetchall(_TAKE_NOTE, (key,)))
            return str(rows[0][0]) if rows and float(rows[0][1]) > time.time() else None

        return await self._file.run(work, transaction=True)

    async def put_record(self, key: str, value: str) -> None:
        await self._file.changes(_PUT_RECORD, (key, value))

    async def record(self, key: str) -> str | None:
        rows = await self._file.fetch("SELECT value FROM records WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    async def drop_records(self, keys: Sequence[str]) -> int:
        async def work(db: aiosqlite.Connection) -> int:
            return sum(
                [
                    await changes(db, "DELETE FROM records WHERE key = ?", (key,))
                    for key in set(keys)
                ]
            )

        return await self._file.run(work, transaction=True)

    async def records(self, prefix: str) -> list[tuple[str, str]]:
        # A range of the primary key, not LIKE: a prefix's own % and _ are no patterns.
        above = least_above(prefix)
        if above is None:
            rows = await self._file.fetch(_RECORDS_FROM, (prefix,))
        else:
            rows = await self._file.fetch(_RECORDS_FROM + _RECORDS_BELOW, (prefix, above))
        return sorted((str(row[0]), str(row[1])) for row in rows)

    async def push_recent(self, key: str, item: str, *, keep: int) -> None:
        async def work(db: aiosqlite.Connection) -> None:
            await changes(db, "INSERT INTO recent (key, item) VALUES (?, ?)", (key, item))
            await changes(db, _TRIM_RECENT, (key, key, keep))

        await self._file.run(work, transaction=True)

    async def recent(self, key: str) -> list[str]:
        rows = await self._file.fetch(
            "SELECT item FROM recent WHERE key = ? ORDER BY seq DESC", (key,)
        )
        return [str(row[0]) for row in rows]

    async def set_timer(self, key: str, due: float, data: str) -> None:
        await self._file.changes(_SET_TIMER, (key, due, data))

    async def take_due(self, now: float, *, limit: int = 100) -> list[tuple[str, str]]:
        async def work(db: aiosqlite.Connection) -> list[Any]:
            return list(await db.execute_fetchall(_TAKE_DUE, (now, limit)))

        rows = await self._file.run(work, transaction=True)
        return [(key, data) for key, data, _ in sorted(rows, key=lambda r: r[2])]

    async def votes(self, run_id: str, ask: str) -> list[Person]:
        rows = await self._file.fetch(_VOTES, (run_id, ask))
        return [PERSON.validate_json(row[0]) for row in rows]

    async def enqueue(
        self, body: str, *, keys: Sequence[str], ttl: float, note: ThreadNote | None = None
    ) -> str | None:
        """The follow check, the claim, the insert and the note, in one write transaction
        with the deliveries handed in meanwhile (``IntakeBatches``)."""
        now = time.time()
        sweep = now >= self._next_seen_sweep
        if sweep:
            self._next_seen_sweep = now + SEEN_SWEEP_INTERVAL
        written = delivery(body, keys, ttl=ttl, note=note, now=now, sweep=sweep)
        return await self._intake.enqueue(written)

    async def take(
        self, worker: str, *, count: int, lease: float, take_over: bool = True
    ) -> list[IntakeEntry]:
        """One ``UPDATE ... RETURNING`` over the oldest free rows."""
        now = time.time()
        sql, params = (
            (_TAKE, (worker, now + lease, now, count))
            if take_over
            else (_TAKE_NEW, (worker, now + lease, count))
        )

        async def work(db: aiosqlite.Connection) -> list[Any]:
            return list(await db.execute_fetchall(sql, params))

        rows = sorted(await self._file.run(work, transaction=True))
        return [IntakeEntry(id=str(seq), body=body, attempts=n) for seq, body, n in rows]

    async def renew(self, worker: str, ids: Sequence[str], *, lease: float) -> None:
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        sql = f"UPDATE inbox SET lease_until = ? WHERE worker = ? AND seq IN ({marks})"
        await self._file.changes(sql, (time.time() + lease, worker, *(int(i) for i in ids)))

    async def release(self, worker: str, ids: Sequence[str]) -> None:
        await self.renew(worker, ids, lease=-time.time())  # a lease that ended in 1970

    async def done(self, entry_id: str) -> None:
        await self._file.changes("DELETE FROM inbox WHERE seq = ?", (int(entry_id),))

    async def forget(self, run_ids: Sequence[str], thread_ids: Sequence[str]) -> None:
        """Every pruned run's and thread's rows, in one write transaction."""
        rows = [
            *((sql, run_id) for run_id in run_ids for sql in _FORGET_RUN),
            *((sql, thread_id) for thread_id in thread_ids for sql in _FORGET_THREAD),
        ]
        if not rows:
            return

        async def work(db: aiosqlite.Connection) -> None:
            for sql, name in rows:
                await changes(db, sql, (name,))

        await self._file.run(work, transaction=True)

    async def close(self) -> None:
        if self._owns_file:  # a shared connection is the store's to close
            await self._file.close()


async def _migrate(db: aiosqlite.Connection) -> None:
    for statement in _SCHEMA:
        await db.execute(statement)
