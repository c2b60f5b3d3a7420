"""Intake writes on SQLite, batched: deliveries that arrive together are written together.

A delivery's write is a few statements (the follow check, the dedupe claim, the
insert, the thread's marks), and each statement is a hop to the connection's
thread: a burst of deliveries written one by one waits for hundreds of hops in a
row, and every ack behind them. Instead (``Batches``), a delivery that finds no
write under way is written at once, alone, and those that arrive while one is go
together in the next: a handful of statements for the whole batch, in one
savepoint of the file's group commit; each caller is answered once the
transaction holding its row is committed, as writing them one by one would
(``_deliveries.accept``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import partial
from typing import Any

import aiosqlite

from agents.stores import SQLiteFile

from ._batches import Batches, each_alone_on
from ._deliveries import Delivery, accept

FOLLOW = "INSERT OR IGNORE INTO followed_threads (thread_id) VALUES (?)"
SET_REFERENCE = """INSERT INTO thread_refs (thread_id, reference) VALUES (?, ?)
    ON CONFLICT (thread_id) DO UPDATE SET reference = excluded.reference"""
MARK_SEEN = """INSERT INTO seen (key, expires_at) VALUES (?, ?)
    ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at
    WHERE seen.expires_at <= ?"""
SWEEP_SEEN = "DELETE FROM seen WHERE expires_at <= ?"

CHUNK = 500
"""Values bound to one statement at most (SQLite allows 32766; a batch is rarely so big)."""
ONE_BY_ONE = (
    sqlite3.IntegrityError,
    sqlite3.DataError,
    sqlite3.InterfaceError,
    sqlite3.ProgrammingError,
)
"""Errors that may be one delivery's own (a value SQLite refuses): its batch is then
written again one by one, so it fails alone. Others (a locked, busy or failing file)
fail every write alike, and are every caller's at once."""


class IntakeBatches:
    """Writes deliveries to the intake queue, in batches of those that arrive together."""

    def __init__(self, file: SQLiteFile) -> None:
        self._file = file
        self._batches = Batches(self._alone, self._together, name="sqlite-intake")

    async def enqueue(self, delivery: Delivery) -> str | None:
        """Write ``delivery``: its entry id, or ``None`` (a copy, or a reply in a thread
        not followed)."""
        return await self._batches(delivery)

    async def _alone(self, delivery: Delivery) -> str | None:
        (entry_id,) = await self._file.grouped(partial(write, deliveries=[delivery]))
        return entry_id

    async def _together(self, deliveries: list[Delivery]) -> list[str | Exception | None]:
        return await each_alone_on(ONE_BY_ONE, self._all, self._alone, deliveries)

    async def _all(self, deliveries: list[Delivery]) -> list[str | None]:
        return list(await self._file.grouped(partial(write, deliveries=deliveries)))


async def write(db: aiosqlite.Connection, deliveries: Sequence[Delivery]) -> list[str | None]:
    """Write ``deliveries`` in order, in the transaction ``db`` is in: each one's entry id,
    or ``None``. A few statements for them all, whatever their number."""
    watched = {d.note.thread_id for d in deliveries if d.note and d.note.only_if_followed}
    followed = await _followed(db, sorted(watched))
    keys = sorted({key for d in deliveries for key in d.keys})
    claims = await _claims(db, keys)  # before any sweep: a claim lapses per delivery
    for d in deliveries:
        if d.sweep:
            await db.execute(SWEEP_SEEN, (d.now,))
    taken = accept(deliveries, followed, claims)
    accepted = [d for d, took in zip(deliveries, taken, strict=True) if took]
    if not accepted:
        return [None] * len(deliveries)
    claimed = [(key, d.expires_at, d.now) for d in accepted for key in d.keys]
    if claimed:
        await db.executemany(MARK_SEEN, claimed)
    entry_ids = iter(await _insert(db, [d.body for d in accepted]))
    follows = [(d.note.thread_id,) for d in accepted if d.note and d.note.follow]
    if follows:
        await db.executemany(FOLLOW, follows)
    references = [
        (d.note.thread_id, d.reference) for d in accepted if d.note and d.reference is not None
    ]
    if references:
        await db.executemany(SET_REFERENCE, references)
    return [next(entry_ids) if took else None for took in taken]


async def _followed(db: aiosqlite.Connection, threads: list[str]) -> set[str]:
    """Which of ``threads`` the bot follows."""
    found: set[str] = set()
    for part in _chunks(threads):
        marks = ",".join("?" * len(part))  # placeholders only: the ids are parameters
        sql = f"SELECT thread_id FROM followed_threads WHERE thread_id IN ({marks})"
        found.update(str(row[0]) for row in await db.execute_fetchall(sql, part))
    return found


async def _claims(db: aiosqlite.Connection, keys: list[str]) -> dict[str, float]:
    """Until when each of ``keys`` that has a claim is claimed (lapsed ones included)."""
    found: dict[str, float] = {}
    for part in _chunks(keys):
        marks = ",".join("?" * len(part))
        sql = f"SELECT key, expires_at FROM seen WHERE key IN ({marks})"
        found.update(
            (str(key), float(until)) for key, until in await db.execute_fetchall(sql, part)
        )
    return found


async def _insert(db: aiosqlite.Connection, bodies: list[str]) -> list[str]:
    """Append ``bodies`` to the inbox, in order; their entry ids.

    One ``INSERT`` of many rows numbers them in the order given (the rows of a
    ``VALUES`` list are inserted in order, and we hold the write lock), so the ids
    in ascending order are the bodies'.
    """
    ids: list[str] = []
    for part in _chunks(bodies):
        values = ",".join(["(?)"] * len(part))
        rows = await db.execute_fetchall(
            f"INSERT INTO inbox (body) VALUES {values} RETURNING seq", part
        )
        ids += [str(seq) for seq in sorted(int(row[0]) for row in rows)]
    return ids


def _chunks(values: list[Any]) -> list[list[Any]]:
    return [values[i : i + CHUNK] for i in range(0, len(values), CHUNK)]
