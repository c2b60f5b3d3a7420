"""The shared store for several replicas (``redis://host:6379/0?prefix=ab``).

Values are JSON (never pickle); key names and their lifetimes are in
``redis_keys``. Each state change that must happen once is one Lua script or one
script: ``save_run`` checks the revision and moves the run between its indexes
atomically, and a lock is ``SET NX PX`` released by compare-and-delete. Nothing
on a hot path scans the keyspace (only the one-time backfill of the retention
indexes after an upgrade does, a bounded step per ``prune``).

``redis+cluster://`` runs the same scripts on a Redis Cluster: each touches the
keys of one shard group (see ``redis_keys``), and a deployment-wide index is read
from every group at once and merged.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Literal, cast

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
from .base import PRUNE_BATCH, Pruned, StoreConflict, check_audit
from .redis_url import POOL_SIZE, is_cluster, primaries, redis_client, scan_primary, split_prefix

log = logging.getLogger(__name__)

BACKFILL_BATCH = 5000
"""Keys the backfill of the indexes looks at per ``prune`` call at most (SCAN counts)."""
_SCAN_COUNT = 1000

# The backfill's phases, in order. ``children``: each sub-agent run joins its root's
# set and each root run its thread's runs index; ``done``: each finished root run joins
# the done index. A root becomes prunable only once every child anywhere is indexed.
_Phase = Literal["children", "done"]
_BACKFILL_PHASES: tuple[_Phase, ...] = ("children", "done")

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
# run or '', what the runs index's name has before and after the thread id, then
# the audit entries' JSON.
# Returns {1, old revision} when saved, {0, stored revision or -1} otherwise.
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
for i = 19, #ARGV do
  for j = lists, #KEYS do redis.call('RPUSH', KEYS[j], ARGV[i]) end
end
return {1, current}
"""
_SAVE_RUN = (
    _SAVE_RUN_TEMPLATE.replace("$REV", k.RUN_REVISION_FIELD)
    .replace("$THREAD", k.RUN_THREAD_FIELD)
    .replace("$SNAPSHOT", k.RUN_SNAPSHOT_FIELD)
)

# KEYS: a root run's hash, the done index[, the runs index of its thread]. ARGV: the
# run id, the cut-off score. Removes the run if it is still finished and last changed
# before the cut-off (a save since moved it out of the done index); 1 if removed.
_PRUNE_ROOT = """
local changed = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not changed or tonumber(changed) >= tonumber(ARGV[2]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if #KEYS > 2 then redis.call('ZREM', KEYS[3], ARGV[1]) end
return 1
"""

# KEYS: a run's hash, an index of its group. ARGV: the revision read, the run id, its
# score. Adds the run to the index unless it is there or the run was saved since (that
# save indexed it). The backfill's write: the same slot as the run on a cluster.
_INDEX_UNCHANGED = """
if redis.call('HGET', KEYS[1], '$REV') ~= ARGV[1] then return 0 end
return redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[2])
""".replace("$REV", k.RUN_REVISION_FIELD)

