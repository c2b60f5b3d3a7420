"""The ops database: a real SQLite file the example tools read and change.

Tools run each database operation as one short transaction in a worker thread
(``await db.run(fn, ...)``), so the event loop that serves chat traffic never
blocks on disk. The file is created and seeded once; after that it keeps what
the agents did, across restarts.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_DB_PATH = Path("data/ops.db")
"""Where the database lives unless ``OPS_DB_PATH`` or ``db_path`` says otherwise."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS users (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL,
    team TEXT NOT NULL, status TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
    id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id),
    kind TEXT NOT NULL, summary TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS deleted_records (
    tool_call_id TEXT PRIMARY KEY,  -- idempotency key: one deletion per tool call
    id TEXT NOT NULL, user_id TEXT NOT NULL, kind TEXT NOT NULL, summary TEXT NOT NULL,
    requested_by TEXT, deleted_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS services (name TEXT PRIMARY KEY, description TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS deployments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    service TEXT NOT NULL REFERENCES services(name),
    environment TEXT NOT NULL, version TEXT NOT NULL,
    tool_call_id TEXT UNIQUE,  -- idempotency key: one deployment per tool call
    requested_by TEXT, deployed_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS orders (
    id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id),
    total_cents INTEGER NOT NULL, currency TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS refunds (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id TEXT NOT NULL REFERENCES orders(id),
    amount_cents INTEGER NOT NULL,
    tool_call_id TEXT UNIQUE,  -- idempotency key: one refund per tool call
    requested_by TEXT, refunded_at TEXT NOT NULL
);
"""

SEED_USERS = [
    ("12345", "Ada Lovelace", "ada@example.com", "platform", "active"),
    ("42", "Arthur Dent", "arthur@example.com", "support", "active"),
    ("7", "Grace Hopper", "grace@example.com", "billing", "suspended"),
]
SEED_RECORDS = [
    ("abc-123", "12345", "support-ticket", "Cannot log in after a password reset"),
    ("abc-124", "12345", "invoice", "Invoice for March"),
    ("def-456", "42", "support-ticket", "Towel missing from order A-1002"),
    ("ghi-789", "7", "audit-note", "Account suspended after a chargeback"),
]
SEED_SERVICES = [
    ("api", "Public REST API"),
    ("web", "Customer web app"),
    ("worker", "Background job runner"),
]
SEED_DEPLOYMENTS = [
    ("api", "staging", "1.4.1"),
    ("api", "production", "1.4.0"),
    ("web", "staging", "2.3.0"),
    ("web", "production", "2.3.0"),
    ("worker", "staging", "0.9.1"),
    ("worker", "production", "0.9.0"),
]
SEED_ORDERS = [
    ("A-1001", "12345", 24900, "USD"),
    ("A-1002", "42", 8000, "USD"),
    ("A-1003", "7", 120000, "USD"),
]


def default_db_path() -> Path:
    """``OPS_DB_PATH`` if set, else ``data/ops.db`` (relative to the working directory)."""
    return Path(os.environ.get("OPS_DB_PATH") or DEFAULT_DB_PATH)


def now() -> str:
    """The current time as stored in the database (ISO 8601, UTC, seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


class OpsDatabase:
    """The example's SQLite file: schema, one-time seed and transactions.

    Open it with ``OpsDatabase.open(path)``; run work with ``await db.run(fn, *args)``
    where ``fn(conn, *args)`` does the SQL.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def open(cls, path: str | Path | None = None) -> OpsDatabase:
        """Create the file, its tables and its seed data if they are missing.

        Done synchronously at build time: it takes milliseconds, and a bad path
        then fails at startup rather than in the middle of a conversation.
        """
        db = cls(Path(path) if path is not None else default_db_path())
        db.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(_connect(db.path)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writer
            conn.executescript(SCHEMA)
            _transaction(conn, _seed_once)
        return db

    async def run(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Run ``fn(conn, *args, **kwargs)`` as one transaction in a worker thread."""

        def work() -> T:
            with closing(_connect(self.path)) as conn:
                return _transaction(conn, fn, *args, **kwargs)

        return await asyncio.to_thread(work)


def _connect(path: Path) -> sqlite3.Connection:
    # Autocommit mode: transactions are explicit (see ``_transaction``).
    conn = sqlite3.connect(path, timeout=10, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _transaction(
    conn: sqlite3.Connection,
    fn: Callable[Concatenate[sqlite3.Connection, P], T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    # IMMEDIATE takes the write lock up front, so a check-then-write (the refund
    # limit, an idempotency key) cannot interleave with another process's.
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn, *args, **kwargs)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


def _seed_once(conn: sqlite3.Connection) -> None:
    # A marker row rather than "is the table empty?": once the agents have
    # deleted every record, the seed must still not come back.
    marker = conn.execute("INSERT OR IGNORE INTO meta VALUES ('seeded_at', ?)", (now(),))
    if marker.rowcount == 0:
        return
    conn.executemany("INSERT INTO users VALUES (?, ?, ?, ?, ?)", SEED_USERS)
    conn.executemany("INSERT INTO records VALUES (?, ?, ?, ?)", SEED_RECORDS)
    conn.executemany("INSERT INTO services VALUES (?, ?)", SEED_SERVICES)
    conn.executemany(
        "INSERT INTO deployments (service, environment, version, deployed_at) VALUES (?, ?, ?, ?)",
        [(*row, now()) for row in SEED_DEPLOYMENTS],
    )
    conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", SEED_ORDERS)
