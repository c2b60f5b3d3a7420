"""The Redis store's retention (``redis.RedisStore``): finished runs and the history of
threads left with no run, pruned in batches; the one-time backfill of the indexes that
finds them after an upgrade; and the start of the audit log.

Each check-and-delete is one Lua script on one slot: a run's shard group on a cluster
(see ``redis_keys``), or a thread's own keys on one primary.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from itertools import islice, takewhile
from typing import Literal, cast

from ..chain import AuditAnchor, Seal, anchor, head_of
from ..snapshot import AUDIT_ADAPTER, AuditEntry, load_snapshot, run_index
from . import redis_keys as k
from .base import AUDIT_PRUNE_BATCH, PRUNE_BATCH, Pruned
from .redis_url import RedisClient, primaries, scan_primary

log = logging.getLogger(__name__)

BACKFILL_BATCH = 5000
"""Keys the backfill of the indexes looks at per ``prunable`` call at most (SCAN counts)."""
_SCAN_COUNT = 1000

# The backfill's phases, in order. ``children``: each sub-agent run joins its root's
# set and each root run its thread's runs index; ``done``: each finished root run joins
# the done index. A root becomes prunable only once every child anywhere is indexed.
_Phase = Literal["children", "done"]
_BACKFILL_PHASES: tuple[_Phase, ...] = ("children", "done")

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

# KEYS: a thread's history, its runs index, its paused and live indexes, the done index
# (one primary: the thread's indexes are its own keys). ARGV: the cut-off score, then
# the prune batch's root runs of the thread. Deletes the history if the thread has no
# root run but those, each still finished and last changed before the cut-off; 1 if so.
_DROP_HISTORY = """
if redis.call('EXISTS', KEYS[3]) == 1 or redis.call('EXISTS', KEYS[4]) == 1 then return 0 end
local batch = {}
for i = 2, #ARGV do batch[ARGV[i]] = true end
for _, run_id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if not batch[run_id] then return 0 end
  local changed = redis.call('ZSCORE', KEYS[5], run_id)
  if not changed or tonumber(changed) >= tonumber(ARGV[1]) then return 0 end
end
redis.call('DEL', KEYS[1])
return 1
"""

# KEYS: a thread's history, its hold (``redis_keys.HISTORY_HOLD``). ARGV: the cut-off
# score. Deletes the history unless a root run created since the cut-off holds it (one
# that is not due); 1 if deleted. A cluster's: the thread's runs in every group were
# checked just before.
_DROP_HISTORY_UNLESS_HELD = """
local held = redis.call('GET', KEYS[2])
if held and tonumber(held) >= tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
return 1
"""

# KEYS: the deployment's audit list (of one group), its chain's anchor, then the lists
# of each entry to remove, in order (its run's, and its thread's if it has one). ARGV:
# the anchor as read ('' none), the anchor after the entries, then per entry its JSON
# and how many of KEYS are its lists. Removes the entries if they still start the
# deployment's list and the anchor is as read (another process pruned otherwise), and
# each from the start of its lists, and sets the anchor. Returns how many were removed.
_TRIM_AUDIT = """
local n = (#ARGV - 2) / 2
if (redis.call('GET', KEYS[2]) or '') ~= ARGV[1] then return 0 end
local head = redis.call('LRANGE', KEYS[1], 0, n - 1)
if #head < n then return 0 end
for i = 1, n do
  if head[i] ~= ARGV[2 * i + 1] then return 0 end
end
redis.call('LTRIM', KEYS[1], n, -1)
redis.call('SET', KEYS[2], ARGV[2])
local key = 3
for i = 1, n do
  for _ = 1, tonumber(ARGV[2 * i + 2]) do
    redis.call('LREM', KEYS[key], 1, ARGV[2 * i + 1])
    key = key + 1
  end
end
return n
"""

# KEYS: a run's hash, an index of its group. ARGV: the revision read, the run id, its
# score. Adds the run to the index unless it is there or the run was saved since (that
# save indexed it). The backfill's write: the same slot as the run on a cluster.
_INDEX_UNCHANGED = """
if redis.call('HGET', KEYS[1], '$REV') ~= ARGV[1] then return 0 end
return redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[2])
""".replace("$REV", k.RUN_REVISION_FIELD)

# KEYS: a one-time step's hash (the backfill's, the history move's). ARGV: a cursor's
# field, its value as read ('' before the first step), the next. Moves it on only
# from what was read: replicas never move a scan back.
ADVANCE_CURSOR = """
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""

Merged = Callable[[Callable[[int], Awaitable[object]]], Awaitable[list[str]]]
"""Reads an index from each shard group at once and merges it (``RedisStore._merged``)."""


