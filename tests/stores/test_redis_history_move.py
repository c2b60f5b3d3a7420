"""On a Redis Cluster a thread's history lives in the thread's group, with the top runs
drawn there, so a run's start reads it and its end appends to it in the run's own
script; histories a version before kept under the thread's own tag are moved over,
and read where they are until then."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agents.messages import Message
from agents.stores import Remember, tree_run_id
from agents.stores import redis_keys as k
from agents.stores._redis_history import RedisHistoryMove
from agents.stores.redis import RedisStore

from ._snapshots import paused_run
from .conftest import REDIS_CLUSTER_URL, redis_prefix, with_prefix
from .test_conformance import THREAD, finished

pytestmark = pytest.mark.redis


@asynccontextmanager
async def cluster_store() -> AsyncIterator[RedisStore]:
    async with redis_prefix(REDIS_CLUSTER_URL) as prefix:
        store = RedisStore(with_prefix(REDIS_CLUSTER_URL, prefix))
        try:
            yield store
        finally:
            await store.close()


async def kept_the_old_way(store: RedisStore, *texts: str) -> None:
    """A thread's history as a version before ``history``'s groups kept it."""
    lines = [Message.user(text).model_dump_json() for text in texts]
    await store._redis.rpush(store.keys.legacy_history(THREAD), *lines)


async def move_all(store: RedisStore | RedisHistoryMove) -> None:
    """Step the move until it says it is complete."""
    move = store._history_move if isinstance(store, RedisStore) else store
    for _ in range(1000):
        if await move.step():
            return
    raise AssertionError("the move did not complete")


def said(history: list[Message]) -> list[str]:
    return [m.text for m in history]


class Commands:
    """Counts the commands (round trips: each script is one) a client sends."""

    def __init__(self, store: RedisStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[str] = []
        send = store._redis.execute_command

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.sent.append(str(args[0]))
            return await send(*args, **kwargs)

        monkeypatch.setattr(store._redis, "execute_command", counted)


async def test_a_top_runs_start_and_end_are_one_script_each_with_its_threads_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with cluster_store() as store:
        await store.append_history(THREAD, [Message.user("earlier")], window=10)
        store._history_move._complete = True  # this prefix never had an old history
        run = paused_run(run_id=tree_run_id(thread_id=THREAD)).model_copy(
            update={"status": "running", "pending": []}
        )
        commands = Commands(store, monkeypatch)

        saved, history = await store.start_run(run)
        remember = Remember(messages=[Message.user("now")], window=10)
        await store.save_run(finished(saved), remember=remember)

        assert len(commands.sent) == 2, commands.sent
        assert said(history) == ["earlier"]
        assert said(await store.load_history(THREAD)) == ["earlier", "now"]
        hold = await store._redis.get(store.keys.history_hold(THREAD))
        assert hold == repr(run.created_at.timestamp())


async def test_an_old_history_is_read_where_it_is_then_moved_before_what_came_since() -> None:
    async with cluster_store() as store:
        await kept_the_old_way(store, "first", "second")
        run = paused_run(run_id=tree_run_id(thread_id=THREAD))

        _, history = await store.start_run(run)
        assert said(history) == ["first", "second"]
        assert said(await store.load_history(THREAD)) == ["first", "second"]

        await store.append_history(THREAD, [Message.user("third")], window=10)
        await move_all(store)

        assert said(await store.load_history(THREAD)) == ["first", "second", "third"]
        assert not await store._redis.exists(store.keys.legacy_history(THREAD))
        assert await store._redis.hget(store.keys.history_move(), k.BACKFILL_COMPLETE_FIELD)


async def test_movers_at_once_or_after_a_crash_move_an_old_history_once() -> None:
    async with cluster_store() as store:
        await kept_the_old_way(store, "first", "second")
        replicas = [RedisStore(store.url) for _ in range(2)]
        try:
            await asyncio.gather(*(move_all(r) for r in replicas))
            assert said(await store.load_history(THREAD)) == ["first", "second"]

            # A mover that died after putting the list in place, before deleting the old.
            await kept_the_old_way(store, "first", "second")
            await store._redis.delete(store.keys.history_move())
            await move_all(RedisHistoryMove(store._redis, store.keys))

            assert said(await store.load_history(THREAD)) == ["first", "second"]
            assert not await store._redis.exists(store.keys.legacy_history(THREAD))
        finally:
            for replica in replicas:
                await replica.close()
