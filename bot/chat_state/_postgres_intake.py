"""Intake writes on PostgreSQL, batched, and the word they send the other replicas.

As on SQLite (``_sqlite_intake``), deliveries that arrive while a write is under
way go together in the next: one transaction of a handful of statements for the
whole batch, whatever its size, as writing them one by one would decide
(``_deliveries.accept``). Unlike SQLite's, replicas write at once: the transaction
first locks the rows of its batch's dedupe keys (made, as lapsed claims, where
missing), so of two copies written on two replicas at once the second waits for
the first and sees its claim. Every transaction takes its locks in one order (the
keys, then the threads, each sorted), so two batches never wait for each other in
a circle. Its last statement is a ``NOTIFY``, sent on commit, that wakes the
other replicas' workers (``_postgres_listen``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from ._batches import Batches, each_alone_on
from ._deliveries import Delivery, accept

Connection = AsyncConnection[TupleRow]
Transaction = Callable[[], AbstractAsyncContextManager[Connection]]
"""A connection in a transaction of its own, committed on exit."""

CHANNEL = "'approval_intake_' || to_hex(hashtext(current_schema()))"
"""The intake queue's ``NOTIFY`` channel, as SQL: one per schema, so deployments that
share a database do not wake each other (two schemas whose hashes meet only cost a
look). Writers and the listener compute it on the server alike."""
NOTIFY = f"SELECT pg_notify({CHANNEL}, %s)"
"""Word of entries written or handed back (sent on commit); its payload names the
process, which knows already."""

FOLLOW = """INSERT INTO followed_threads (thread_id) SELECT unnest(%s::text[])
    ON CONFLICT DO NOTHING"""
SET_REFERENCES = """INSERT INTO thread_refs (thread_id, reference)
    SELECT * FROM unnest(%s::text[], %s::text[])
    ON CONFLICT (thread_id) DO UPDATE SET reference = excluded.reference"""
# Lapsed claims, but none a writer holds: a sweep never waits, nor makes anyone wait.
SWEEP_SEEN = """DELETE FROM seen WHERE key IN
    (SELECT key FROM seen WHERE expires_at <= %s FOR UPDATE SKIP LOCKED)"""
_FOLLOWED = "SELECT thread_id FROM followed_threads WHERE thread_id = ANY(%s)"
# Each key's row, made (as lapsed) if missing, locked until the transaction ends.
_HOLD_CLAIMS = """INSERT INTO seen (key, expires_at)
    SELECT key, 0 FROM unnest(%s::text[]) AS key ORDER BY key COLLATE "C"
    ON CONFLICT (key) DO UPDATE SET expires_at = seen.expires_at
    RETURNING key, expires_at"""
_CLAIM = """INSERT INTO seen (key, expires_at) SELECT * FROM unnest(%s::text[], %s::float8[])
    ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at"""
# Numbered in the order given: rows are inserted as the ordered SELECT yields them.
_INSERT = """INSERT INTO inbox (body)
    SELECT body FROM unnest(%s::text[]) WITH ORDINALITY AS given (body, n) ORDER BY n
    RETURNING seq"""

ONE_BY_ONE = (
    psycopg.DataError,
    psycopg.IntegrityError,
    psycopg.errors.LockNotAvailable,
    UnicodeError,
)
"""Errors that may be one delivery's own (a value PostgreSQL refuses, such as text
with a NUL; a dedupe key a stalled replica holds locked): its batch is then written
again one by one, so it fails alone. Others (a lost connection, a server away) fail
every write alike, and are every caller's."""


class IntakeBatches:
    """Writes deliveries to the intake queue, in batches of those that arrive together.

    Args:
        transaction: Opens a transaction (the chat state's schema up to date).
        token: This process's name in the word its writes send.
    """

    def __init__(self, transaction: Transaction, *, token: str) -> None:
        self._transaction = transaction
        self._token = token
        # Deferred: a burst's first delivery would otherwise go alone, its round trips
        # before the rest (as Redis's intake script, ``BatchedScript``).
        self._batches = Batches(self._alone, self._together, name="postgres-intake", defer=True)

    async def enqueue(self, delivery: Delivery) -> str | None:
        """Write ``delivery``: its entry id, or ``None`` (a copy, or a reply in a thread
        not followed)."""
        return await self._batches(delivery)

    async def _alone(self, delivery: Delivery) -> str | None:
        (entry_id,) = await self._write([delivery])
        return entry_id

    async def _write(self, deliveries: Sequence[Delivery]) -> list[str | None]:
        async with self._transaction() as connection:
            return await write(connection, deliveries, token=self._token)

    async def _together(self, deliveries: list[Delivery]) -> list[str | Exception | None]:
        return await each_alone_on(ONE_BY_ONE, self._write, self._alone, deliveries)


async def write(
    connection: Connection, deliveries: Sequence[Delivery], *, token: str
) -> list[str | None]:
    """Write ``deliveries`` in order, in the transaction ``connection`` is in: each one's
    entry id, or ``None``. A few statements for them all, whatever their number."""
    watched = sorted({d.note.thread_id for d in deliveries if d.note and d.note.only_if_followed})
    followed: set[str] = set()
    if watched:
        cursor = await connection.execute(_FOLLOWED, (watched,))
        followed = {str(row[0]) for row in await cursor.fetchall()}
    keys = sorted({key for d in deliveries for key in d.keys})
    claims: dict[str, float] = {}
    if keys:  # before any sweep: a claim lapses per delivery
        cursor = await connection.execute(_HOLD_CLAIMS, (keys,))
        claims = {str(key): float(until) for key, until in await cursor.fetchall()}
    sweep = [d.now for d in deliveries if d.sweep]
    if sweep:
        await connection.execute(SWEEP_SEEN, (max(sweep),))
    taken = accept(deliveries, followed, claims)
    accepted = [d for d, took in zip(deliveries, taken, strict=True) if took]
    if not accepted:
        return [None] * len(deliveries)
    claimed = {key: d.expires_at for d in accepted for key in d.keys}
    if claimed:
        await connection.execute(_CLAIM, (list(claimed), list(claimed.values())))
    cursor = await connection.execute(_INSERT, ([d.body for d in accepted],))
    entry_ids = iter(sorted(int(row[0]) for row in await cursor.fetchall()))
    follows = sorted({d.note.thread_id for d in accepted if d.note and d.note.follow})
    if follows:
        await connection.execute(FOLLOW, (follows,))
    references = sorted(
        {
            d.note.thread_id: d.reference
            for d in accepted
            if d.note is not None and d.reference is not None
        }.items()
    )
    if references:
        threads, texts = zip(*references, strict=True)
        await connection.execute(SET_REFERENCES, (list(threads), list(texts)))
    await connection.execute(NOTIFY, (token,))
    return [str(next(entry_ids)) if took else None for took in taken]
