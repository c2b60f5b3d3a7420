"""Bytes per pending approval and latency of one approval cycle, per store.

Run with ``python -m bench.store_bench`` (Redis at ``REDIS_URL``, default
``redis://127.0.0.1:6379/0``; the bench writes under its own key prefix and
deletes it afterwards).

The cycle is what deciding one approval costs the store: save the paused
snapshot, take the run's lock, load, save the decision, save the finished run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import psycopg
from redis.asyncio import Redis
from redis.exceptions import RedisError

from agents.messages import Message, TextPart, ToolCallPart
from agents.snapshot import Decision, PendingCall, RunSnapshot, dump_snapshot, utcnow
from agents.stores import Store, open_store, split_prefix
from tests.stores.conftest import postgres_schema

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
THREAD = "slack:T0123ABCD:C0456EFGH:1700000000.000100"


@dataclass
class Row:
    """One line of the report."""

    store: str
    json_bytes: int
    stored_bytes: float | None = None
    measured_as: str = ""
    p50_ms: float | None = None
    p99_ms: float | None = None
    error: str = ""


def typical_snapshot() -> RunSnapshot:
    """A support agent's run paused on one refund approval, as the runtime saves it."""
    run_id = f"run-{uuid.uuid4().hex}"
    args = {"order_id": "A-100234", "amount": 249.99, "currency": "EUR", "reason": "damaged"}
    call = ToolCallPart(
        tool_call_id=f"toolu_{uuid.uuid4().hex[:24]}", tool_name="refund", args=args
    )
    now = utcnow()
    return RunSnapshot(
        run_id=run_id,
        agent_path=["support"],
        root_run_id=run_id,
        thread_id=THREAD,
        resource_id="U0123ABCD",
        status="paused",
        messages=[
            Message.user("Order A-100234 arrived broken, please refund it."),
            Message(
                role="assistant",
                parts=[TextPart(text="I'll refund order A-100234 for 249.99 EUR."), call],
            ),
        ],
        batch=[call],
        tool_calls=[call],
        pending=[
            PendingCall(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                args=args,
                kind="approval",
                agent_path=["support"],
                expires_at=now + timedelta(hours=24),
                requester="U0123ABCD",
                announced=True,
            )
        ],
        steps=1,
        created_at=now,
        updated_at=now,
    )


def decided(snapshot: RunSnapshot) -> RunSnapshot:
    """The snapshot with its call approved and claimed."""
    call = snapshot.pending[0].model_copy(
        update={
            "decision": Decision(action="approve", decided_by="U0999ZZZZ"),
            "state": "executing",
        }
    )
    return snapshot.model_copy(update={"pending": [call]})


def finished(snapshot: RunSnapshot) -> RunSnapshot:
    """The snapshot with the tool's outcome recorded and the run done."""
    return snapshot.model_copy(
        update={"status": "finished", "pending": [], "finish_reason": "stop", "text": "Refunded."}
    )


async def approval_cycle(store: Store, paused: RunSnapshot) -> None:
    """Save paused -> lock -> load -> save decided -> save finished."""
    saved = await store.save_run(paused)
    async with store.lock(f"run:{saved.run_id}"):
        loaded = await store.load_run(saved.run_id)
        assert loaded is not None
        claimed = await store.save_run(decided(loaded))
        await store.save_run(finished(claimed))


async def cycle_latency(store: Store, iterations: int) -> tuple[float, float]:
    """p50 and p99 of the cycle, in milliseconds, after a short warm-up."""
    for _ in range(min(20, iterations)):
        await approval_cycle(store, typical_snapshot())
    samples = []
    # Built up front: the bench times the store, not the making of test data.
    for paused in [typical_snapshot() for _ in range(iterations)]:
        started = time.perf_counter()
        await approval_cycle(store, paused)
        samples.append((time.perf_counter() - started) * 1000)
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49], cuts[98]


async def save_paused(store: Store, count: int) -> None:
    """Save ``count`` paused runs, each with one pending approval."""
    for snapshot in [typical_snapshot() for _ in range(count)]:
        await store.save_run(snapshot)


