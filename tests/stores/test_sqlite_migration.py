"""An SQLite file written by the previous schema opens, migrated, with nothing lost."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest

from agents.chain import walk
from agents.snapshot import AuditEntry, dump_snapshot, utcnow
from agents.stores.sqlite import SCHEMA_VERSION, SQLiteStore
from bot import open_chat_state

from ._snapshots import paused_run, unlinked
from .test_prune import prune_now

# Version 1 of the schema, verbatim as that release created it.
VERSION_1 = (
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        revision INTEGER NOT NULL,
        thread_id TEXT,
        status TEXT NOT NULL,
        is_root INTEGER NOT NULL,
        next_expiry REAL,
        in_flight INTEGER NOT NULL,
        created_at REAL NOT NULL,
        snapshot TEXT NOT NULL
    )""",
    # Partial indexes: only root runs a person or the recovery sweep cares about.
    """CREATE INDEX runs_paused_by_thread ON runs (thread_id, created_at)
        WHERE is_root = 1 AND status = 'paused'""",
    """CREATE INDEX runs_paused_by_expiry ON runs (next_expiry)
        WHERE is_root = 1 AND status = 'paused'""",
    "CREATE INDEX runs_in_flight ON runs (created_at) WHERE is_root = 1 AND in_flight = 1",
    """CREATE TABLE history (
        seq INTEGER PRIMARY KEY,
        thread_id TEXT NOT NULL,
        message TEXT NOT NULL
    )""",
    "CREATE INDEX history_by_thread ON history (thread_id, seq)",
    "CREATE TABLE seen (key TEXT PRIMARY KEY, expires_at REAL NOT NULL)",
    "CREATE INDEX seen_by_expiry ON seen (expires_at)",
    "CREATE TABLE thread_refs (thread_id TEXT PRIMARY KEY, reference TEXT NOT NULL)",
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
    """CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
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
        conn.execute("INSERT INTO seen VALUES ('slack:event:Ev1', 9e12)")
        conn.execute("INSERT INTO thread_refs VALUES ('teams:t:c:r', '{\"id\": 1}')")
        conn.commit()

    store = SQLiteStore(f"sqlite:///{path}")
    try:
        assert await store.paused_runs(waiting.thread_id or "") == [waiting.run_id]
        assert await store.thread_runs(waiting.thread_id or "") == [waiting.run_id]
        later = utcnow() + timedelta(days=2)
        assert await store.runs_expiring(later) == [waiting.run_id]
        assert await store.load_run(waiting.run_id) == waiting
        saved = await store.save_run(waiting.model_copy(update={"status": "finished"}))
        assert saved.revision == 2
        assert await store.paused_runs(waiting.thread_id or "") == []
        chat = open_chat_state(store)
        assert await chat.enqueue("copy", keys=["slack:event:Ev1"], ttl=60) is None
        assert await chat.conversation_ref("teams:t:c:r") == {"id": 1}
        await chat.close()
    finally:
        await store.close()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 8


async def test_a_version_3_file_gains_the_index_of_a_threads_live_runs(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    store = SQLiteStore(f"sqlite:///{path}")
    waiting = await store.save_run(paused_run())
    await store.close()
    with closing(sqlite3.connect(path)) as conn:
        back_to_version_4(conn)
        conn.execute("DROP INDEX runs_live_by_thread")
        conn.execute("PRAGMA user_version = 3")
        conn.commit()

    store = SQLiteStore(f"sqlite:///{path}")
    try:
        assert await store.thread_runs(waiting.thread_id or "") == [waiting.run_id]
    finally:
        await store.close()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT run_id FROM runs"
            " WHERE (paused = 1 OR in_flight = 1) AND thread_id = ? ORDER BY created_at, rowid",
            ("t",),
        ).fetchall()
        assert "runs_live_by_thread" in " ".join(str(row) for row in plan)


def back_to_version_7(conn: sqlite3.Connection) -> None:
    """Undo version 8 in a file this code wrote: the chain's head is kept nowhere apart."""
    for trigger in (
        "audit_head_one_row",
        "audit_head_only_grows",
        "audit_head_kept",
        "audit_moves_head",
    ):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE audit_head")
    conn.execute("PRAGMA user_version = 7")


