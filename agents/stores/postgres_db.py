"""One PostgreSQL database as the bot uses it: a pool of connections (``psycopg`` 3,
async, ``psycopg-pool``) and schemas kept by versioned migrations.

The URL is libpq's (``postgresql://user:pass@host:5432/db``, or ``postgres://``); its
query parameters go to libpq as they are (``sslmode``, ``sslrootcert``,
``connect_timeout``, ...), except the bot's own:

- ``pool_size``: connections at most (default ``POOL_SIZE``);
- ``statement_timeout``: milliseconds a statement may run (default
  ``STATEMENT_TIMEOUT_MS``; ``0``: no limit).

Each component (the runtime's store, the chat state) keeps its own schema version in
``schema_versions`` and brings it up to date at its first use, under a transaction-wide
advisory lock: replicas starting at once apply each migration once. A database a newer
version of the bot migrated stops this one with a clear error (``SchemaTooNew``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from psycopg import AsyncConnection, OperationalError
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

log = logging.getLogger(__name__)

T = TypeVar("T")
Work = Callable[[AsyncConnection[TupleRow]], Awaitable[T]]
"""What runs on one connection (``PostgresDatabase.run``)."""

POOL_SIZE = 10
"""Connections one process keeps at most (``?pool_size=``)."""
STATEMENT_TIMEOUT_MS = 30_000
"""How long a statement may run before the server cancels it (``?statement_timeout=``)."""
IDLE_IN_TRANSACTION_MS = 60_000
"""A session left inside a transaction this long (a replica stalled mid-write) is ended
by the server, so its row locks hold nobody else up for longer."""
SCHEMES = ("postgresql", "postgres")

# A constant key for the migrations' advisory lock (any 64-bit number the bot owns).
_MIGRATION_LOCK = 0x61707072_6F76616C  # "approval"

_VERSIONS = """CREATE TABLE IF NOT EXISTS schema_versions (
    component text PRIMARY KEY,
    version integer NOT NULL
)"""

Migration = Sequence[str]
"""The statements that take a schema from one version to the next."""


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer version of the bot than this one."""


def split_url(url: str) -> tuple[str, int, int]:
    """libpq's URL without the bot's own parameters, the pool size and the statement
    timeout (ms).

    Raises:
        ValueError: A parameter of the bot's that is not a whole number.
    """
    parts = urlsplit(url)
    own = {"pool_size": POOL_SIZE, "statement_timeout": STATEMENT_TIMEOUT_MS}
    kept: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in own:
            try:
                own[key] = int(value)
            except ValueError:
                raise ValueError(f"{key}={value!r}: a whole number") from None
        else:
            kept.append((key, value))
    if own["pool_size"] < 1 or own["statement_timeout"] < 0:
        raise ValueError("pool_size must be 1 or more, statement_timeout 0 or more")
    # The server's own settings go in libpq's ``options``, beside any the URL has.
    timeout = (
        f"-c statement_timeout={own['statement_timeout']}"
        f" -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
    )
    given = [value for key, value in kept if key == "options"]
    kept = [(key, value) for key, value in kept if key != "options"]
    kept.append(("options", " ".join([*given, timeout])))
    scheme = "postgresql" if parts.scheme in SCHEMES else parts.scheme
    query = urlencode(kept, quote_via=quote)  # libpq reads %20 as a space, not +
    libpq = urlunsplit((scheme, parts.netloc, parts.path, query, parts.fragment))
    return libpq, own["pool_size"], own["statement_timeout"]


class PostgresDatabase:
    """A database's connection pool, opened at first use, and its components' schemas.

    Args:
        url: The database's URL (see the module's docstring).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.conninfo, self.pool_size, self.statement_timeout = split_url(url)
        self.host = urlsplit(url).hostname or "localhost"
        self._pool: AsyncConnectionPool[AsyncConnection[TupleRow]] | None = None
        self._opening = asyncio.Lock()
        self._schemas: dict[str, int] = {}
        """The components brought up to date by this process, and their versions."""

    async def pool(self) -> AsyncConnectionPool[AsyncConnection[TupleRow]]:
        """The pool, opened (and its first connection made) on the first call."""
        if self._pool is None:
            async with self._opening:
                if self._pool is None:
                    pool: AsyncConnectionPool[AsyncConnection[TupleRow]] = AsyncConnectionPool(
                        self.conninfo,
                        min_size=1,
                        max_size=self.pool_size,
                        kwargs={"autocommit": True},
                        open=False,
                        name="approval-bot",
                    )
                    await pool.open(wait=True, timeout=10.0)
                    self._pool = pool
        return self._pool

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection[TupleRow]]:
        """A connection of the pool (autocommit: each statement is its own transaction
        unless the caller opens one with ``connection.transaction()``)."""
        pool = await self.pool()
        async with pool.connection() as connection:
            yield connection

    async def run(self, work: Work[T], *, transaction: bool = False) -> T:
        """``work`` on a connection of the pool (in one transaction if ``transaction``),
        once more on a fresh connection when the one it got turns out broken (the
        server restarted, or ended that backend: ``pg_terminate_backend``). A broken
        connection's transaction never committed, so the retry is the only one; in the
        rare case the server committed and then the connection broke before saying so,
        the retry meets what the first did (a save's compare-and-set refuses it)."""
        for attempt in range(2):
            connection: AsyncConnection[TupleRow] | None = None
            try:
                async with self.connection() as connection:
                    if not transaction:
                        return await work(connection)
                    async with connection.transaction():
                        return await work(connection)
            except OperationalError:
                if attempt or connection is None or not connection.broken:
                    raise
                log.info("a pooled connection to %s was broken; once more", self.host)
        raise AssertionError("unreachable")

    async def migrate(self, component: str, migrations: Sequence[Migration]) -> int:
        """Bring ``component``'s schema to version ``len(migrations)``, once per process
        (each step and the version it reaches in one transaction, under the advisory
        lock); its version.

        Raises:
            SchemaTooNew: A newer bot migrated it further than this code knows.
        """
        if component in self._schemas:
            return self._schemas[component]
        target = len(migrations)
        async with self.connection() as connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            await connection.execute(_VERSIONS)
            cursor = await connection.execute(
                "SELECT version FROM schema_versions WHERE component = %s", (component,)
            )
            row = await cursor.fetchone()
            version = int(row[0]) if row is not None else 0
            if version > target:
                raise SchemaTooNew(
                    f"the database's {component} schema is version {version}; this bot knows"
                    f" up to {target}: run the version of the bot that migrated it, or newer"
                )
            for step in migrations[version:]:
                for statement in step:
                    await connection.execute(statement)
            if version < target:
                await connection.execute(
                    """INSERT INTO schema_versions (component, version) VALUES (%s, %s)
                        ON CONFLICT (component) DO UPDATE SET version = excluded.version""",
                    (component, target),
                )
        self._schemas[component] = target
        return target

    async def versions(self) -> dict[str, int]:
        """Each component's schema version in the database (``python -m bot check``)."""
        async with self.connection() as connection:
            await connection.execute(_VERSIONS)
            cursor = await connection.execute("SELECT component, version FROM schema_versions")
            return {str(name): int(version) for name, version in await cursor.fetchall()}

    async def ping(self) -> bool:
        """Whether the server answers a query."""
        try:
            async with self.connection() as connection:
                await connection.execute("SELECT 1")
        except Exception:
            return False
        return True

    async def close(self) -> None:
        """Close the pool; the next use opens a new one."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