async def bench_memory(row: Row, approvals: int, iterations: int) -> None:
    """Python heap growth per saved snapshot (tracemalloc) and the cycle."""
    store = open_store("memory://")
    snapshots = [typical_snapshot() for _ in range(approvals)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for snapshot in snapshots:
        await store.save_run(snapshot)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    row.stored_bytes, row.measured_as = grown / approvals, "Python heap (tracemalloc)"
    row.p50_ms, row.p99_ms = await cycle_latency(open_store("memory://"), iterations)


async def bench_sqlite(row: Row, approvals: int, iterations: int) -> None:
    """Database growth per saved snapshot (pages, tables and indexes) and the cycle."""
    with tempfile.TemporaryDirectory() as directory:
        sizes_path = Path(directory) / "sizes.db"
        store = open_store(f"sqlite:///{sizes_path}")
        await store.ping()
        empty = _sqlite_bytes(sizes_path)
        await save_paused(store, approvals)
        await store.close()
        row.stored_bytes = (_sqlite_bytes(sizes_path) - empty) / approvals
        row.measured_as = "file pages incl. indexes"
        async with _closing(open_store(f"sqlite:///{Path(directory) / 'cycle.db'}")) as store:
            row.p50_ms, row.p99_ms = await cycle_latency(store, iterations)


def _sqlite_bytes(path: Path) -> int:
    # The store closed or idle; a plain connection reads the logical size, WAL included.
    with sqlite3.connect(path) as db:
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        freelist = db.execute("PRAGMA freelist_count").fetchone()[0]
    return int(page_size) * (int(pages) - int(freelist))


async def bench_redis(row: Row, approvals: int, iterations: int) -> None:
    """MEMORY USAGE of a run's key, used_memory growth with indexes, and the cycle."""
    prefix = f"bench-{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in REDIS_URL else "?"
    url = f"{REDIS_URL}{separator}prefix={prefix}"
    client = Redis.from_url(split_prefix(url)[0], decode_responses=True)
    try:
        await client.ping()
        async with _closing(open_store(url)) as store:
            before = await _used_memory(client)
            await save_paused(store, approvals)
            grown = await _used_memory(client) - before
            one = typical_snapshot()
            await store.save_run(one)
            run_key_bytes = await client.memory_usage(f"{prefix}:run:{{{one.run_id}}}") or 0
            row.stored_bytes = grown / approvals
            row.measured_as = f"used_memory delta; run key alone {run_key_bytes:,} B"
            row.p50_ms, row.p99_ms = await cycle_latency(store, iterations)
    except (RedisError, OSError) as exc:
        row.error = f"no Redis at {REDIS_URL}: {exc}"
    finally:
        try:
            stale = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
            if stale:
                await client.delete(*stale)
        except (RedisError, OSError):
            pass
        await client.aclose()


async def bench_postgres(row: Row, approvals: int, iterations: int) -> None:
    """Growth of the runtime's tables (heap, indexes, TOAST) per saved snapshot, and
    the cycle, in a scratch schema of a scratch database on ``POSTGRES_URL``."""
    async with postgres_schema() as url:
        try:
            async with _closing(open_store(url)) as store:
                await store.ping()
                empty = await _relations_bytes(url)
                await save_paused(store, approvals)
                row.stored_bytes = (await _relations_bytes(url) - empty) / approvals
                row.measured_as = "pg_total_relation_size delta (tables, indexes)"
                row.p50_ms, row.p99_ms = await cycle_latency(store, iterations)
        except (psycopg.Error, OSError) as exc:
            row.error = f"no PostgreSQL at {url}: {exc}"


async def _relations_bytes(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as db:
        await db.execute("VACUUM")  # the free space map and visibility map, made now
        cursor = await db.execute(
            """SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
                JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = current_schema() AND c.relkind = 'r'"""
        )
        row = await cursor.fetchone()
        return int(row[0]) if row is not None else 0


async def _used_memory(client: Redis) -> int:
    info = await client.info("memory")
    return int(info["used_memory"])


@asynccontextmanager
async def _closing(store: Store) -> AsyncIterator[Store]:
    try:
        yield store
    finally:
        await store.close()


def print_table(rows: list[Row], *, approvals: int, iterations: int) -> None:
    """The report, one line per store."""
    header = (
        "store",
        "snapshot JSON",
        "stored / approval",
        "cycle p50",
        "cycle p99",
        "measured as",
    )
    lines = [header]
    for r in rows:
        if r.error:
            lines.append((r.store, f"{r.json_bytes:,} B", "-", "-", "-", r.error))
            continue
        lines.append(
            (
                r.store,
                f"{r.json_bytes:,} B",
                f"{r.stored_bytes:,.0f} B" if r.stored_bytes is not None else "-",
                f"{r.p50_ms:.3f} ms" if r.p50_ms is not None else "-",
                f"{r.p99_ms:.3f} ms" if r.p99_ms is not None else "-",
                r.measured_as,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    print(
        f"Store bench: sizes over {approvals} pending approvals, "
        f"latency over {iterations} cycles (save paused, lock, load, save decided, save finished)"
    )
    for n, line in enumerate(lines):
        print(
            "  ".join(
                cell.ljust(w) if i in (0, 5) else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(line, widths, strict=True))
            ).rstrip()
        )
        if n == 0:
            print("  ".join("-" * w for w in widths))


async def main(argv: list[str]) -> int:
    """Measure every store and print the table; non-zero when one could not be measured."""
    parser = argparse.ArgumentParser(prog="python -m bench.store_bench", description=__doc__)
    parser.add_argument("--iterations", type=int, default=200, help="approval cycles timed")
    parser.add_argument("--approvals", type=int, default=1000, help="paused runs sized")
    args = parser.parse_args(argv)
    json_bytes = len(dump_snapshot(typical_snapshot()).encode())
    benches: list[tuple[str, Callable[[Row, int, int], Awaitable[None]]]] = [
        ("memory", bench_memory),
        ("sqlite", bench_sqlite),
        ("redis", bench_redis),
        ("postgres", bench_postgres),
    ]
    rows = []
    for name, bench in benches:
        row = Row(store=name, json_bytes=json_bytes)
        await bench(row, args.approvals, args.iterations)
        rows.append(row)
    print_table(rows, approvals=args.approvals, iterations=args.iterations)
    return 1 if any(r.error for r in rows) else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
