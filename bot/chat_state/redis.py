"""Chat state on the store's Redis, under the same deployment prefix.

JSON values, never pickle; key names and lifetimes are in ``redis_keys``. A
delivery's dedupe claim and inbox write are one Lua script, and so is a vote
(add if absent, return all): votes clicked on different replicas at once all
count, once each. On a Redis Cluster the inbox is a stream per shard group (see
``redis_keys``); an entry's id then names its group, ``<group>/<stream id>``.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import defaultdict
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, cast

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from agents.stores import hold_lease, redis_client, split_prefix
from agents.stores.redis_keys import SHARDS
from agents.stores.redis_url import is_cluster

from ..types import Person
from . import redis_keys as k
from ._redis_intake import BatchedScript, ScriptCall, single_script
from .base import (
    CARD_LOCK_TTL,
    CARD_PLACE,
    PERSON,
    CardPlace,
    IntakeEntry,
    ThreadNote,
    json_object,
)

# KEYS: the votes list. ARGV: the voter's id, the vote's JSON. Appends the vote
# unless that person already voted; returns the whole list.
# Hand out the jobs due (KEYS: due times, data; ARGV: now, limit), each once.
_TAKE_DUE = """
local keys = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local out = {}
for _, key in ipairs(keys) do
  redis.call('ZREM', KEYS[1], key)
  local data = redis.call('HGET', KEYS[2], key)
  redis.call('HDEL', KEYS[2], key)
  if data then
    table.insert(out, key)
    table.insert(out, data)
  end
end
return out
"""

_ADD_VOTE = """
for _, vote in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  if cjson.decode(vote)['id'] == ARGV[1] then
    return redis.call('LRANGE', KEYS[1], 0, -1)
  end
end
redis.call('RPUSH', KEYS[1], ARGV[2])
return redis.call('LRANGE', KEYS[1], 0, -1)
"""


# KEYS: the inbox stream, the thread's follow mark and reference, then the
# delivery's dedupe keys. ARGV: their TTL in ms, the body, "1" to record only in
# a followed thread, "1" to follow it, the reference JSON ("" for none). The
# follow check, the dedupe claim (any key present: a copy), the XADD and the thread's marks
# in one step; nil for a copy or an unfollowed thread. XADD before the keys:
# Lua does not roll back, and a key without its entry would drop the message.
# A function, for the script of one delivery and that of a burst (``batch_script``).
_ENQUEUE = """
local function call(KEYS, ARGV)
  if ARGV[3] == '1' and redis.call('EXISTS', KEYS[2]) == 0 then return false end
  for i = 4, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then return false end
  end
  local id = redis.call('XADD', KEYS[1], '*', 'body', ARGV[2])
  for i = 4, #KEYS do
    redis.call('SET', KEYS[i], '1', 'PX', ARGV[1])
  end
  if ARGV[4] == '1' then redis.call('SET', KEYS[2], '1') end
  if ARGV[5] ~= '' then redis.call('SET', KEYS[3], ARGV[5]) end
  return id
end
"""

# KEYS: the inbox stream. ARGV: the group, the worker, then entry ids. Resets the
# idle time (the lease) of each entry the worker still holds, and only those: an
# entry taken over by another worker stays theirs.
_RENEW = """
for i = 3, #ARGV do
  local held = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2])
  if #held > 0 then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
  end
end
return 0
"""

# KEYS: the inbox stream. ARGV: the group, the worker, the idle time (ms) that makes
# an entry any worker's to take, then entry ids. Each one the worker still holds is
# made that idle (JUSTID: its delivery count stays), so the next take claims it.
_HAND_BACK = """
for i = 4, #ARGV do
  local held = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2])
  if #held > 0 then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'IDLE', ARGV[3], 'JUSTID')
  end