# KEYS: the backfill's hash. ARGV: a cursor's field, its value as read ('' before the
# first step), the next. Moves it on only from what was read: replicas never move a
# scan back.
_ADVANCE_CURSOR = """
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""

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
        self._backfill_batch = backfill_batch
        self._backfilled = False
        server_url, prefix = split_prefix(url)
        self.keys = k.RedisKeys(prefix, k.SHARDS if is_cluster(url) else 0)
        self._redis = redis_client(server_url, pool_size=pool_size)
        self._save = self._redis.register_script(_SAVE_RUN)
        self._release = self._redis.register_script(_RELEASE_LOCK)
        self._append_history = self._redis.register_script(_APPEND_HISTORY)
        self._append_audit = self._redis.register_script(_APPEND_AUDIT)
        self._prune_root = self._redis.register_script(_PRUNE_ROOT)
        self._index_unchanged = self._redis.register_script(_INDEX_UNCHANGED)
        self._advance_cursor = self._redis.register_script(_ADVANCE_CURSOR)

    async def load_run(self, run_id: str) -> RunSnapshot | None:
        """The snapshot of a run, or ``None``."""
        data = await self._redis.hget(self.keys.run(run_id), k.RUN_SNAPSHOT_FIELD)
        return load_snapshot(data) if data is not None else None

    async def save_run(
        self, snapshot: RunSnapshot, audit: Sequence[AuditEntry] = ()
    ) -> RunSnapshot:
        """Compare-and-set, index upkeep and the audit entries in one Lua script (one
        slot on a cluster: the run's shard group); see ``Store.save_run``."""
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
            *(entry.model_dump_json() for entry in audit),
        ]
        if audit:
            keys += self._audit_keys(run_id, saved.thread_id, shard)
        if not saved.is_root and snapshot.revision == 0:
            # Before the child exists: a tree pruned later finds every child it has.
            await self._redis.sadd(self.keys.children(saved.root_run_id, shard), run_id)
        done, actual = await self._save(keys=keys, args=args)
        if not done:
            raise StoreConflict(run_id, snapshot.revision, None if actual < 0 else int(actual))
        return saved

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

    async def prune(self, before: datetime, *, limit: int = PRUNE_BATCH) -> Pruned:
        """The oldest due roots from the done index (of every group), each removed after
        its children (a crash in between leaves the root to prune again, never an
        orphan); then the history of their threads with no root run left.

        First a step of the one-time backfill of runs saved before these indexes
        (``_backfill``); until every child is indexed, nothing is removed."""
        if not await self._backfill():
            return Pruned(more=True)
        cutoff = before.timestamp()
        upper = f"({cutoff!r}"
        due = (
            await self._merged(
                lambda shard: self._redis.zrangebyscore(
                    self.keys.done(shard), "-inf", upper, start=0, num=limit, withscores=True
                )
            )
        )[:limit]
        removed: list[str] = []
        threads: set[str] = set()
        for root in due:
            thread_id = cast(
                str | None, await self._redis.hget(self.keys.run(root), k.RUN_THREAD_FIELD)
            )
            children = await self._remove_children(root)
            shard = self.keys.shard(root)
            keys = [self.keys.run(root), self.keys.done(shard)]
            if thread_id:
                keys.append(self.keys.thread_runs(thread_id, shard))
                threads.add(thread_id)
            if await self._prune_root(keys=keys, args=[root, repr(cutoff)]):
                await self._redis.delete(self.keys.alive(root))
                removed += [*children, root]
        gone = [t for t in sorted(threads) if await self._left_alone(t)]
        for thread_id in gone:
            await self._redis.delete(self.keys.history(thread_id))
        return Pruned(run_ids=tuple(removed), thread_ids=tuple(gone))

    async def _remove_children(self, root: str) -> list[str]:
        """Delete a root run's sub-agent runs (group by group on a cluster)."""
        removed: list[str] = []
        for shard in self.keys.groups:
            index = self.keys.children(root, shard)
            children = sorted(_strings(await self._redis.smembers(index)))
            # One key at a time: a cluster refuses a multi-key command across slots.
            for child in children:
                await self._redis.delete(self.keys.run(child))
            await self._redis.delete(index)
            removed += children
        return removed

    async def _backfill(self) -> bool:
        """One bounded step of indexing the runs saved before the ``thread-runs``,
        ``children`` and ``done`` indexes (an upgrade), resumed from the cursors in the
        backfill's hash, until the marker says every primary was scanned.

        Idempotent: replicas may step at once. Returns whether the ``children`` phase
        is complete, so a root can be pruned with every child it has.
        """
        if self._backfilled:
            return True
        state = cast(dict[str, str], await self._redis.hgetall(self.keys.backfill()))
        if state.get(k.BACKFILL_COMPLETE_FIELD):
            self._backfilled = True
            return True
        nodes = await primaries(self._redis)
        budget = self._backfill_batch
        for phase in _BACKFILL_PHASES:
            for node in nodes:
                field = k.backfill_cursor(phase, node)
                cursor = state.get(field, "")
                while cursor != k.BACKFILL_END:
                    if budget <= 0:
                        return phase != "children"
                    count = min(budget, _SCAN_COUNT)
                    budget -= count
                    following, keys = await scan_primary(
                        self._redis,
                        node,
                        int(cursor or 0),
                        match=self.keys.run_pattern(),
                        count=count,
                    )
                    await asyncio.gather(*(self._index_old_run(phase, key) for key in keys))
                    moved = str(following) if following else k.BACKFILL_END
                    step = [field, cursor, moved]
                    if not await self._advance_cursor(keys=[self.keys.backfill()], args=step):
                        return phase != "children"  # another replica is further on
                    cursor = moved
        await self._redis.hset(self.keys.backfill(), k.BACKFILL_COMPLETE_FIELD, "1")
        self._backfilled = True
        return True

    async def _index_old_run(self, phase: _Phase, key: str) -> None:
        """Index one run found by the backfill as ``save_run`` indexes it now."""
        revision, data = cast(
            list[str | None],
            await self._redis.hmget(key, [k.RUN_REVISION_FIELD, k.RUN_SNAPSHOT_FIELD]),
        )
        if revision is None or data is None:
            return  # removed since the scan found it
        try:
            snap = load_snapshot(data)
        except ValueError:
            log.warning("%s holds no snapshot this version reads; not indexed", key)
            return
        run_id = snap.run_id
        if self.keys.run(run_id) != key:
            return  # not a run hash of this store
        shard = self.keys.shard(run_id)
        changed = repr(snap.updated_at.timestamp())
        if phase == "children":
            if not snap.is_root:
                if await self._redis.exists(self.keys.run(snap.root_run_id)):
                    await self._redis.sadd(self.keys.children(snap.root_run_id, shard), run_id)
            elif snap.thread_id is not None:
                index = self.keys.thread_runs(snap.thread_id, shard)
                await self._index_unchanged(keys=[key, index], args=[revision, run_id, changed])
        elif snap.is_root and not run_index(snap).live:
            index = self.keys.done(shard)
            await self._index_unchanged(keys=[key, index], args=[revision, run_id, changed])

    async def _left_alone(self, thread_id: str) -> bool:
        """Whether a thread has no root run left (nor one indexed only as waiting or
        working, as runs saved before the runs index are)."""
        counts = await asyncio.gather(
            *(self._redis.zcard(self.keys.thread_runs(thread_id, g)) for g in self.keys.groups)
        )
        return not any(counts) and not await self.thread_runs(thread_id)

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


def _strings(members: object) -> list[str]:
    # redis-py types replies for every decode mode; this client always decodes.
    return cast(list[str], members)
