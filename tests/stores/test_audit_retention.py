"""Audit retention: ``Store.prune_audit`` removes the start of the audit log, entries
older than the cut-off, oldest first, on every store; the rest answers as before, and
SQLite still refuses any other change to the log."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from agents.snapshot import AuditEntry, utcnow
from agents.stores import Store, open_store
from agents.stores.sqlite import SQLiteStore

from ._snapshots import paused_run, unlinked
from .conftest import RUNTIME_DURABLE_KINDS, opened
from .test_conformance import OTHER_THREAD, THREAD

RETENTION = timedelta(days=365)


def entry(run_id: str, thread_id: str | None, at: datetime, event: str = "approved") -> AuditEntry:
    """An audit entry of ``run_id`` made at ``at``."""
    return AuditEntry(
        at=at, event=event, run_id=run_id, thread_id=thread_id, tool_call_id="c", tool_name="t"
    )


async def append(store: Store, *entries: AuditEntry) -> None:
    for item in entries:
        await store.append_audit(item)


async def test_only_entries_older_than_the_cut_off_go_from_every_query(store: Store) -> None:
    now = utcnow()
    old = now - RETENTION - timedelta(days=1)
    a_old = entry("run-a", THREAD, old)
    b_old = entry("run-b", OTHER_THREAD, old + timedelta(seconds=1))
    c_old = entry("run-c", None, old + timedelta(seconds=2), "expired")
    a_new = entry("run-a", THREAD, now)
    b_new = entry("run-b", OTHER_THREAD, now + timedelta(seconds=1))
    await append(store, a_old, b_old, c_old, a_new, b_new)

    removed = await store.prune_audit(now - RETENTION)

    assert removed == 3
    assert unlinked(await store.list_audit()) == [a_new, b_new]
    assert unlinked(await store.list_audit(run_id="run-a")) == [a_new]
    assert unlinked(await store.list_audit(run_id="run-b")) == [b_new]
    assert unlinked(await store.list_audit(run_id="run-c")) == []
    assert unlinked(await store.list_audit(thread_id=THREAD)) == [a_new]
    assert unlinked(await store.list_audit(thread_id=OTHER_THREAD)) == [b_new]
    assert unlinked(await store.list_audit(run_id="run-a", thread_id=THREAD)) == [a_new]
    assert await store.prune_audit(now - RETENTION) == 0


async def test_entries_saved_with_a_run_go_from_its_run_and_thread(store: Store) -> None:
    run = paused_run()
    old = entry(run.run_id, THREAD, utcnow() - RETENTION - timedelta(days=1), "requested")
    saved = await store.save_run(run, [old])
    new = entry(run.run_id, THREAD, utcnow())
    await store.save_run(saved, [new])

    assert await store.prune_audit(utcnow() - RETENTION) == 1

    assert unlinked(await store.list_audit(run_id=run.run_id)) == [new]
    assert unlinked(await store.list_audit(thread_id=THREAD)) == [new]


async def test_the_log_goes_in_batches_oldest_first(store: Store) -> None:
    start = utcnow() - RETENTION - timedelta(days=10)
    old = [entry("run-a", THREAD, start + timedelta(days=n)) for n in range(5)]
    recent = entry("run-a", THREAD, utcnow())
    await append(store, *old, recent)
    before = utcnow() - RETENTION

    assert await store.prune_audit(before, limit=2) == 2
    assert unlinked(await store.list_audit(run_id="run-a")) == [*old[2:], recent]
    assert await store.prune_audit(before, limit=2) == 2
    assert await store.prune_audit(before, limit=2) == 1
    assert await store.prune_audit(before, limit=2) == 0
    assert unlinked(await store.list_audit(thread_id=THREAD)) == [recent]


async def test_only_the_start_of_the_log_goes(store: Store) -> None:
    # An old entry written after a newer one (a clock behind) waits for the newer one:
    # the log is only ever shortened from its start, as a chain over it would need.
    old = utcnow() - RETENTION - timedelta(days=1)
    first = entry("run-a", THREAD, old)
    newer = entry("run-a", THREAD, utcnow())
    late = entry("run-a", THREAD, old)
    await append(store, first, newer, late)

    assert await store.prune_audit(utcnow() - RETENTION) == 1
    assert unlinked(await store.list_audit(run_id="run-a")) == [newer, late]


@pytest.mark.parametrize("kind", RUNTIME_DURABLE_KINDS)
async def test_processes_pruning_the_log_at_once_remove_each_entry_once(
    kind: str, tmp_path: Path
) -> None:
    async with opened(kind, tmp_path) as store, another(store) as other:
        old = utcnow() - RETENTION - timedelta(days=1)
        entries = [entry(f"run-{n}", THREAD, old + timedelta(seconds=n)) for n in range(20)]
        recent = entry("run-0", THREAD, utcnow())
        await append(store, *entries, recent)
        before = utcnow() - RETENTION

        removed = 0
        for _ in range(len(entries)):
            both = await asyncio.gather(
                store.prune_audit(before, limit=3), other.prune_audit(before, limit=3)
            )
            removed += sum(both)

        assert removed == len(entries)
        assert unlinked(await store.list_audit()) == [recent]
        assert unlinked(await other.list_audit(thread_id=THREAD)) == [recent]
        assert unlinked(await store.list_audit(run_id="run-0")) == [recent]
        assert unlinked(await store.list_audit(run_id="run-1")) == []


@asynccontextmanager
async def another(store: Store) -> AsyncIterator[Store]:
    """Another process's connection to the same store."""
    other = open_store(store.url)
    try:
        yield other
    finally:
        await other.close()