class RedisRetention:
    """What the Redis store's ``prunable``, ``prune`` and ``prune_audit`` do.

    Args:
        redis: The store's client.
        keys: The store's key names.
        backfill_batch: Keys the backfill looks at per ``prunable`` call at most.
        merged: How the store reads an index of every group, merged.
        live_runs: A thread's root runs that wait or work (``RedisStore.thread_runs``).
    """

    def __init__(
        self,
        redis: RedisClient,
        keys: k.RedisKeys,
        *,
        backfill_batch: int,
        merged: Merged,
        live_runs: Callable[[str], Awaitable[list[str]]],
    ) -> None:
        self._redis = redis
        self.keys = keys
        self._merged = merged
        self._live_runs = live_runs
        self._backfill_batch = backfill_batch
        self._backfilled = False
        self._prune_root = redis.register_script(_PRUNE_ROOT)
        self._drop_history = redis.register_script(_DROP_HISTORY)
        self._drop_history_unless_held = redis.register_script(_DROP_HISTORY_UNLESS_HELD)
        self._trim_audit = redis.register_script(_TRIM_AUDIT)
        self._index_unchanged = redis.register_script(_INDEX_UNCHANGED)
        self._advance_cursor = redis.register_script(ADVANCE_CURSOR)

    async def prunable(self, before: datetime, *, limit: int = PRUNE_BATCH) -> Pruned:
        """The oldest due roots from the done index (of every group), their children and
        the threads left with no other root run; see ``Store.prunable``.

        First a step of the one-time backfill of runs saved before these indexes
        (``_backfill``); until every child is indexed, nothing is due (``more``)."""
        if not await self._backfill():
            return Pruned(before=before, more=True)
        upper = f"({before.timestamp()!r}"
        roots = (
            await self._merged(
                lambda shard: self._redis.zrangebyscore(
                    self.keys.done(shard), "-inf", upper, start=0, num=limit, withscores=True
                )
            )
        )[:limit]
        threads = await self._threads_of(roots)
        trees = await asyncio.gather(*(self._children_of(root) for root in roots))
        runs = [run_id for root, tree in zip(roots, trees, strict=True) for run_id in (*tree, root)]
        candidates = sorted({t for t in threads.values() if t})
        alone = await asyncio.gather(
            *(self._alone_but(t, [r for r in roots if threads[r] == t]) for t in candidates)
        )
        return Pruned(
            before=before,
            root_ids=tuple(roots),
            run_ids=tuple(runs),
            thread_ids=tuple(t for t, left in zip(candidates, alone, strict=True) if left),
        )

    async def prune(self, due: Pruned) -> Pruned:
        """The history of each listed thread first, each check-and-delete one script
        (``_remove_history``); then each root still due after its children (a crash in
        between leaves the root to prune again, never an orphan), checked and removed
        by one script. The roots of a thread whose history stays wait for a later batch,
        so the thread is found again with them.
        """
        cutoff = due.before.timestamp()
        threads = await self._threads_of(due.root_ids)
        gone: list[str] = []
        for thread_id in due.thread_ids:
            batch = [root for root in due.root_ids if threads[root] == thread_id]
            if await self._remove_history(thread_id, batch, cutoff):
                gone.append(thread_id)
        removed: list[str] = []
        roots: list[str] = []
        for root in due.root_ids:
            thread = threads[root]
            if thread in due.thread_ids and thread not in gone:
                continue
            if not await self._still_due(root, cutoff):
                continue  # saved since: its children stay with it
            removed += await self._remove_children(root)
            shard = self.keys.shard(root)
            keys = [self.keys.run(root), self.keys.done(shard)]
            if thread:
                keys.append(self.keys.thread_runs(thread, shard))
            if await self._prune_root(keys=keys, args=[root, repr(cutoff)]):
                await self._redis.delete(self.keys.alive(root))
                removed.append(root)
                roots.append(root)
        return Pruned(
            before=due.before, root_ids=tuple(roots), run_ids=tuple(removed), thread_ids=tuple(gone)
        )

    async def _threads_of(self, roots: Sequence[str]) -> dict[str, str | None]:
        """The thread of each root run (``None``: none, or the run is gone)."""
        threads = await asyncio.gather(
            *(self._redis.hget(self.keys.run(root), k.RUN_THREAD_FIELD) for root in roots)
        )
        return {root: cast(str | None, t) or None for root, t in zip(roots, threads, strict=True)}

    async def _children_of(self, root: str) -> list[str]:
        """A root run's sub-agent runs (in every group on a cluster)."""
        members = await asyncio.gather(
            *(self._redis.smembers(self.keys.children(root, g)) for g in self.keys.groups)
        )
        return sorted(child for group in members for child in _strings(group))

    async def _still_due(self, root: str, cutoff: float) -> bool:
        """Whether a root run is in the done index, last changed before ``cutoff``."""
        changed = await self._redis.zscore(self.keys.done(self.keys.shard(root)), root)
        return changed is not None and changed < cutoff

    async def _remove_history(self, thread_id: str, batch: list[str], cutoff: float) -> bool:
        """Delete a thread's history if it has no root run but ``batch``, all still due.

        On one primary a script checks and deletes at once. On a cluster the thread's
        runs are in every group: they are checked first, and a run saved after that
        check took the thread's hold before it was saved, which the deleting script
        checks (``redis_keys.HISTORY_HOLD``).
        """
        history = self.keys.history(thread_id)
        if not self.keys.shards:
            keys = [
                history,
                self.keys.thread_runs(thread_id),
                self.keys.paused(thread_id),
                self.keys.live(thread_id),
                self.keys.done(),
            ]
            return bool(await self._drop_history(keys=keys, args=[repr(cutoff), *batch]))
        due = await asyncio.gather(*(self._still_due(root, cutoff) for root in batch))
        if not all(due) or not await self._alone_but(thread_id, batch):
            return False
        keys = [history, self.keys.history_hold(thread_id)]
        if not await self._drop_history_unless_held(keys=keys, args=[repr(cutoff)]):
            return False
        # Kept by a version before under the thread's own tag, and not moved yet.
        await self._redis.delete(self.keys.legacy_history(thread_id))
        return True

    async def _remove_children(self, root: str) -> list[str]:
        """Delete a root run's sub-agent runs (group by group on a cluster): those this
        call removed, so replicas pruning one root at once each report their own."""
        removed: list[str] = []
        for shard in self.keys.groups:
            index = self.keys.children(root, shard)
            # One key at a time: a cluster refuses a multi-key command across slots.
            for child in sorted(_strings(await self._redis.smembers(index))):
                if await self._redis.delete(self.keys.run(child)):
                    removed.append(child)
            await self._redis.delete(index)
        return removed

    async def prune_audit(
        self, before: datetime, *, limit: int = AUDIT_PRUNE_BATCH, seal: Seal | None = None
    ) -> int:
        """The oldest entries of the deployment's list (of every group, merged by time)
        while older than ``before``; each group's trimmed from its start by one script,
        with the run's and the thread's lists of what it removes (the same group), and
        its chain's anchor moved past them (signed by ``seal``)."""
        heads = await asyncio.gather(
            *(self._audit_head(shard, before, limit) for shard in self.keys.groups)
        )
        oldest = heapq.merge(*heads, key=lambda item: item[1].at)
        taken = Counter(shard for shard, _, _ in islice(oldest, limit))
        removed = await asyncio.gather(
            *(self._trim_audit_head(shard, heads[shard][:n], seal) for shard, n in taken.items())
        )
        return sum(removed)

    async def _audit_head(
        self, shard: int, before: datetime, limit: int
    ) -> list[tuple[int, AuditEntry, str]]:
        """Up to ``limit`` entries from the start of a group's deployment list, while
        older than ``before``: (group, entry, its JSON as stored)."""
        key = self.keys.audit_all(shard)
        first = cast(str | None, await self._redis.lindex(key, 0))
        if first is None or AUDIT_ADAPTER.validate_json(first).at >= before:
            return []  # the usual case: one entry read
        lines = _strings(await self._redis.lrange(key, 0, limit - 1))
        entries = ((shard, AUDIT_ADAPTER.validate_json(line), line) for line in lines)
        return list(takewhile(lambda item: item[1].at < before, entries))

    async def _trim_audit_head(
        self, shard: int, head: list[tuple[int, AuditEntry, str]], seal: Seal | None
    ) -> int:
        """Remove ``head`` from the start of a group's deployment list, and each entry
        from its run's and thread's lists, and move the chain's anchor past it, in one
        script (one slot: the group's)."""
        keys = [self.keys.audit_all(shard), self.keys.audit_anchor(shard)]
        read = cast(str | None, await self._redis.get(keys[1]))
        before = AuditAnchor.model_validate_json(read) if read is not None else None
        left = anchor(head_of(head[-1][2]), before, len(head), shard, seal)
        args: list[str | int] = [read or "", left.model_dump_json()]
        for _, entry, line in head:
            # An entry of no run (a checkpoint, a policy's load) is in no run's list.
            lists = [self.keys.audit_run(entry.run_id)] if entry.run_id else []
            if entry.thread_id is not None:
                lists.append(self.keys.audit_thread(entry.thread_id, shard))
            keys += lists
            args += [line, len(lists)]
        return int(await self._trim_audit(keys=keys, args=args))

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

    async def _alone_but(self, thread_id: str, batch: list[str]) -> bool:
        """Whether a thread has no root run but ``batch`` (nor one indexed only as
        waiting or working, as runs saved before the runs index are)."""
        counts = await asyncio.gather(
            *(self._redis.zcard(self.keys.thread_runs(thread_id, g)) for g in self.keys.groups)
        )
        listed = await asyncio.gather(
            *(
                self._redis.zscore(self.keys.thread_runs(thread_id, self.keys.shard(root)), root)
                for root in batch
            )
        )
        batched = sum(score is not None for score in listed)
        return sum(counts) == batched and not await self._live_runs(thread_id)


def _strings(members: object) -> list[str]:
    # redis-py types replies for every decode mode; this client always decodes.
    return cast(list[str], members)
