"""On a Redis Cluster the runs and the inbox spread over every primary.

The store and chat-state conformance suites run on the real three-primary
cluster too (``STORE_KINDS``); this shows what only a cluster has: the shard
groups land on all its primaries, so none carries the whole deployment.
"""

from __future__ import annotations

from collections import Counter

import pytest
from redis.asyncio.cluster import RedisCluster

from agents.stores import StoreConflict, redis_client, split_prefix, tree_run_id
from agents.stores.redis import RedisStore
from bot import open_chat_state
from bot.chat_state import ThreadNote
from bot.chat_state.redis import RedisChatState

from ._snapshots import paused_run
from .conftest import REDIS_CLUSTER_URL, redis_prefix, with_prefix

pytestmark = pytest.mark.redis

RUNS = 200


async def test_runs_and_inbox_entries_spread_over_every_primary() -> None:
    async with redis_prefix(REDIS_CLUSTER_URL) as prefix:
        store = RedisStore(with_prefix(REDIS_CLUSTER_URL, prefix))
        chat = open_chat_state(store)
        client = redis_client(split_prefix(REDIS_CLUSTER_URL)[0])
        assert isinstance(client, RedisCluster)
        try:
            runs = [await store.save_run(paused_run()) for _ in range(RUNS)]
            for n in range(RUNS):
                note = ThreadNote(thread_id=f"T{n}", follow=True)
                assert await chat.enqueue(f"m{n}", keys=[f"e{n}"], ttl=60, note=note)
            await client.initialize()
            primaries = {node.name for node in client.get_primaries()}
            assert len(primaries) == 3

            def where(key: str) -> str:
                node = client.get_node_from_key(key)
                assert node is not None
                return node.name

            by_run = Counter(where(store.keys.run(run.run_id)) for run in runs)
            assert isinstance(chat, RedisChatState)
            by_stream = Counter(where(chat.keys.inbox(group)) for group in chat.keys.groups)
            assert set(by_run) == primaries
            assert min(by_run.values()) > RUNS // 6  # roughly a third each
            assert set(by_stream) == primaries
            taken = await chat.take("w", count=RUNS, lease=30)
            assert sorted(e.body for e in taken) == sorted(f"m{n}" for n in range(RUNS))
            # One thread's paused runs sit in every group; read back oldest first.
            thread = runs[0].thread_id
            assert thread is not None
            assert await store.paused_runs(thread) == [run.run_id for run in runs]
        finally:
            await client.aclose()
            await chat.close()
            await store.close()


async def test_a_tree_lives_in_its_top_runs_group_and_an_older_one_across_groups_saves() -> None:
    async with redis_prefix(REDIS_CLUSTER_URL) as prefix:
        store = RedisStore(with_prefix(REDIS_CLUSTER_URL, prefix))
        try:
            root = paused_run(run_id=tree_run_id())
            children = [tree_run_id(root.run_id) for _ in range(20)]
            assert {store.keys.shard(c) for c in children} == {store.keys.shard(root.run_id)}

            # A tree an older version saved, its sub-agent run in another group: it is
            # still written (group by group, the top last), revision checks and all.
            other = next(
                f"run-{n}"
                for n in range(100)
                if store.keys.shard(f"run-{n}") != store.keys.shard(root.run_id)
            )
            child = paused_run(run_id=other, parent_run_id=root.run_id)
            top, below = await store.save_runs([root, child])
            assert (top.revision, below.revision) == (1, 1)
            with pytest.raises(StoreConflict):
                await store.save_runs([top, child])
            assert await store.load_run(child.run_id) == below
        finally:
            await store.close()
