"""A Redis store upgraded in place: runs saved before the retention indexes are pruned
like the rest, once the first prunes have backfilled the indexes."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from agents.messages import Message
from agents.snapshot import AuditEntry, utcnow
from agents.stores import Pruned
from agents.stores import redis_keys as k
from agents.stores.redis import RedisStore

from ._snapshots import paused_run, unlinked
from .conftest import REDIS_KINDS, opened
from .test_conformance import OTHER_THREAD, THREAD, finished
from .test_prune import LATER, child_of, prune_now

pytestmark = pytest.mark.parametrize("kind", REDIS_KINDS)

PRUNES = 10_000
"""Prune calls a test makes at most for the backfill to scan the whole server."""


def in_another_group(store: RedisStore, run_id: str) -> str:
    """A fresh run id whose keys sit in another shard group than ``run_id``'s (any on
    one primary), so a tree spans primaries on a cluster."""
    while True:
        other = f"run-{uuid.uuid4().hex}"
        if not store.keys.shards or store.keys.shard(other) != store.keys.shard(run_id):
            return other


async def old_tree(store: RedisStore, thread_id: str | None = THREAD) -> list[str]:
    """A finished root run, its finished child and grandchild: [root, child, grandchild]."""
    root = await store.save_run(paused_run(thread_id=thread_id))
    child = child_of(root).model_copy(update={"run_id": in_another_group(store, root.run_id)})
    child = await store.save_run(child)
    grandchild = finished(
        paused_run(
            run_id=in_another_group(store, root.run_id),
            parent_run_id=child.run_id,
            thread_id=thread_id,
        ).model_copy(update={"root_run_id": root.run_id})
    )
    await store.save_run(grandchild)
    await store.save_run(finished(root))
    return [root.run_id, child.run_id, grandchild.run_id]


async def as_before_the_upgrade(store: RedisStore, roots: list[str]) -> None:
    """Empty the indexes this version added, as runs saved by an older one left them."""
    for shard in store.keys.groups:
        await store._redis.delete(store.keys.done(shard))
        for thread_id in (THREAD, OTHER_THREAD):
            await store._redis.delete(store.keys.thread_runs(thread_id, shard))
        for root in roots:
            await store._redis.delete(store.keys.children(root, shard))


async def backfilled(store: RedisStore) -> bool:
    return bool(await store._redis.hget(store.keys.backfill(), k.BACKFILL_COMPLETE_FIELD))


async def prune_all(store: RedisStore, before: datetime) -> Pruned:
    """Prune until the backfill is complete and nothing more is due: all that was removed."""
    run_ids: list[str] = []
    thread_ids: list[str] = []
    for _ in range(PRUNES):
        pruned = await prune_now(store, before)
        run_ids += pruned.run_ids
        thread_ids += pruned.thread_ids
        if pruned == Pruned(before=before) and await backfilled(store):
            return Pruned(run_ids=tuple(run_ids), thread_ids=tuple(thread_ids))
    raise AssertionError(f"the backfill did not complete in {PRUNES} prunes")


async def kinds_of_keys(store: RedisStore) -> set[str]:
    """What kinds of key (``run``, ``children``, ...) the store has left."""
    kinds: set[str] = set()
    async for key in store._redis.scan_iter(match=store.keys.pattern()):
        kinds.add(key.removeprefix(f"{store.keys.prefix}:").split(":{")[0])
    return kinds


async def test_runs_saved_before_the_upgrade_go_with_their_children_and_history(
    kind: str, tmp_path: Path
) -> None:
    async with opened(kind, tmp_path) as store:
        assert isinstance(store, RedisStore)
        first, second, unthreaded = (
            await old_tree(store),
            await old_tree(store),
            await old_tree(store, thread_id=None),
        )
        entry = AuditEntry(
            event="approved",
            run_id=first[0],
            thread_id=THREAD,
            tool_call_id="c",
            tool_name="refund",
        )
        await store.append_audit(entry)
        await store.append_history(THREAD, [Message.user("refund A-1001")], window=10)
        await as_before_the_upgrade(store, [first[0], second[0], unthreaded[0]])

        pruned = await prune_all(store, utcnow() + LATER)

        assert sorted(pruned.run_ids) == sorted([*first, *second, *unthreaded])
        assert pruned.thread_ids == (THREAD,)
        for run_id in pruned.run_ids:
            assert await store.load_run(run_id) is None
        assert await store.load_history(THREAD) == []
        assert unlinked(await store.list_audit(run_id=first[0])) == [entry]
        assert "children" not in await kinds_of_keys(store)


async def test_an_old_waiting_or_working_run_stays_and_keeps_its_threads_history(
    kind: str, tmp_path: Path
) -> None:
    async with opened(kind, tmp_path) as store:
        assert isinstance(store, RedisStore)
        waiting = await store.save_run(paused_run())
        working = await store.save_run(
            paused_run(thread_id=OTHER_THREAD).model_copy(update={"status": "running"})
        )
        done = await old_tree(store)
        await store.append_history(THREAD, [Message.user("refund A-1001")], window=10)
        await as_before_the_upgrade(store, [waiting.run_id, working.run_id, done[0]])

        pruned = await prune_all(store, utcnow() + timedelta(days=3650))

        assert sorted(pruned.run_ids) == sorted(done)
        assert pruned.thread_ids == ()
        assert await store.load_run(waiting.run_id) is not None
        assert await store.load_run(working.run_id) is not None
        assert len(await store.load_history(THREAD)) == 1
        shard = store.keys.shard(waiting.run_id)
        assert await store._redis.zscore(store.keys.thread_runs(THREAD, shard), waiting.run_id)


async def test_the_backfill_steps_a_bounded_batch_and_resumes_where_it_stopped(
    kind: str, tmp_path: Path
) -> None:
    async with opened(kind, tmp_path) as store:
        assert isinstance(store, RedisStore)
        tree = await old_tree(store)
        await as_before_the_upgrade(store, [tree[0]])
        stepping = RedisStore(store.url, backfill_batch=1)
        try:
            before = utcnow() + LATER
            first = await stepping.prunable(before)

            # One SCAN step of one key: children may be left to index, so no root is
            # due, and the caller hears there is more to do.
            assert first == Pruned(before=before, more=True)
            assert not await backfilled(store)
            assert await store._redis.hlen(store.keys.backfill()) == 1  # a cursor saved
            assert await store.load_run(tree[0]) is not None
            pruned = await prune_all(stepping, utcnow() + LATER)
            assert sorted(pruned.run_ids) == sorted(tree)
        finally:
            await stepping.close()


async def test_replicas_backfilling_at_once_or_twice_index_each_run_once(
    kind: str, tmp_path: Path
) -> None:
    async with opened(kind, tmp_path) as store:
        assert isinstance(store, RedisStore)
        trees = [await old_tree(store) for _ in range(3)]
        cutoff = utcnow()
        recent = await store.save_run(finished(paused_run()))
        await as_before_the_upgrade(store, [tree[0] for tree in trees] + [recent.run_id])
        replicas = [RedisStore(store.url) for _ in range(3)]
        try:
            together = await asyncio.gather(*(prune_all(r, cutoff) for r in replicas[:2]))
            await store._redis.delete(store.keys.backfill())  # as if the marker were lost
            again = await prune_all(replicas[2], cutoff)  # a process started since

            removed = {run_id for pruned in together for run_id in pruned.run_ids}
            assert removed == {run_id for tree in trees for run_id in tree}
            assert again.run_ids == again.thread_ids == ()
            shard = store.keys.shard(recent.run_id)
            assert await store._redis.zrange(store.keys.done(shard), 0, -1) == [recent.run_id]
            later = await prune_now(store, recent.updated_at + LATER)
            assert later.run_ids == (recent.run_id,)
        finally:
            for replica in replicas:
                await replica.close()
