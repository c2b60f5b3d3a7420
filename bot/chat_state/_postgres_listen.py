"""Word of new intake entries on PostgreSQL: one connection of its own that listens.

Each write to the intake queue sends a ``NOTIFY`` in its transaction
(``_postgres_intake``); on commit the server hands it to every connection that
``LISTEN``s on the channel. A pool's connection cannot listen (it is lent out, and
its session reset), so each process keeps one of its own, opened at the first
wait and made again whenever it fails. Word sent meanwhile is lost, and readers
make up for it by still looking now and then (``IntakeSignal``); after each
(re)connection the waiters are woken once, for what was written unheard.
"""

from __future__ import annotations

import asyncio
import logging

from psycopg import AsyncConnection, sql
from psycopg.rows import TupleRow

from ._postgres_intake import CHANNEL

log = logging.getLogger(__name__)

RETRY_FIRST = 0.25
RETRY_MAX = 5.0
"""Backoff between attempts to connect again (seconds)."""
CHECK_EVERY = 30.0
"""Seconds without word after which the connection is checked: a peer that vanished
(a host gone, a network cut) says nothing, and the connection would wait for ever."""
CHECK_TIMEOUT = 10.0
"""How long connecting, or a check, may take before the connection counts as lost."""


class Listener:
    """Wakes waiters when another process writes to (or hands back to) the intake queue.

    Args:
        conninfo: libpq's connection string (the pool's, ``PostgresDatabase.conninfo``).
        own: The payload of this process's own word, which it does not need.
    """

    def __init__(self, conninfo: str, *, own: str) -> None:
        self._conninfo = conninfo
        self._own = own
        self._heard = asyncio.Event()
        """Set when word comes, then replaced: each waiter waits on the one of its time."""
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._failures = 0
        """Connections lost in a row (the backoff's)."""

    async def wait(self) -> None:
        """Return at the next word (listening from the first call on). Never raises;
        once closed, it only waits (the intake's own look goes on)."""
        if not self._closed and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._listen(), name="postgres-intake-listen")
        await self._heard.wait()

    def _wake(self) -> None:
        self._heard.set()
        self._heard = asyncio.Event()

    async def _listen(self) -> None:
        """Listen until cancelled, connecting again after each failure, on a backoff
        that starts afresh only once a connection lived through a check."""
        self._failures = 0
        while True:
            try:
                async with asyncio.timeout(CHECK_TIMEOUT):
                    connection = await AsyncConnection.connect(self._conninfo, autocommit=True)
                async with connection:
                    async with asyncio.timeout(CHECK_TIMEOUT):
                        cursor = await connection.execute(f"SELECT {CHANNEL}")
                        row = await cursor.fetchone()
                        assert row is not None
                        listen = sql.SQL("LISTEN {}").format(sql.Identifier(str(row[0])))
                        await connection.execute(listen)
                    if self._failures:  # a state change: one line, as when it began
                        log.info("listening for intake entries again")
                    self._wake()  # for anything written while nobody listened
                    await self._hear(connection)
            except Exception as exc:  # whatever it is, listen again: never stop waking
                if not self._failures:
                    why = str(exc) or type(exc).__name__
                    log.warning("lost word of intake entries; looking now and then: %s", why)
                self._failures += 1
            await asyncio.sleep(min(RETRY_FIRST * 2 ** max(self._failures - 1, 0), RETRY_MAX))

    async def _hear(self, connection: AsyncConnection[TupleRow]) -> None:
        """Wake the waiters at each word from another process, until the connection fails."""
        while True:
            async for notify in connection.notifies(timeout=CHECK_EVERY):
                if notify.payload != self._own:
                    self._wake()
            async with asyncio.timeout(CHECK_TIMEOUT):
                await connection.execute("SELECT 1")
            self._failures = 0  # it lived through a check: a failure now starts afresh

    async def close(self) -> None:
        """Stop listening and close the connection, for good."""
        self._closed = True
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            await asyncio.wait({task})  # its end; a cancel of our own still comes through