end
return 0
"""

# KEYS: the inbox stream. ARGV: the group, the entry id. Worked off: acknowledged
# and deleted, so the stream holds only unfinished work.
_DONE = """
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
return redis.call('XDEL', KEYS[1], ARGV[2])
"""


# KEYS: a card's lock. ARGV: our token. Deleted only while it is still ours, so a
# holder whose lease ran out cannot free the next holder's lock.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


RELEASED_IDLE_MS = 86_400_000
"""How idle a released intake entry is made: a day, longer than any lease."""
_SCAN_COUNT = 1000
"""Keys a ``SCAN`` step of ``records`` looks at (its ``COUNT``)."""
_GET_BATCH = 500
"""Records ``records`` reads per pipeline."""


class RedisChatState:
    """The chat state on the store's Redis or Redis Cluster, under keys of its own."""

    def __init__(self, url: str) -> None:
        server_url, prefix = split_prefix(url)
        self.keys = k.ChatKeys(prefix, SHARDS if is_cluster(url) else 0)
        self._redis = redis_client(server_url)
        self._add_vote = self._redis.register_script(_ADD_VOTE)
        self._enqueue = self._redis.register_script(single_script(_ENQUEUE))
        # Batched on one server only: on a cluster a delivery's keys are in its thread's
        # slot, and a burst's in many.
        self._enqueue_together = (
            None
            if is_cluster(url)
            else BatchedScript(cast(Redis, self._redis), _ENQUEUE, name="redis-intake")
        )
        self._renew = self._redis.register_script(_RENEW)
        self._hand_back = self._redis.register_script(_HAND_BACK)
        self._done = self._redis.register_script(_DONE)
        self._take_due = self._redis.register_script(_TAKE_DUE)
        self._release = self._redis.register_script(_RELEASE)
        self._next_prune = 0.0
        self._next_group = 0

    def card_lock(
        self, run_id: str, ask: str, *, wait: float = 30.0
    ) -> AbstractAsyncContextManager[None]:
        key = self.keys.card_lock(run_id, ask)

        async def take(token: str) -> bool:
            ttl = int(CARD_LOCK_TTL * 1000)
            return bool(await self._redis.set(key, token, nx=True, px=ttl))

        async def give_back(token: str) -> None:
            await self._release(keys=[key], args=[token])

        return hold_lease(f"card {run_id}:{ask}", wait, take=take, give_back=give_back)

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
        # One slot (the run's tag): the ask is indexed with its card, for ``forget``.
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.sadd(self.keys.asks(run_id), ask)
            pipe.set(self.keys.card(run_id, ask), text)
            await pipe.execute()

    async def card_of(self, run_id: str, ask: str) -> CardPlace | None:
        data = await self._redis.get(self.keys.card(run_id, ask))
        return CARD_PLACE.validate_json(data) if data is not None else None

    async def add_vote(self, run_id: str, ask: str, voter: Person) -> list[Person]:
        key = self.keys.votes(run_id, ask)
        await self._redis.sadd(self.keys.asks(run_id), ask)  # before the vote: none unindexed
        rows = await self._add_vote(keys=[key], args=[voter.id, PERSON.dump_json(voter).decode()])
        return [PERSON.validate_json(row) for row in cast(list[str], rows)]

    async def set_grant(self, thread_id: str, key: str, until: float, granted_by: str) -> None:
        entry = json.dumps({"until": until, "by": granted_by})
        await self._redis.hset(self.keys.grants(thread_id), key, entry)
        # The granter's index (another slot on a cluster): a lookup checks each thread's
        # hash, so an index entry that outlived its grant only costs a read.
        await self._redis.sadd(self.keys.grants_by(granted_by), thread_id)

    async def grant(self, thread_id: str, key: str, now: float) -> str | None:
        data = await self._redis.hget(self.keys.grants(thread_id), key)
        if data is None:
            return None
        entry = json.loads(cast(str, data))
        return str(entry["by"]) if float(entry["until"]) > now else None

    async def revoke_grants(self, thread_id: str) -> int:
        key = self.keys.grants(thread_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hlen(key)
            pipe.delete(key)
            count, _ = await pipe.execute()
        return int(count)

    async def index_waiting(self, scope: str, names: Sequence[str], run_id: str) -> None:
        sets = [self.keys.waiting(scope, name) for name in names]
        if sets:  # the run's own record of them first: ``forget`` finds every one
            await self._redis.sadd(self.keys.waiting_of(run_id), *sets)
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in sets:
                pipe.sadd(name, run_id)
            await pipe.execute()

    async def waiting_for(self, scope: str, names: Sequence[str]) -> set[str]:
        if not names:
            return set()
        # One hash tag per workspace: every name's set is in one slot on a cluster.
        found = await self._redis.sunion([self.keys.waiting(scope, name) for name in names])
        return {str(run) for run in cast(set[str], found)}

    async def unindex_waiting(self, scope: str, names: Sequence[str], run_id: str) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.srem(self.keys.waiting(scope, name), run_id)
            await pipe.execute()

    async def revoke_grant(self, thread_id: str, key: str) -> bool:
        return bool(await self._redis.hdel(self.keys.grants(thread_id), key))

    async def grants_given(self, granted_by: str, scope: str, now: float) -> list[tuple[str, str]]:
        index = self.keys.grants_by(granted_by)
        threads = sorted(
            t for t in cast(set[str], await self._redis.smembers(index)) if t.startswith(scope)
        )
        found: list[tuple[str, str]] = []
        for thread_id in threads:
            grants = cast(dict[str, str], await self._redis.hgetall(self.keys.grants(thread_id)))
            held = [
                key
                for key, data in sorted(grants.items())
                if (entry := json.loads(data))["by"] == granted_by and float(entry["until"]) > now
            ]
            if not held and not any(json.loads(d)["by"] == granted_by for d in grants.values()):
                await self._redis.srem(index, thread_id)  # nothing of theirs left there
            found += [(thread_id, key) for key in held]
        return found

    async def set_note(self, key: str, value: str, *, ttl: float) -> None:
        await self._redis.set(self.keys.note(key), value, px=max(1, round(ttl * 1000)))

    async def note(self, key: str) -> str | None:
        value = await self._redis.get(self.keys.note(key))
        return None if value is None else str(value)

    async def take_note(self, key: str) -> str | None:
        value = await self._redis.getdel(self.keys.note(key))
        return None if value is None else str(value)

    async def put_record(self, key: str, value: str) -> None:
        await self._redis.set(self.keys.record(key), value)

    async def record(self, key: str) -> str | None:
        value = await self._redis.get(self.keys.record(key))
        return None if value is None else str(value)

    async def drop_records(self, keys: Sequence[str]) -> int:
        # One key at a time: each record has a slot of its own on a cluster.
        dropped = [await self._redis.delete(self.keys.record(key)) for key in set(keys)]
        return sum(int(n) for n in dropped)

    async def records(self, prefix: str) -> list[tuple[str, str]]:
        """``SCAN`` with ``MATCH`` (on a cluster redis-py's ``scan_iter`` walks every
        primary), then the values in pipelines of ``_GET_BATCH``: a listing, never on a
        request's path. SCAN may name a key twice; each is read once."""
        pattern = self.keys.records_pattern(prefix)
        names = {name async for name in self._redis.scan_iter(match=pattern, count=_SCAN_COUNT)}
        keyed = sorted((self.keys.record_key(name), name) for name in names)
        found: list[tuple[str, str]] = []
        for start in range(0, len(keyed), _GET_BATCH):
            batch = keyed[start : start + _GET_BATCH]
            # Not a transaction: on a cluster each record is in a slot of its own.
            async with self._redis.pipeline(transaction=False) as pipe:
                for _, name in batch:
                    pipe.get(name)
                values = await pipe.execute()
            found += [
                (key, str(value))
                for (key, _), value in zip(batch, values, strict=True)
                if value is not None  # dropped since the scan
            ]
        return found

    async def push_recent(self, key: str, item: str, *, keep: int) -> None:
        name = self.keys.recent(key)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.lpush(name, item)
            pipe.ltrim(name, 0, keep - 1)
            await pipe.execute()

    async def recent(self, key: str) -> list[str]:
        return [str(item) for item in await self._redis.lrange(self.keys.recent(key), 0, -1)]

    async def set_timer(self, key: str, due: float, data: str) -> None:
        dues, datas = self.keys.timers()
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(datas, key, data)
            pipe.zadd(dues, {key: due})
            await pipe.execute()

    async def take_due(self, now: float, *, limit: int = 100) -> list[tuple[str, str]]:
        rows = cast(
            list[str], await self._take_due(keys=list(self.keys.timers()), args=[now, limit])
        )
        return list(zip(rows[::2], rows[1::2], strict=True))

    async def votes(self, run_id: str, ask: str) -> list[Person]:
        rows = await self._redis.lrange(self.keys.votes(run_id, ask), 0, -1)
        return [PERSON.validate_json(row) for row in cast(list[str], rows)]

    async def enqueue(
        self, body: str, *, keys: Sequence[str], ttl: float, note: ThreadNote | None = None
    ) -> str | None:
        """One Lua script: the follow check, the dedupe claim, ``XADD``, the note."""
        px = max(k.MIN_TTL_MS, math.ceil(ttl * 1000))
        thread_id = note.thread_id if note is not None else ""
        # A thread's deliveries share its group (so do its copies: any shared key
        # is a copy); the rest share the first group.
        shard = self.keys.shard(thread_id) if note is not None else 0
        seen = [self.keys.seen(key, shard) for key in keys]
        marks = [self.keys.follow(thread_id), self.keys.reference(thread_id)]
        if note is None:  # no thread: names in the group, never written
            marks = [self.keys.seen("", shard)] * 2
        reference = note.reference if note is not None else None
        args: list[str | int] = [
            px,
            body,
            "1" if note is not None and note.only_if_followed else "0",
            "1" if note is not None and note.follow else "0",
            json.dumps(reference, ensure_ascii=False) if reference is not None else "",
        ]
        call = ScriptCall([self.keys.inbox(shard), *marks, *seen], args)
        if self._enqueue_together is None:
            entry_id = await self._enqueue(keys=list(call.keys), args=args)
        else:
            entry_id = await self._enqueue_together(call)
        return self._entry(shard, cast(str, entry_id)) if entry_id is not None else None

    def _entry(self, shard: int, stream_id: str) -> str:
        return f"{shard}/{stream_id}" if self.keys.shards else stream_id

    def _locate(self, entry_id: str) -> tuple[int, str]:
        """The group and stream id of an entry id."""
        if not self.keys.shards:
            return 0, entry_id
        shard, _, stream_id = entry_id.partition("/")
        return int(shard), stream_id

    async def take(
        self, worker: str, *, count: int, lease: float, take_over: bool = True
    ) -> list[IntakeEntry]:
        """``XAUTOCLAIM`` what lapsed, then ``XREADGROUP`` new entries for the rest.

        On a cluster, group after group, starting each time one further on.
        """
        idle = max(k.MIN_TTL_MS, math.ceil(lease * 1000)) if take_over else 0
        groups = list(self.keys.groups)
        start, self._next_group = self._next_group, (self._next_group + 1) % len(groups)
        await self._forget_gone_workers(worker)
        taken: list[IntakeEntry] = []
        failed: Exception | None = None
        for shard in groups[start:] + groups[:start]:
            if len(taken) >= count:
                break
            try:
                taken += await self._take_group(shard, worker, count - len(taken), idle)
            except Exception as exc:
                # One shard away (a failover): what the other groups gave is this
                # worker's now, so it is returned, never stranded for a lease.
                failed = failed or exc
        if failed is not None and not taken:
            raise failed
        return taken

    async def _take_group(
        self, shard: int, worker: str, count: int, idle: int
    ) -> list[IntakeEntry]:
        stream = self.keys.inbox(shard)
        try:
            entries = await self._take(stream, worker, count, idle)
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # First use, or the stream was removed: the group starts at the
            # beginning, so entries written before it are not skipped.
            try:
                await self._redis.xgroup_create(stream, k.INBOX_GROUP, id="0", mkstream=True)
            except ResponseError as race:
                if "BUSYGROUP" not in str(race):
                    raise
            entries = await self._take(stream, worker, count, idle)
        return [
            IntakeEntry(id=self._entry(shard, e.id), body=e.body, attempts=e.attempts)
            for e in entries
        ]

    async def _forget_gone_workers(self, worker: str) -> None:
        """Delete consumers of processes long gone (each restart names a new one).

        Only those holding nothing: deleting a consumer drops its pending entries.
        """
        now = time.monotonic()
        if now < self._next_prune:
            return
        self._next_prune = now + k.PRUNE_INTERVAL
        for shard in self.keys.groups:
            stream = self.keys.inbox(shard)
            try:
                consumers = await self._redis.xinfo_consumers(stream, k.INBOX_GROUP)
            except ResponseError:
                continue  # no stream or no group yet: nobody to forget
            for consumer in consumers:
                name = consumer["name"]
                idle = consumer["idle"]
                if name != worker and not consumer["pending"] and idle > k.GONE_AFTER_MS:
                    await self._redis.xgroup_delconsumer(stream, k.INBOX_GROUP, name)

    async def _take(self, stream: str, worker: str, count: int, idle: int) -> list[IntakeEntry]:
        """Take over entries idle ``idle`` ms (none when 0), then new ones."""
        group = k.INBOX_GROUP
        taken: list[IntakeEntry] = []
        claimed: list[tuple[str, dict[str, str] | None]] = []
        cursor = "0-0"
        # XAUTOCLAIM looks at about ten pending entries per one asked for: follow
        # its cursor, so lapsed entries behind many live ones are still found.
        while idle and len(claimed) < count:
            reply = await self._redis.xautoclaim(
                stream, group, worker, idle, cursor, count=count - len(claimed)
            )
            claimed += cast(list[tuple[str, dict[str, str] | None]], reply[1])
            cursor = cast(str, reply[0])
            if cursor == "0-0":
                break
        for entry_id, fields in claimed:
            if fields:  # a deleted entry comes back without fields
                pending = cast(
                    list[dict[str, Any]],
                    await self._redis.xpending_range(
                        stream, group, min=entry_id, max=entry_id, count=1
                    ),
                )
                attempts = int(pending[0]["times_delivered"]) if pending else 1
                taken.append(IntakeEntry(id=entry_id, body=fields["body"], attempts=attempts))
        if len(taken) < count:
            fresh = await self._redis.xreadgroup(
                group, worker, {stream: ">"}, count=count - len(taken)
            )
            streams = cast(list[tuple[str, list[tuple[str, dict[str, str]]]]], fresh or [])
            for _, entries in streams:
                taken.extend(
                    IntakeEntry(id=entry_id, body=fields["body"], attempts=1)
                    for entry_id, fields in entries
                )
        return taken

    async def renew(self, worker: str, ids: Sequence[str], *, lease: float) -> None:
        by_group: dict[int, list[str]] = defaultdict(list)
        for entry_id in ids:
            shard, stream_id = self._locate(entry_id)
            by_group[shard].append(stream_id)
        await asyncio.gather(
            *(
                self._renew(keys=[self.keys.inbox(shard)], args=[k.INBOX_GROUP, worker, *held])
                for shard, held in by_group.items()
            )
        )

    async def release(self, worker: str, ids: Sequence[str]) -> None:
        """Each entry ``worker`` holds made idle longer than any lease: taken next."""
        by_group: dict[int, list[str]] = defaultdict(list)
        for entry_id in ids:
            shard, stream_id = self._locate(entry_id)
            by_group[shard].append(stream_id)
        await asyncio.gather(
            *(
                self._hand_back(
                    keys=[self.keys.inbox(shard)],
                    args=[k.INBOX_GROUP, worker, RELEASED_IDLE_MS, *held],
                )
                for shard, held in by_group.items()
            )
        )

    async def done(self, entry_id: str) -> None:
        """``XACK`` and ``XDEL`` in one script."""
        shard, stream_id = self._locate(entry_id)
        await self._done(keys=[self.keys.inbox(shard)], args=[k.INBOX_GROUP, stream_id])

    async def forget(self, run_ids: Sequence[str], thread_ids: Sequence[str]) -> None:
        """Each run's keys (one slot: its tag) through its asks and waiting-of sets; each
        thread's keys one by one (a cluster refuses multi-key commands across slots)."""
        for run_id in run_ids:
            asks = cast(set[str], await self._redis.smembers(self.keys.asks(run_id)))
            sets = cast(set[str], await self._redis.smembers(self.keys.waiting_of(run_id)))
            for name in sorted(sets):
                await self._redis.srem(name, run_id)
            keys = [
                *(self.keys.card(run_id, ask) for ask in asks),
                *(self.keys.votes(run_id, ask) for ask in asks),
                self.keys.waiting_of(run_id),
                self.keys.asks(run_id),
            ]
            await self._redis.delete(*keys)
        for thread_id in thread_ids:
            for key in (
                self.keys.follow(thread_id),
                self.keys.reference(thread_id),
                self.keys.grants(thread_id),
            ):
                await self._redis.delete(key)

    async def close(self) -> None:
        await self._redis.aclose()
