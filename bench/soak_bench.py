"""Bounded records: what a finished conversation leaves behind, before and after the
retention prune, and how resident memory moves over many conversations.

Run with ``python -m bench.soak_bench [--conversations 300]``. Each conversation
is a message in a thread of its own, a card, an approval and the answer, through
``ChatBot`` with a scripted model and a recording messenger, on SQLite and on
Redis (when one answers). Kept bytes exclude the audit log, which is evidence and
never pruned: on SQLite the sum of every other table's row lengths, on Redis the
``MEMORY USAGE`` of every other key under the bot's prefix. The prune runs as the
sweeper would once the retention has passed (``Housekeeping.prune_finished``).
Figures are printed, never asserted; the goal is 0 bytes per conversation after.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import cast

from redis.exceptions import RedisError

from agents import Store, open_store
from agents.snapshot import utcnow
from agents.stores import database_path, redis_client, split_prefix
from bot import ApprovalCard, ChatBot, ThreadKey
from tests.bot.helpers import RecordingMessenger, click, message

from .approval_cycle_bench import REDIS_URL, approval_agent

RETENTION = timedelta(days=30)
SAMPLES = 10
"""Resident-memory readings over a soak (the slope is fitted through them)."""


def resident_kb() -> int:
    """This process's resident set size (``VmRSS``), in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


LAPSING = ("seen",)
"""Records with a time to live of their own (dedupe claims, ``dedupe_ttl``): counted
apart, as they go by themselves within the hour."""


def sqlite_bytes(url: str) -> tuple[int, int, int]:
    """Bytes and rows kept in every table but the audit log (row lengths, summed), and
    the bytes of those that lapse by themselves."""
    total = rows = lapsing = 0
    with sqlite3.connect(database_path(url)) as conn:
        tables = [
            str(row[0])
            for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if row[0] != "audit" and not str(row[0]).startswith("sqlite_")
        ]
        for table in tables:
            columns = [str(col[1]) for col in conn.execute(f"PRAGMA table_info({table})")]
            size = " + ".join(f"coalesce(length(CAST({c} AS BLOB)), 0)" for c in columns)
            found = conn.execute(f"SELECT count(*), coalesce(sum({size}), 0) FROM {table}")
            count, length = found.fetchone()
            if table in LAPSING:
                lapsing += int(length)
            else:
                rows += int(count)
                total += int(length)
    return total, rows, lapsing


async def redis_bytes(url: str) -> tuple[int, int, int]:
    """``MEMORY USAGE`` and count of every key under the prefix but the audit lists,
    and the bytes of those that lapse by themselves."""
    server, prefix = split_prefix(url)
    client = redis_client(server)
    total = keys = lapsing = 0
    try:
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            if ":audit:" in key:
                continue
            size = int(cast(int, await client.memory_usage(key)) or 0)
            if any(f":{kind}:" in key for kind in LAPSING):
                lapsing += size
            else:
                total += size
                keys += 1
    finally:
        await client.aclose()
    return total, keys, lapsing


async def converse(bot: ChatBot, messenger: RecordingMessenger, n: int) -> None:
    """One conversation in a thread of its own: message, card, approval, answer."""
    thread = ThreadKey(platform="test", workspace="W1", channel="C1", root=f"soak.{n}")
    await bot.on_message(message("refund A-100234", thread=thread))
    await bot.drain()
    card = messenger.views(ApprovalCard, thread)[-1]
    await bot.on_click(click(card, thread=thread))
    await bot.drain()


async def soak(
    name: str, store: Store, measure: Callable[[], Awaitable[tuple[int, int, int]]], count: int
) -> None:
    """Run ``count`` conversations on ``store``, then prune, printing what is kept."""
    bot = ChatBot(approval_agent(store), run_retention=RETENTION)
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    try:
        empty, _, _ = await measure()
        rss: list[tuple[float, float]] = []
        step = max(1, count // SAMPLES)
        for n in range(count):
            await converse(bot, messenger, n)
            if n % step == step - 1:
                rss.append((n + 1, resident_kb()))
        full, things, _ = await measure()
        later = utcnow() + RETENTION + timedelta(seconds=1)
        removed = await bot.housekeeping.prune_finished(now=later)
        pruned, left, lapsing = await measure()
        slope = statistics.linear_regression([x for x, _ in rss], [y for _, y in rss]).slope
    finally:
        await bot.aclose()
    print(
        f"{name:7} {count} conversations: kept {(full - empty) / count:8.0f} B/conversation"
        f" ({things} rows or keys) before the prune; {removed} runs pruned;"
        f" after {(pruned - empty) / count:6.0f} B/conversation ({left} left, besides"
        f" {lapsing / count:.0f} B/conversation of dedupe claims lapsing within the hour);"
        f" RSS slope {slope:6.2f} KiB/conversation"
    )


async def on_sqlite(count: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'soak.db'}"
        store = open_store(url)
        try:
            await soak("sqlite", store, lambda: asyncio.to_thread(sqlite_bytes, url), count)
        finally:
            await store.close()


async def on_redis(count: int) -> None:
    url = f"{REDIS_URL}?prefix=soak-{uuid.uuid4().hex[:12]}"
    client = redis_client(split_prefix(url)[0])
    try:
        await client.ping()
    except (RedisError, OSError):
        print(f"redis   skipped: nothing answers at {REDIS_URL} (scripts/ensure-redis)")
        return
    store = open_store(url)
    try:
        await soak("redis", store, lambda: redis_bytes(url), count)
    finally:
        await store.close()
        async for key in client.scan_iter(match=f"{split_prefix(url)[1]}:*", count=1000):
            await client.delete(key)
        await client.aclose()


async def main(count: int) -> None:
    await on_sqlite(count)
    await on_redis(count)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=300)
    asyncio.run(main(parser.parse_args().conversations))
    sys.exit(0)
