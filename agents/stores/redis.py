"""The shared store for several replicas (``redis://host:6379/0?prefix=ab``).

Values are JSON (never pickle); key names and their lifetimes are in
``redis_keys``. Each state change that must happen once is one Lua script or one
script: ``save_run`` checks the revision and moves the run between its indexes
atomically, and a lock is ``SET NX PX`` released by compare-and-delete. Nothing
on a hot path scans the keyspace (only the one-time backfill of the retention
indexes after an upgrade does, a bounded step per ``prunable``; see
``_redis_retention``).

``redis+cluster://`` runs the same scripts on a Redis Cluster: each touches the
keys of one shard group (see ``redis_keys``), and a deployment-wide index is read
from every group at once and merged.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import cast

from redis.exceptions import RedisError

from ..messages import Message
from ..snapshot import (
    AUDIT_ADAPTER,
    AuditEntry,
    RunSnapshot,
    load_snapshot,
    next_revision,
    run_index,
)
from . import redis_keys as k
from ._lease import hold_lease
from ._redis_retention import BACKFILL_BATCH, RedisRetention
from .base import (
    AUDIT_PRUNE_BATCH,
    PRUNE_BATCH,
    Pruned,
    Remember,
    StoreConflict,
    check_audit,
)
from .redis_url import POOL_SIZE, is_cluster, redis_client, split_prefix

# KEYS: run hash, expiring index, in-flight index, done index[, paused index, live
# index and runs index of the thread], then the audit lists the entries go to (from
# KEYS[ARGV[11]] on).
# ARGV: expected revision, snapshot JSON, thread id or '', run id, '1' if a paused
# root run, creation score, expiry score or '', '1' if a root run has work in flight,
# what the paused index's name has before and after the thread id (to drop the
# run from a thread it no longer belongs to; the same shard group on a cluster),
# the index of the first audit list in KEYS, '1' if a live root run (paused or in
# flight), what the live index's name has before and after the thread id, the
# last-change score if a finished root run or '', the last-change score if a root
# run or '', what the runs index's name has before and after the thread id, how
# many audit entries follow, the audit entries' JSON, then what to do with the
# thread's history, the last key ('' nothing, 'append': the window and the
# messages' JSON follow, 'read').
# Returns {1, old revision[, the history]} when saved, {0, stored revision or -1}
# otherwise.
_SAVE_RUN_TEMPLATE = """
local stored = redis.call('HGET', KEYS[1], '$REV')
local current = tonumber(stored or '0')
if current ~= tonumber(ARGV[1]) then
  if stored then return {0, current} end
  return {0, -1}
end
local run_id = ARGV[4]
local old_thread = redis.call('HGET', KEYS[1], '$THREAD')
redis.call('HSET', KEYS[1], '$REV', current + 1, '$THREAD', ARGV[3], '$SNAPSHOT', ARGV[2])
if old_thread and old_thread ~= '' and old_thread ~= ARGV[3] then
  redis.call('ZREM', ARGV[9] .. old_thread .. ARGV[10], run_id)
  redis.call('ZREM', ARGV[13] .. old_thread .. ARGV[14], run_id)
  redis.call('ZREM', ARGV[17] .. old_thread .. ARGV[18], run_id)
end
local lists = tonumber(ARGV[11])
if lists == 8 then
  if ARGV[5] == '1' then
    redis.call('ZADD', KEYS[5], ARGV[6], run_id)
  else
    redis.call('ZREM', KEYS[5], run_id)
  end
  if ARGV[12] == '1' then
    redis.call('ZADD', KEYS[6], ARGV[6], run_id)
  else
    redis.call('ZREM', KEYS[6], run_id)
  end
  if ARGV[16] ~= '' then redis.call('ZADD', KEYS[7], ARGV[16], run_id) end
end
if ARGV[5] == '1' and ARGV[7] ~= '' then
  redis.call('ZADD', KEYS[2], ARGV[7], run_id)
else
  redis.call('ZREM', KEYS[2], run_id)
end
if ARGV[8] == '1' then
  redis.call('ZADD', KEYS[3], ARGV[6], run_id)
else
  redis.call('ZREM', KEYS[3], run_id)
end
if ARGV[15] ~= '' then
  redis.call('ZADD', KEYS[4], ARGV[15], run_id)
else
  redis.call('ZREM', KEYS[4], run_id)
end
local entries = tonumber(ARGV[19])
local mode = ARGV[20 + entries]
local last_list = #KEYS
if mode ~= '' then last_list = #KEYS - 1 end
for i = 20, 19 + entries do
  for j = lists, last_list do redis.call('RPUSH', KEYS[j], ARGV[i]) end
