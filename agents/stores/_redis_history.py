"""A Redis Cluster's thread histories moved into their threads' groups (``redis_keys``):
where a version before kept each under the thread's own tag, out of reach of the
script that ends a run. A bounded step per ``prunable`` moves them over; until every
primary was scanned, a read that finds no history under the new name looks under the
old one too, so no conversation is lost meanwhile. (A version before still running
beside, in a rolling upgrade, may add to an old list after it was moved: that
addition is not kept.)
"""

from __future__ import annotations

import asyncio
import time
from typing import cast

from ..messages import Message
from . import redis_keys as k
from ._redis_retention import ADVANCE_CURSOR
from .redis_url import RedisClient, primaries, scan_primary

MOVE_BATCH = 5000
"""Keys one step of the move looks at, at most (SCAN counts)."""
_SCAN_COUNT = 1000
_RECHECK_S = 30.0
"""How long a read trusts that the move is not complete before asking again."""

# KEYS: the thread's history (its group's), its moved mark. ARGV: the mark's TTL (ms),
# then the old list's items. Puts them before what the new list holds unless the mark
# says another mover did (a crash between this and the old list's delete, or two
# movers at once); 1 if moved.
_PREPEND_ONCE = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
for i = #ARGV, 2, -1 do redis.call('LPUSH', KEYS[1], ARGV[i]) end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[1])
return 1
"""


class RedisHistoryMove:
    """Moves a cluster's histories kept under their threads' own tags into the threads'
    groups; nothing to do on one primary, where both names are one."""

    def __init__(self, redis: RedisClient, keys: k.RedisKeys, *, batch: int = MOVE_BATCH) -> None:
        self._redis = redis
        self.keys = keys
        self._batch = batch
        self._complete = not keys.shards
        self._checked = -_RECHECK_S
        self._prepend_once = redis.register_script(_PREPEND_ONCE)
        self._advance = redis.register_script(ADVANCE_CURSOR)

    async def legacy(self, thread_id: str) -> list[Message]:
        """A thread's conversation still under its old name (while the move is not
        complete; nothing after)."""
        if self._complete:
            return []
        key = self.keys.legacy_history(thread_id)
        if time.monotonic() - self._checked < _RECHECK_S:
            items = await self._redis.lrange(key, 0, -1)
        else:
            done, items = await asyncio.gather(
                self._redis.hget(self.keys.history_move(), k.BACKFILL_COMPLETE_FIELD),
                self._redis.lrange(key, 0, -1),
            )
            self._checked = time.monotonic()
            self._complete = bool(done)
        return [Message.model_validate_json(item) for item in items]

    async def step(self) -> bool:
        """One bounded step of the move, resumed from the cursors in the move's hash;
        whether it is complete. Idempotent: replicas may step at once."""
        if self._complete:
            return True
        state = cast(dict[str, str], await self._redis.hgetall(self.keys.history_move()))
        if not state.get(k.BACKFILL_COMPLETE_FIELD):
            budget = self._batch
            for node in await primaries(self._redis):
                cursor = state.get(node, "")
                while cursor != k.BACKFILL_END:
                    if budget <= 0:
                        return False
                    count = min(budget, _SCAN_COUNT)
                    budget -= count
                    following, found = await scan_primary(
                        self._redis,
                        node,
                        int(cursor or 0),
                        match=self.keys.history_pattern(),
                        count=count,
                    )
                    for key in found:
                        await self._move(key)
                    moved = str(following) if following else k.BACKFILL_END
                    step = [node, cursor, moved]
                    if not await self._advance(keys=[self.keys.history_move()], args=step):
                        return False  # another replica is further on
                    cursor = moved
            await self._redis.hset(self.keys.history_move(), k.BACKFILL_COMPLETE_FIELD, "1")
        self._complete = True
        return True

    async def _move(self, key: str) -> None:
        """Move one old list (a key the pattern found: ``legacy_history``'s shape only)."""
        head = f"{self.keys.prefix}:{k.HISTORY}:{{"
        thread_id = key.removeprefix(head).removesuffix("}")
        if key != self.keys.legacy_history(thread_id) or key == self.keys.history(thread_id):
            return  # a history already in its group (the pattern finds those too)
        items = cast(list[str], await self._redis.lrange(key, 0, -1))
        if items:
            keys = [self.keys.history(thread_id), self.keys.history_moved(thread_id)]
            await self._prepend_once(keys=keys, args=[k.HISTORY_MOVED_MS, *items])
        await self._redis.delete(key)
