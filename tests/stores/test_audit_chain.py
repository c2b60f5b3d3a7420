"""The audit log's hash chain on every store: each entry linked in the write that saves
it, so a walk of the chain holds; an entry changed, removed or inserted behind the
store's back is found; retention leaves an anchor the rest verifies from; checkpoints
sign the head; processes appending at once keep one chain."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import sqlite3
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest

from agents.chain import AuditChain, ChainReport, Fault, digest, statement, walk
from agents.snapshot import AuditEntry, utcnow
from agents.stores import Store, open_store
from agents.stores.postgres import PostgresStore
from agents.stores.redis import RedisStore
from agents.stores.sqlite import SQLiteStore

from ._snapshots import paused_run
from .conftest import RUNTIME_DURABLE_KINDS, opened, store_url
from .test_conformance import THREAD

KEY = b"the deployment's key"


def seal(text: str) -> str:
    """A signature the tests can check (the bot's are Ed25519: tests/bot)."""
    return "hmac:" + hmac.new(KEY, text.encode(), hashlib.sha256).hexdigest()


def entry(run_id: str, n: int, *, at_days_ago: float = 0) -> AuditEntry:
    return AuditEntry(
        at=utcnow() - timedelta(days=at_days_ago),
        event="approved",
        run_id=run_id,
        thread_id=THREAD,
        tool_call_id=f"call-{n}",
        tool_name="refund",
        args={"amount": n, "note": "größer ✅"},
        actor="U1",
    )


async def fill(store: Store, count: int, *, at_days_ago: float = 0) -> None:
    """``count`` entries: half saved with runs (two per save), half appended alone."""
    for n in range(0, count, 3):
        run = paused_run()
        await store.save_run(run, [entry(run.run_id, n, at_days_ago=at_days_ago)] * 2)
        await store.append_audit(entry(run.run_id, n + 2, at_days_ago=at_days_ago))


async def walked(store: Store) -> list[ChainReport]:
    return [walk(c.lines, c.anchor, c.chain) for c in await store.audit_chains()]


def only_finding(reports: list[ChainReport]) -> tuple[Fault, int]:
    (finding,) = [r.finding for r in reports if r.finding is not None]
    return finding.fault, finding.seq


async def test_entries_saved_and_appended_form_chains_that_hold(store: Store) -> None:
    await fill(store, 30)
    reports = await walked(store)
    assert all(r.holds for r in reports)
    assert sum(r.entries for r in reports) == 30
    entries = await store.list_audit()
    assert all(e.seq is not None and e.hash is not None for e in entries)
    # Numbered from 1 in each chain, each linked to the one before.
    for report in reports:
        assert report.head.seq == report.entries


@pytest.mark.parametrize("kind", RUNTIME_DURABLE_KINDS)
async def test_processes_appending_at_once_keep_one_chain(kind: str, tmp_path: Path) -> None:
    async with store_url(kind, tmp_path) as url:
        stores = [open_store(url) for _ in range(3)]
        try:
            await asyncio.gather(*(fill(s, 24) for s in stores))
            reports = await walked(stores[0])
            assert all(r.holds for r in reports), [r.finding for r in reports]
            assert sum(r.entries for r in reports) == 72
        finally:
            for s in stores:
                await s.close()


async def test_checkpoints_sign_each_head_once(store: Store) -> None:
    assert await store.seal_audit(seal) == 0  # nothing to sign yet
    await fill(store, 6)
    signed = await store.seal_audit(seal)
    assert signed >= 1
    assert await store.seal_audit(seal) == 0  # each head signed already
    await fill(store, 3)
    assert await store.seal_audit(seal) >= 1

    for report in await walked(store):
        assert report.holds
        for point in report.checkpoints:
            assert point.signature == seal(point.statement)
    checkpoints = [p for r in await walked(store) for p in r.checkpoints]
    assert len([e for e in await store.list_audit() if e.event == "checkpoint"]) == len(checkpoints)


async def test_retention_leaves_a_signed_anchor_the_rest_verifies_from(store: Store) -> None:
    await fill(store, 9, at_days_ago=400)
    await fill(store, 6)
    removed = await store.prune_audit(utcnow() - timedelta(days=365), seal=seal)
    assert removed == 9

    chains = await store.audit_chains()
    reports = [walk(c.lines, c.anchor, c.chain) for c in chains]
    assert all(r.holds for r in reports), [r.finding for r in reports]
    assert sum(r.entries for r in reports) == 6
    anchors = [c.anchor for c in chains if c.anchor is not None]
    assert sum(a.removed for a in anchors) == 9
    for chain in chains:
        if chain.anchor is not None:
            signed = statement("anchor", chain.chain, chain.anchor.seq, chain.anchor.hash)
            assert chain.anchor.signature == seal(signed)

    # Entries appended after the prune go on from where it left each chain.
    await fill(store, 3)
    assert all(r.holds for r in await walked(store))


async def test_retention_of_everything_still_leaves_a_chain_to_go_on(store: Store) -> None:
    await fill(store, 6, at_days_ago=400)
    assert await store.prune_audit(utcnow() - timedelta(days=365)) == 6
    await fill(store, 3)
    reports = await walked(store)
    assert all(r.holds for r in reports), [r.finding for r in reports]
    assert sum(r.entries for r in reports) == 3


async def test_an_export_reads_each_chain_on_from_where_it_stopped(store: Store) -> None:
    await fill(store, 12)
    for chain in await store.audit_chains():
        seqs = [json.loads(line)["seq"] for line in chain.lines]
        read: list[int] = []
        after = 0
        while lines := await store.read_audit(chain.chain, after, limit=2):
            read += [json.loads(line)["seq"] for line in lines]
            after = read[-1]
        assert read == seqs
    await store.prune_audit(utcnow() + timedelta(seconds=1), limit=5)
    for chain in await store.audit_chains():
        if chain.lines:
            first = json.loads(chain.lines[0])["seq"]
            assert await store.read_audit(chain.chain, 0) == chain.lines
            assert await store.read_audit(chain.chain, first) == chain.lines[1:]


# -- tampering behind the store's back: the walk says where ---------------------


async def tampered(kind: str, tmp_path: Path, tamper: str) -> tuple[Fault, int]:
    """What the walk finds after ``tamper`` was done to entry 3 of a 6-entry chain."""
    async with opened(kind, tmp_path) as store:
        run = paused_run()
        for n in range(6):
            await store.append_audit(entry(run.run_id, n))
        (chain,) = [c for c in await store.audit_chains() if c.lines]
        if isinstance(store, SQLiteStore):
            await store.close()
            _tamper_sqlite(Path(store.file.path), tamper)
        elif isinstance(store, PostgresStore):
            await _tamper_postgres(store, tamper)
        else:
            assert isinstance(store, RedisStore)
            await _tamper_redis(store, chain, tamper)
        return only_finding(await walked(store))


@pytest.mark.parametrize("kind", RUNTIME_DURABLE_KINDS)
async def test_an_edited_entry_is_found(kind: str, tmp_path: Path) -> None:
    assert await tampered(kind, tmp_path, "edit") == ("changed", 3)


@pytest.mark.parametrize("kind", RUNTIME_DURABLE_KINDS)
async def test_an_edited_entry_given_a_new_hash_is_found(kind: str, tmp_path: Path) -> None:
    assert await tampered(kind, tmp_path, "rehash") == ("changed", 3)


@pytest.mark.parametrize("kind", RUNTIME_DURABLE_KINDS)
async def test_a_deleted_entry_is_found(kind: str, tmp_path: Path) -> None:
    assert await tampered(kind, tmp_path, "delete") == ("removed", 3)


@pytest.mark.parametrize("kind", RUNTIME_DURABLE_KINDS)
async def test_an_inserted_entry_is_found(kind: str, tmp_path: Path) -> None:
    fault, _ = await tampered(kind, tmp_path, "insert")
    assert fault == "inserted"


def _forged(line: str, tamper: str) -> str:
    """Entry 3, changed: its amount (``edit``), or that with its hash made again."""
    data = json.loads(line)
    data["args"]["amount"] = 1_000_000
    if tamper == "rehash":
        data["hash"] = digest(data)
    return json.dumps(data)


def unguarded(conn: sqlite3.Connection) -> None:
    """Drop the triggers that refuse changes to the audit log: whoever can write the
    file can, so the chain, not the database, is the evidence."""
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
        conn.execute(f"DROP TRIGGER {name}")


def _tamper_sqlite(path: Path, tamper: str) -> None:
    with closing(sqlite3.connect(path)) as conn:
        unguarded(conn)
        (line,) = conn.execute("SELECT entry FROM audit WHERE seq = 3").fetchone()
        if tamper in ("edit", "rehash"):
            conn.execute("UPDATE audit SET entry = ? WHERE seq = 3", (_forged(line, tamper),))
        elif tamper == "delete":
            conn.execute("DELETE FROM audit WHERE seq = 3")
        else:  # entry 3 again, as it was: an approval played twice
            conn.execute(
                "INSERT INTO audit (seq, run_id, thread_id, entry) VALUES (100, 'x', NULL, ?)",
                (line,),
            )
        conn.commit()


async def _tamper_postgres(store: PostgresStore, tamper: str) -> None:
    async with store.db.connection() as conn:
        # The table's owner can switch off the trigger that refuses this.
        await conn.execute("ALTER TABLE audit DISABLE TRIGGER audit_append_only")
        cursor = await conn.execute("SELECT entry FROM audit WHERE seq = 3")
        (line,) = await cursor.fetchone() or ("",)
        if tamper in ("edit", "rehash"):
            forged = _forged(line, tamper)
            await conn.execute("UPDATE audit SET entry = %s WHERE seq = 3", (forged,))
        elif tamper == "delete":
            await conn.execute("DELETE FROM audit WHERE seq = 3")
        else:  # entry 3 again, as it was: an approval played twice
            await conn.execute(
                """INSERT INTO audit (seq, at, event, tool, run_id, entry)
                    SELECT 100, at, event, tool, run_id, entry FROM audit WHERE seq = 3"""
            )


async def _tamper_redis(store: RedisStore, chain: AuditChain, tamper: str) -> None:
    key = store.keys.audit_all(chain.chain)
    redis = store._redis
    line = chain.lines[2]
    if tamper in ("edit", "rehash"):
        await redis.lset(key, 2, _forged(line, tamper))
    elif tamper == "delete":
        await redis.lrem(key, 1, line)
    else:  # entry 3 again, as it was: an approval played twice
        await redis.linsert(key, "AFTER", line, line)


async def test_retention_removes_checkpoints_like_any_entry(store: Store) -> None:
    # A checkpoint is in no run's list: on a cluster, its group's own (one slot).
    await fill(store, 9, at_days_ago=400)
    assert await store.seal_audit(seal) >= 1
    checkpoints = len([e for e in await store.list_audit() if e.event == "checkpoint"])
    removed = await store.prune_audit(utcnow() + timedelta(seconds=1), seal=seal)
    assert removed == 9 + checkpoints
    assert await store.list_audit() == []
    await fill(store, 3)
    reports = await walked(store)
    assert all(r.holds for r in reports), [r.finding for r in reports]


async def test_sqlite_entries_cut_from_the_end_leave_a_gap_the_next_entry_cannot_close(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'cut.db'}"
    entry = AuditEntry(event="approved", run_id="r", tool_call_id="c", tool_name="refund")
    store = open_store(url)
    for _ in range(4):
        await store.append_audit(entry)
    await store.close()
    with closing(sqlite3.connect(tmp_path / "cut.db")) as conn:
        # Only what stops a delete is dropped: the head's own triggers stay.
        conn.execute("DROP TRIGGER audit_no_delete")
        conn.execute("DELETE FROM audit WHERE seq >= 3")
        conn.commit()

    store = open_store(url)
    try:
        await store.append_audit(entry)  # the bot goes on: after the head, not the cut
        ((chain),) = await store.audit_chains()
        report = walk(chain.lines, chain.anchor)
    finally:
        await store.close()
    assert chain.head is not None
    assert chain.head.seq == 5
    assert report.finding is not None
    assert (report.finding.fault, report.finding.seq) == ("removed", 3)