async def test_a_version_7_file_keeps_its_chain_and_its_head_from_then_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v7.db"
    store = SQLiteStore(f"sqlite:///{path}")
    entry = AuditEntry(event="approved", run_id="run-a", tool_call_id="c", tool_name="refund")
    for _ in range(3):
        await store.append_audit(entry)
    await store.close()
    with closing(sqlite3.connect(path)) as conn:
        back_to_version_7(conn)
        conn.commit()

    store = SQLiteStore(f"sqlite:///{path}")
    try:
        ((chain),) = await store.audit_chains()
        report = walk(chain.lines, chain.anchor)
        assert report.finding is None
        assert chain.head == report.head
        assert chain.head is not None
        assert chain.head.seq == 3
        await store.append_audit(entry)
        ((chain),) = await store.audit_chains()
        assert chain.head == walk(chain.lines).head
        assert chain.head is not None
        assert chain.head.seq == 4
    finally:
        await store.close()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE audit_head SET seq = 1")


def back_to_version_5(conn: sqlite3.Connection) -> None:
    """Undo versions 8 to 6 in a file this code wrote: the audit log is append-only again."""
    back_to_version_7(conn)
    for trigger in (
        "audit_horizon_one_row",
        "audit_horizon_only_grows",
        "audit_horizon_kept",
        "audit_no_delete",
        "audit_no_replace",
        "audit_after_horizon",
    ):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE audit_horizon")
    conn.execute(
        """CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END"""
    )
    conn.execute("PRAGMA user_version = 5")


def back_to_version_4(conn: sqlite3.Connection) -> None:
    """Undo versions 6 and 5 in a file this code wrote: their columns and indexes go."""
    back_to_version_5(conn)
    for index in ("runs_done_by_change", "runs_by_root", "runs_roots_by_thread"):
        conn.execute(f"DROP INDEX {index}")
    conn.execute("ALTER TABLE runs DROP COLUMN updated_at")
    conn.execute("ALTER TABLE runs DROP COLUMN root_run_id")
    conn.execute("PRAGMA user_version = 4")


async def test_a_version_4_file_prunes_its_old_finished_runs_by_their_snapshots(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v4.db"
    store = SQLiteStore(f"sqlite:///{path}")
    root = await store.save_run(paused_run().model_copy(update={"status": "finished"}))
    child = paused_run(parent_run_id=root.run_id).model_copy(
        update={"root_run_id": root.run_id, "status": "finished"}
    )
    await store.save_run(child)
    waiting = await store.save_run(paused_run())
    await store.close()
    with closing(sqlite3.connect(path)) as conn:
        back_to_version_4(conn)
        conn.commit()

    store = SQLiteStore(f"sqlite:///{path}")
    try:
        assert (await store.prunable(utcnow() - timedelta(minutes=1))).run_ids == ()
        pruned = await prune_now(store, utcnow() + timedelta(seconds=1))
        assert sorted(pruned.run_ids) == sorted([root.run_id, child.run_id])
        assert await store.load_run(waiting.run_id) is not None
    finally:
        await store.close()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


async def test_a_version_5_file_keeps_its_audit_log_and_may_prune_only_its_start(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v5.db"
    store = SQLiteStore(f"sqlite:///{path}")
    old = AuditEntry(
        at=utcnow() - timedelta(days=400),
        event="approved",
        run_id="run-a",
        tool_call_id="c",
        tool_name="refund",
    )
    new = old.model_copy(update={"at": utcnow(), "event": "executed"})
    await store.append_audit(old)
    await store.append_audit(new)
    await store.close()
    with closing(sqlite3.connect(path)) as conn:
        back_to_version_5(conn)
        conn.commit()
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("DELETE FROM audit WHERE run_id = 'run-a'")

    store = SQLiteStore(f"sqlite:///{path}")
    try:
        assert unlinked(await store.list_audit(run_id="run-a")) == [old, new]
        assert await store.prune_audit(utcnow() - timedelta(days=365)) == 1
        assert unlinked(await store.list_audit(run_id="run-a")) == [new]
    finally:
        await store.close()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("DELETE FROM audit WHERE run_id = 'run-a'")
