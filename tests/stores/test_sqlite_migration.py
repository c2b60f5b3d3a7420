"""An SQLite file written by the previous schema opens, migrated, with nothing lost."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import timedelta
from pathlib import Path

from agents.snapshot import dump_snapshot, utcnow
from agents.stores.sqlite import SCHEMA_VERSION, SQLiteStore

from ._snapshots import paused_run

# The runs table and indexes as version 1 created them.
VERSION_1 = (
    """CREATE TABLE runs (run_id TEXT PRIMARY KEY, revision INTEGER NOT NULL, thread_id TEXT,
        status TEXT NOT NULL, is_root INTEGER NOT NULL, next_expiry REAL,
        in_flight INTEGER NOT NULL, created_at REAL NOT NULL, snapshot TEXT NOT NULL)""",
    """CREATE INDEX runs_paused_by_thread ON runs (thread_id, created_at)
        WHERE is_root = 1 AND status = 'paused'""",
    """CREATE INDEX runs_paused_by_expiry ON runs (next_expiry)
        WHERE is_root = 1 AND status = 'paused'""",
    "CREATE INDEX runs_in_flight ON runs (created_at) WHERE is_root = 1 AND in_flight = 1",
    "CREATE TABLE history (seq INTEGER PRIMARY KEY, thread_id TEXT NOT NULL, message TEXT)",
    "CREATE TABLE audit (seq INTEGER PRIMARY KEY, run_id TEXT NOT NULL, thread_id TEXT,"
    " entry TEXT NOT NULL)",
    "CREATE TABLE locks (name TEXT PRIMARY KEY, token TEXT NOT NULL, expires_at REAL NOT NULL)",
    "PRAGMA user_version = 1",
)


async def test_a_version_1_file_is_migrated_and_its_waiting_runs_are_found(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    waiting = paused_run(expires_at=utcnow() + timedelta(hours=1)).model_copy(
        update={"revision": 1}
    )
    child = paused_run(parent_run_id=waiting.run_id).model_copy(update={"revision": 1})
    with closing(sqlite3.connect(path)) as conn:
        for statement in VERSION_1:
            conn.execute(statement)
        for snap in (waiting, child):
            expiry = snap.next_expiry()
            conn.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    snap.run_id,
                    1,
                    snap.thread_id,
                    snap.status,
                    int(snap.is_root),
                    expiry.timestamp() if expiry else None,
                    int(snap.in_flight),
                    snap.created_at.timestamp(),
                    dump_snapshot(snap),
                ),
            )
        conn.commit()

    store = SQLiteStore(f"sqlite:///{path}")
    try:
        assert await store.paused_runs(waiting.thread_id or "") == [waiting.run_id]
        later = utcnow() + timedelta(days=2)
        assert await store.runs_expiring(later) == [waiting.run_id]
        assert await store.load_run(waiting.run_id) == waiting
        saved = await store.save_run(waiting.model_copy(update={"status": "finished"}))
        assert saved.revision == 2
        assert await store.paused_runs(waiting.thread_id or "") == []
    finally:
        await store.close()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