end
if mode == 'append' then
  local window = tonumber(ARGV[21 + entries])
  if window <= 0 then
    redis.call('DEL', KEYS[#KEYS])
  else
    if #ARGV >= 22 + entries then redis.call('RPUSH', KEYS[#KEYS], unpack(ARGV, 22 + entries)) end
    redis.call('LTRIM', KEYS[#KEYS], -window, -1)
  end
elseif mode == 'read' then
  return {1, current, redis.call('LRANGE', KEYS[#KEYS], 0, -1)}
end
return {1, current}
"""
_SAVE_RUN = (
    _SAVE_RUN_TEMPLATE.replace("$REV", k.RUN_REVISION_FIELD)
    .replace("$THREAD", k.RUN_THREAD_FIELD)
    .replace("$SNAPSHOT", k.RUN_SNAPSHOT_FIELD)
)

# KEYS: the lock. ARGV: our token. Deletes the lock only while it is still ours,
# so a holder whose lease ran out cannot free the next holder's lock.
_RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# KEYS: the history list. ARGV: the window, then the messages' JSON. Appends and
# keeps the last ``window`` (none when it is 0).
_APPEND_HISTORY = """
local window = tonumber(ARGV[1])
if window <= 0 then return redis.call('DEL', KEYS[1]) end
if #ARGV > 1 then redis.call('RPUSH', KEYS[1], unpack(ARGV, 2)) end
return redis.call('LTRIM', KEYS[1], -window, -1)
"""

# KEYS: audit lists. ARGV: the entry's JSON, appended to each.
_APPEND_AUDIT = """
for i = 1, #KEYS do redis.call('RPUSH', KEYS[i], ARGV[1]) end
return #KEYS
"""


class RedisStore:
    """The store protocol over one Redis primary, shared by every replica.

    Attributes:
        url: The URL the store was opened with.
        keys: The key names under this store's prefix.
    """

    def __init__(
        self, url: str, *, pool_size: int = POOL_SIZE, backfill_batch: int = BACKFILL_BATCH
    ) -> None:
        self.url = url
        server_url, prefix = split_prefix(url)
        self.keys = k.RedisKeys(prefix, k.SHARDS if is_cluster(url) else 0)
        self._redis = redis_client(server_url, pool_size=pool_size)
        self._save = self._redis.register_script(_SAVE_RUN)
        self._release = self._redis.register_script(_RELEASE_LOCK)
        self._append_history = self._redis.register_script(_APPEND_HISTORY)
        self._append_audit = self._redis.register_script(_APPEND_AUDIT)
        self._retention = RedisRetention(
            self._redis,
            self.keys,
            backfill_batch=backfill_batch,
            merged=self._merged,
            live_runs=self.thread_runs,
        )

    async def load_run(self, run_id: str) -> RunSnapshot | None:
        """The snapshot of a run, or ``None``."""
        data = await self._redis.hget(self.keys.run(run_id), k.RUN_SNAPSHOT_FIELD)
        return load_snapshot(data) if data is not None else None

    async def save_run(
        self,
        snapshot: RunSnapshot,
        audit: Sequence[AuditEntry] = (),
        *,
        remember: Remember | None = None,
    ) -> RunSnapshot:
        """Compare-and-set, index upkeep, the audit entries and the history it remembers
        in one Lua script (on a cluster, whose history has a slot of its own, the
        history right after); see ``Store.save_run``."""
        saved, _ = await self._save_run(snapshot, audit, remember=remember)
        return saved

    async def start_run(self, snapshot: RunSnapshot) -> tuple[RunSnapshot, list[Message]]:
        """The save and the history's read in one script (two calls on a cluster)."""
        return await self._save_run(snapshot, (), read_history=True)

    async def _save_run(
        self,
        snapshot: RunSnapshot,
        audit: Sequence[AuditEntry],
        *,
        remember: Remember | None = None,
        read_history: bool = False,
    ) -> tuple[RunSnapshot, list[Message]]:
        check_audit(snapshot, audit)
        saved, data = next_revision(snapshot)
        run_id = saved.run_id
        index = run_index(saved)
        paused, expiry, in_flight = index.paused, index.expires_at, index.in_flight
        shard = self.keys.shard(run_id)
        keys = [
            self.keys.run(run_id),
            self.keys.expiring(shard),
            self.keys.in_flight(shard),
            self.keys.done(shard),
        ]
        if saved.thread_id is not None:
            keys.append(self.keys.paused(saved.thread_id, shard))
            keys.append(self.keys.live(saved.thread_id, shard))
            keys.append(self.keys.thread_runs(saved.thread_id, shard))
        changed = repr(saved.updated_at.timestamp())
        args: list[str | int] = [
            snapshot.revision,
            data,
            saved.thread_id or "",
            run_id,
            "1" if paused else "0",
            repr(saved.created_at.timestamp()),
            repr(expiry.timestamp()) if expiry is not None else "",
            "1" if in_flight else "0",
            *self.keys.paused_affixes(shard),
            len(keys) + 1,
            "1" if index.live else "0",
            *self.keys.live_affixes(shard),
            changed if saved.is_root and not index.live else "",
            changed if saved.is_root else "",
            *self.keys.thread_runs_affixes(shard),
            len(audit),
            *(entry.model_dump_json() for entry in audit),
        ]
        if audit:
            keys += self._audit_keys(run_id, saved.thread_id, shard)
        thread = saved.thread_id
        # One script when the history may share it: one server, no slots.
        along = thread is not None and not self.keys.shards
        if along and remember is not None and thread is not None:
            keys.append(self.keys.history(thread))
            args += ["append", remember.window, *(m.model_dump_json() for m in remember.messages)]
        elif along and read_history and thread is not None:
            keys.append(self.keys.history(thread))
            args.append("read")
        else:
            args.append("")
        if not saved.is_root and snapshot.revision == 0:
            # Before the child exists: a tree pruned later finds every child it has.
            await self._redis.sadd(self.keys.children(saved.root_run_id, shard), run_id)
        if self.keys.shards and saved.is_root and saved.thread_id and snapshot.revision == 0:
            # Before the run exists: a prune that missed it keeps the thread's history.
            hold = self.keys.history_hold(saved.thread_id)
            await self._redis.set(hold, repr(saved.created_at.timestamp()), px=k.HISTORY_HOLD_MS)
        answer = await self._save(keys=keys, args=args)
        if not answer[0]:
            actual = int(answer[1])
            raise StoreConflict(run_id, snapshot.revision, None if actual < 0 else actual)
        history = [Message.model_validate_json(m) for m in answer[2]] if len(answer) > 2 else []
        if not along and thread is not None:  # a cluster: the history's own slot
            if remember is not None:
                await self.append_history(thread, remember.messages, window=remember.window)
            if read_history:
                history = await self.load_history(thread)
        return saved, history

    def lock(
        self, name: str, *, ttl: float = 30.0, wait: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        """A ``SET NX PX`` lease with a random token, released by compare-and-delete."""
        key = self.keys.lock(name)

        async def take(token: str) -> bool:
            return bool(await self._redis.set(key, token, nx=True, px=_milliseconds(ttl)))

        async def give_back(token: str) -> None:
            await self._release(keys=[key], args=[token])

        return hold_lease(name, ttl if wait is None else wait, take=take, give_back=give_back)

    async def beat(self, run_id: str, until: datetime) -> None:
        """``SET`` the heartbeat key, expiring at ``until`` (``PXAT``)."""
        stamp = until.timestamp()
        key = self.keys.alive(run_id)
        if stamp <= time.time():
            await self._redis.delete(key)  # already over
            return
        await self._redis.set(key, repr(stamp), pxat=math.ceil(stamp * 1000))

    async def alive_until(self, run_id: str) -> datetime | None:
        """The heartbeat's time, while its key lives."""
        data = await self._redis.get(self.keys.alive(run_id))
        return datetime.fromtimestamp(float(data), UTC) if data is not None else None

    async def paused_runs(self, thread_id: str) -> list[str]:
        """Root runs of the thread waiting for a person, oldest first."""
        return await self._merged(
            lambda shard: self._redis.zrange(
                self.keys.paused(thread_id, shard), 0, -1, withscores=True
            )
        )

    async def thread_runs(self, thread_id: str) -> list[str]:
        """Root runs of the thread that wait for a person or work, oldest first.

        The thread's waiting runs are read too: a run paused before this index existed
        (an upgrade) is found all the same.
        """
        live = await self._merged(
            lambda shard: self._redis.zrange(
                self.keys.live(thread_id, shard), 0, -1, withscores=True
            )
        )
        return list(dict.fromkeys([*await self.paused_runs(thread_id), *live]))

    async def runs_expiring(self, before: datetime) -> list[str]:
        """Root paused runs with a pending call expiring before ``before``, soonest first."""
        upper = f"({before.timestamp()!r}"
        return await self._merged(
            lambda shard: self._redis.zrangebyscore(
                self.keys.expiring(shard), "-inf", upper, withscores=True
            )
        )

    async def runs_in_flight(self) -> list[str]:
        """Root runs with a claimed call whose outcome was never recorded, oldest first."""
        return await self._merged(
            lambda shard: self._redis.zrange(self.keys.in_flight(shard), 0, -1, withscores=True)
        )

    async def _merged(self, read: Callable[[int], Awaitable[object]]) -> list[str]:
        """An index read from each shard group at once, merged by score (then member)."""
        replies = await asyncio.gather(*(read(shard) for shard in self.keys.groups))
        rows = cast(list[list[tuple[str, float]]], replies)
        return [member for member, _ in heapq.merge(*rows, key=lambda row: (row[1], row[0]))]

    async def load_history(self, thread_id: str) -> list[Message]:
        """The thread's remembered conversation, oldest first."""
        items = await self._redis.lrange(self.keys.history(thread_id), 0, -1)
        return [Message.model_validate_json(item) for item in items]

    async def append_history(
        self, thread_id: str, messages: Sequence[Message], *, window: int
    ) -> None:
        """``RPUSH`` then ``LTRIM`` to ``window``, in one script."""
        lines = [m.model_dump_json() for m in messages]
        await self._append_history(keys=[self.keys.history(thread_id)], args=[window, *lines])

    async def append_audit(self, entry: AuditEntry) -> None:
        """Append to the run's, the thread's and the deployment's audit lists at once."""
        shard = self.keys.shard(entry.run_id)
        keys = self._audit_keys(entry.run_id, entry.thread_id, shard)
        await self._append_audit(keys=keys, args=[entry.model_dump_json()])

    def _audit_keys(self, run_id: str, thread_id: str | None, shard: int) -> list[str]:
        """The lists an entry of a run goes to: the run's, the deployment's, the thread's."""
        keys = [self.keys.audit_run(run_id), self.keys.audit_all(shard)]
        if thread_id is not None:
            keys.append(self.keys.audit_thread(thread_id, shard))
        return keys

    async def list_audit(
        self, *, run_id: str | None = None, thread_id: str | None = None
    ) -> list[AuditEntry]:
        """Audit entries of a run and/or a thread (all when neither), oldest first."""
        if run_id is not None:
            keys = [self.keys.audit_run(run_id)]
        elif thread_id is not None:
            keys = [self.keys.audit_thread(thread_id, shard) for shard in self.keys.groups]
        else:
            keys = [self.keys.audit_all(shard) for shard in self.keys.groups]
        lists = await asyncio.gather(*(self._redis.lrange(key, 0, -1) for key in keys))
        groups = [[AUDIT_ADAPTER.validate_json(line) for line in lines] for lines in lists]
        # Each group's list is in the order written; groups interleave by time.
        entries = list(heapq.merge(*groups, key=lambda entry: entry.at))
        if run_id is not None and thread_id is not None:
            entries = [e for e in entries if e.thread_id == thread_id]
        return entries

    async def prunable(self, before: datetime, *, limit: int = PRUNE_BATCH) -> Pruned:
        """The oldest due roots from the done index (of every group), their children and
        the threads left with no other root run; see ``Store.prunable``.

        First a step of the one-time backfill of runs saved before these indexes; until
        every child is indexed, nothing is due (``more``)."""
        return await self._retention.prunable(before, limit=limit)

    async def prune(self, due: Pruned) -> Pruned:
        """Each listed thread's history first, each checked and deleted at once, then
        each root run still due after its children; see ``Store.prune`` and
        ``RedisRetention.prune``."""
        return await self._retention.prune(due)

    async def prune_audit(self, before: datetime, *, limit: int = AUDIT_PRUNE_BATCH) -> int:
        """The oldest entries of the deployment's lists (of every group, merged by time),
        each group's trimmed from its start with the run's and thread's lists of what
        it removes, in one script; see ``Store.prune_audit``."""
        return await self._retention.prune_audit(before, limit=limit)

    async def ping(self) -> bool:
        """Whether the server answers ``PING``."""
        try:
            return bool(await self._redis.ping())
        except (RedisError, OSError):
            return False

    async def close(self) -> None:
        """Close the client and its connection pool."""
        await self._redis.aclose()


def _milliseconds(ttl: float) -> int:
    return max(k.MIN_TTL_MS, math.ceil(ttl * 1000))
