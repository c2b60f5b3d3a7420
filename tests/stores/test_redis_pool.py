"""A burst on Redis waits for a free connection instead of failing.

redis-py's own pool stops at 100 connections and then raises "Too many
connections"; a burst of 300 operations here would have failed with it.
"""

from __future__ import annotations

import asyncio

from agents.stores.redis import RedisStore
from bot import open_chat_state

from ._snapshots import paused_run
from .conftest import REDIS_URL, redis_prefix

BURST = 300


async def test_a_burst_larger_than_the_pool_queues_and_every_operation_completes() -> None:
    async with redis_prefix() as prefix:
        separator = "&" if "?" in REDIS_URL else "?"
        store = RedisStore(f"{REDIS_URL}{separator}prefix={prefix}")
        chat = open_chat_state(store)
        try:
            runs = [paused_run() for _ in range(BURST)]
            saved = await asyncio.gather(*(store.save_run(run) for run in runs))
            loaded = await asyncio.gather(*(store.load_run(run.run_id) for run in runs))
            assert loaded == saved
            firsts = await asyncio.gather(
                *(chat.enqueue(str(i), keys=[f"event:{i}"], ttl=60) for i in range(BURST))
            )
            assert all(firsts)
        finally:
            await chat.close()
            await store.close()
