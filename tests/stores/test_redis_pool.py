"""A burst on Redis waits for a free connection instead of failing.

redis-py's own pool stops at 100 connections and then raises "Too many
connections", and its cluster client raises once a node's pool is full; a
burst of 300 operations here would have failed with either.
"""

from __future__ import annotations

import asyncio

import pytest

from agents.stores.redis import RedisStore
from bot import open_chat_state

from ._snapshots import paused_run
from .conftest import REDIS_CLUSTER_URL, REDIS_URL, redis_prefix, with_prefix

BURST = 300


@pytest.mark.parametrize("url", [REDIS_URL, REDIS_CLUSTER_URL], ids=["redis", "cluster"])
async def test_a_burst_larger_than_the_pool_queues_and_every_operation_completes(
    url: str,
) -> None:
    async with redis_prefix(url) as prefix:
        store = RedisStore(with_prefix(url, prefix), pool_size=8)
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
