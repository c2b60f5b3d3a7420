"""Chat state on the store's Redis, under the same deployment prefix.

JSON values, never pickle; key names and lifetimes are in ``redis_keys``. A
dedupe claim is one Lua script over all of a delivery's keys, and so is a vote
(add if absent, return all): votes clicked on different replicas at once all
count, once each.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, cast

from agents import Store
from agents.stores import redis_client, split_prefix

from ..types import Person
from . import redis_keys as k
from .base import CARD_PLACE, PERSON, CardPlace, StoreCardLocks, json_object

# KEYS: the votes list. ARGV: the voter's id, the vote's JSON. Appends the vote
# unless that person already voted; returns the whole list.
_ADD_VOTE = """
for _, vote in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  if cjson.decode(vote)['id'] == ARGV[1] then
    return redis.call('LRANGE', KEYS[1], 0, -1)
  end
end
redis.call('RPUSH', KEYS[1], ARGV[2])
return redis.call('LRANGE', KEYS[1], 0, -1)
"""


# KEYS: a delivery's dedupe keys. ARGV: their TTL in ms. Sets every key, and
# returns 1, only when none exists: a copy (0) claims nothing.
_FIRST_DELIVERY = """
for _, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then return 0 end
end
for _, key in ipairs(KEYS) do
  redis.call('SET', key, '1', 'PX', ARGV[1])
end
return 1
"""


class RedisChatState(StoreCardLocks):
    """The chat state on one Redis primary; card locks are the store's locks."""

    def __init__(self, url: str, locks: Store) -> None:
        server_url, prefix = split_prefix(url)
        self.keys = k.ChatKeys(prefix)
        self._locks = locks
        self._redis = redis_client(server_url)
        self._add_vote = self._redis.register_script(_ADD_VOTE)
        self._first_delivery = self._redis.register_script(_FIRST_DELIVERY)

    async def follow(self, thread_id: str) -> None:
        await self._redis.set(self.keys.follow(thread_id), "1")

    async def follows(self, thread_id: str) -> bool:
        return bool(await self._redis.exists(self.keys.follow(thread_id)))

    async def set_conversation_ref(self, thread_id: str, ref: dict[str, Any]) -> None:
        await self._redis.set(self.keys.reference(thread_id), json.dumps(ref, ensure_ascii=False))

    async def conversation_ref(self, thread_id: str) -> dict[str, Any] | None:
        data = await self._redis.get(self.keys.reference(thread_id))
        return json_object(cast(str, data)) if data is not None else None

    async def set_card(self, run_id: str, ask: str, place: CardPlace) -> None:
        text = CARD_PLACE.dump_json(place).decode()
        await self._redis.set(self.keys.card(run_id, ask), text)

    async def card_of(self, run_id: str, ask: str) -> CardPlace | None:
        data = await self._redis.get(self.keys.card(run_id, ask))
        return CARD_PLACE.validate_json(data) if data is not None else None

    async def add_vote(self, run_id: str, ask: str, voter: Person) -> list[Person]:
        key = self.keys.votes(run_id, ask)
        rows = await self._add_vote(keys=[key], args=[voter.id, PERSON.dump_json(voter).decode()])
        return [PERSON.validate_json(row) for row in cast(list[str], rows)]

    async def votes(self, run_id: str, ask: str) -> list[Person]:
        rows = await self._redis.lrange(self.keys.votes(run_id, ask), 0, -1)
        return [PERSON.validate_json(row) for row in cast(list[str], rows)]

    async def first_delivery(self, keys: Sequence[str], *, ttl: float) -> bool:
        """One Lua script: any key present means a copy; else every key is set."""
        px = max(k.MIN_TTL_MS, math.ceil(ttl * 1000))
        claimed = await self._first_delivery(keys=[self.keys.seen(key) for key in keys], args=[px])
        return bool(claimed)

    async def close(self) -> None:
        await self._redis.aclose()
