"""A Redis store upgraded in place: runs saved before it kept each thread's live runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.stores.redis import RedisStore

from ._snapshots import paused_run
from .conftest import REDIS_KINDS, opened
from .test_conformance import THREAD


@pytest.mark.parametrize("kind", REDIS_KINDS)
async def test_a_run_paused_before_the_live_index_is_among_its_threads_runs(
    kind: str, tmp_path: Path
) -> None:
    async with opened(kind, tmp_path) as store:
        assert isinstance(store, RedisStore)
        saved = await store.save_run(paused_run())
        # As an older version left it: waiting, but in no index of live runs.
        for shard in store.keys.groups:
            await store._redis.delete(store.keys.live(THREAD, shard))

        assert await store.thread_runs(THREAD) == [saved.run_id]