async def test_sqlite_refuses_any_other_change_to_the_audit_log(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    store = SQLiteStore(f"sqlite:///{path}")
    old = utcnow() - RETENTION - timedelta(days=1)
    kept = entry("run-a", THREAD, utcnow())
    await append(store, entry("run-a", THREAD, old), entry("run-b", THREAD, old), kept)
    assert await store.prune_audit(utcnow() - RETENTION) == 2
    await store.close()

    with closing(sqlite3.connect(path)) as conn:
        (horizon,) = conn.execute("SELECT seq FROM audit_horizon").fetchone()
        (newer,) = conn.execute("SELECT seq FROM audit").fetchone()
        refused = [
            ("DELETE FROM audit WHERE seq = ?", (newer,)),
            ("DELETE FROM audit", ()),
            ("UPDATE audit SET entry = '{}' WHERE seq = ?", (newer,)),
            ("INSERT OR REPLACE INTO audit VALUES (?, 'run-x', NULL, '{}')", (newer,)),
            ("INSERT INTO audit VALUES (?, 'run-x', NULL, '{}')", (horizon,)),
            ("UPDATE audit_horizon SET seq = 0", ()),
            ("DELETE FROM audit_horizon", ()),
            ("INSERT OR REPLACE INTO audit_horizon (id, seq) VALUES (1, 0)", ()),
        ]
        for sql, params in refused:
            with pytest.raises(sqlite3.IntegrityError):
                conn.execute(sql, params)
        conn.rollback()
    store = SQLiteStore(f"sqlite:///{path}")
    try:
        assert unlinked(await store.list_audit()) == [kept]
    finally:
        await store.close()


async def test_sqlite_appends_after_a_log_pruned_to_its_end(tmp_path: Path) -> None:
    # SQLite would give a new row the seq of a removed last row, below the horizon.
    store = SQLiteStore(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        old = utcnow() - RETENTION - timedelta(days=1)
        await append(store, entry("run-a", THREAD, old), entry("run-a", THREAD, old))
        assert await store.prune_audit(utcnow() - RETENTION) == 2
        assert unlinked(await store.list_audit()) == []

        later = entry("run-a", THREAD, utcnow())
        await store.append_audit(later)
        run = paused_run()
        saved_with_run = entry(run.run_id, THREAD, utcnow(), "requested")
        await store.save_run(run, [saved_with_run])

        assert unlinked(await store.list_audit()) == [later, saved_with_run]
        assert await store.prune_audit(utcnow() - RETENTION) == 0
    finally:
        await store.close()
