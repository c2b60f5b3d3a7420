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
from typing import Any, cast

from redis.exceptions import RedisError

from ..chain import CHECKPOINT, AuditAnchor, AuditChain, Seal, checkpoint, head_of
from ..messages import Message
from ..snapshot import (
    AUDIT_ADAPTER,
    AuditEntry,
    RunSnapshot,
    load_snapshot,
)
from . import redis_keys as k
from ._lease import hold_lease
from ._redis_history import RedisHistoryMove
from ._redis_retention import BACKFILL_BATCH, RedisRetention
from ._redis_save import SAVE_RUN, Chained, RunWrite, audit_keys, head_link
from .base import (
    AUDIT_PRUNE_BATCH,
    AUDIT_READ_BATCH,
    PRUNE_BATCH,
    Pruned,
    Remember,
    SavesInOne,
    StoreConflict,
    check_audit,
)
from .redis_url import POOL_SIZE, is_cluster, redis_client, split_prefix

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

# KEYS: a chain's head, then the audit lists. ARGV: the head the entries were linked
# after (as read; '' before the first), the head after them, the entries' JSON, each
# appended to every list. Returns {1}, or {0, the head} (and writes nothing) when the
# head moved since the writer read it.
_APPEND_AUDIT = """
local head = redis.call('GET', KEYS[1]) or ''
if head ~= ARGV[1] then return {0, head} end
redis.call('SET', KEYS[1], ARGV[2])
for i = 3, #ARGV do
  for j = 2, #KEYS do redis.call('RPUSH', KEYS[j], ARGV[i]) end
end
return {1}
"""


# KEYS: a deployment audit list. ARGV: the seq read up to, how many lines at most.
# The lines after that seq, found by binary search: seqs only grow along the list
# (lines from before the chain have none, count as 0, and come first).
_READ_AUDIT = """
local function seq(i)
  return cjson.decode(redis.call('LINDEX', KEYS[1], i))['seq'] or 0
end
local after = tonumber(ARGV[1])
local low, high = 0, redis.call('LLEN', KEYS[1])
while low < high do
  local middle = math.floor((low + high) / 2)
  if seq(middle) <= after then low = middle + 1 else high = middle end
end
return redis.call('LRANGE', KEYS[1], low, low + tonumber(ARGV[2]) - 1)
"""


class RedisStore(SavesInOne):
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
        self._save_script = self._redis.register_script(SAVE_RUN)
        self._release = self._redis.register_script(_RELEASE_LOCK)
        self._append_history = self._redis.register_script(_APPEND_HISTORY)
        self._append_audit = self._redis.register_script(_APPEND_AUDIT)
        self._read_audit = self._redis.register_script(_READ_AUDIT)
        self._heads: dict[int, str] = {}
        """Each group's chain head as this process last saw it (``_chained``)."""
        self._history_move = RedisHistoryMove(self._redis, self.keys)
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

    async def _save(
        self,
        snapshots: Sequence[RunSnapshot],
        audit: Sequence[AuditEntry],
        *,
        remember: Remember | None = None,
        read_history: bool = False,
    ) -> tuple[list[RunSnapshot], list[Message]]:
        """One Lua script: every revision checked first, then the compare-and-sets, index
        upkeep, the audit entries and the history remembered (on a cluster, a tree's
        runs share their root's group; the history goes right after for a run whose
        id is not in its thread's group)."""
        check_audit(snapshots[0], audit)
        first = snapshots[0]
        groups = {self.keys.shard(s.run_id) for s in snapshots}
        if len(groups) > 1:
            # A tree saved before its runs shared a group (an older version, on a
            # cluster): group by group, the first run (the top) last.
            rest = [
                s
                for s in snapshots[1:]
                if self.keys.shard(s.run_id) != self.keys.shard(first.run_id)
            ]
            saved_rest = {s.run_id: (await self._save([s], ()))[0][0] for s in rest}
            near = [s for s in snapshots if s.run_id not in saved_rest]
            saved_near, history = await self._save(near, audit, remember=remember)
            by_id = {s.run_id: s for s in saved_near} | saved_rest
            return [by_id[s.run_id] for s in snapshots], history
        thread = first.thread_id
        # One script when the history may share it: one server, or on a cluster a top
        # run drawn in its thread's group (``tree_run_id``; not one a version before
        # drew, nor one whose caller named it elsewhere).
        along = thread is not None and (
            not self.keys.shards or self.keys.shard(first.run_id) == self.keys.shard(thread)
        )
        # Before the run exists, or as it comes to: a prune that missed it keeps the
        # thread's history (a cluster's: its runs indexes are in every group).
        hold = bool(self.keys.shards) and first.is_root and first.revision == 0
        if hold and not along and thread is not None:
            stamp = repr(first.created_at.timestamp())
            await self._redis.set(self.keys.history_hold(thread), stamp, px=k.HISTORY_HOLD_MS)
        shard = self.keys.shard(first.run_id)
        while True:
            chained = self._chained(audit, shard) if audit else None
            saved, answer = await self._save_tree(
                snapshots, chained, along, hold, remember, read_history
            )
            if answer[0] != 2:
                break
            self._heads[shard] = str(answer[1])  # another process appended: link again
        if not answer[0]:
            conflict = snapshots[int(answer[1]) - 1]
            actual = int(answer[2])
            raise StoreConflict(conflict.run_id, conflict.revision, None if actual < 0 else actual)
        if audit:
            self._heads[shard] = cast(Chained, chained).after
        history = [Message.model_validate_json(m) for m in answer[2]] if len(answer) > 2 else []
        if not along and thread is not None:  # a cluster: the history in another slot
            if remember is not None:
                await self.append_history(thread, remember.messages, window=remember.window)
            if read_history:
                history = await self.load_history(thread)
        elif read_history and not history and thread is not None:
            history = await self._history_move.legacy(thread)
        return saved, history

    async def _save_tree(
        self,
        snapshots: Sequence[RunSnapshot],
        audit: Chained | None,
        along: bool,
        hold: bool,
        remember: Remember | None,
        read_history: bool,
    ) -> tuple[list[RunSnapshot], list[Any]]:
        """One call of the save script for runs of one group (see ``_save``)."""
        thread = snapshots[0].thread_id
        header: list[str | int] = [len(snapshots)]
        keys: list[str] = []
        args: list[str | int] = []
        saved: list[RunSnapshot] = []
        for n, snapshot in enumerate(snapshots):
            own = RunWrite(self.keys, snapshot, audit if n == 0 else None)
            if n == 0 and along and thread is not None:
                own.with_history(self.keys.history(thread), remember, read=read_history)
            else:
                own.args.append("")
            extra = ""
            if not own.saved.is_root and snapshot.revision == 0:
                # With the child's first save: a tree pruned later finds every child.
                own.keys.append(self.keys.children(own.saved.root_run_id, own.shard))
                extra = "children"
            elif n == 0 and hold and along and thread is not None:
                own.keys.append(self.keys.history_hold(thread))
                extra = "hold"
            header += [len(own.keys), len(own.args), extra]
            keys += own.keys
            args += own.args
            saved.append(own.saved)
        answer = await self._save_script(keys=keys, args=[*header, *args])
        return saved, cast(list[Any], answer)

    def _chained(self, audit: Sequence[AuditEntry], shard: int) -> Chained:
        """``audit`` linked after the head of the group's chain as last seen here (a
        script refuses it if the head moved, and says where it is)."""
        return Chained.of(audit, self._heads.get(shard, ""), shard if self.keys.shards else None)

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
        """The thread's remembered conversation, oldest first (on a cluster whose old
        histories are still being moved, under its old name when none is under its new)."""
        items = await self._redis.lrange(self.keys.history(thread_id), 0, -1)
        if not items:
            return await self._history_move.legacy(thread_id)
        return [Message.model_validate_json(item) for item in items]

    async def append_history(
        self, thread_id: str, messages: Sequence[Message], *, window: int
    ) -> None:
        """``RPUSH`` then ``LTRIM`` to ``window``, in one script."""
        lines = [m.model_dump_json() for m in messages]
        await self._append_history(keys=[self.keys.history(thread_id)], args=[window, *lines])

    async def append_audit(self, entry: AuditEntry) -> None:
        """Append to the run's, the thread's and the deployment's audit lists at once,
        after the head of the group's chain."""
        shard = self.keys.shard(entry.run_id)
        await self._append_chained([entry], shard, entry.run_id, entry.thread_id)

    async def _append_chained(
        self, entries: Sequence[AuditEntry], shard: int, run_id: str, thread_id: str | None
    ) -> None:
        """Link and append ``entries`` to a group's chain, again while its head moves."""
        lists = audit_keys(self.keys, run_id, thread_id, shard)
        while not await self._append_linked(entries, shard, lists):
            pass

    async def _append_linked(
        self, entries: Sequence[AuditEntry], shard: int, lists: list[str]
    ) -> bool:
        """Link ``entries`` after the group's head as last seen and append them to
        ``lists``; ``False`` (and the head learnt) when it moved meanwhile."""
        chained = self._chained(entries, shard)
        keys = [self.keys.audit_head(shard), *lists]
        answer = await self._append_audit(
            keys=keys, args=[chained.before, chained.after, *chained.lines]
        )
        self._heads[shard] = chained.after if answer[0] else str(answer[1])
        return bool(answer[0])

    async def audit_chains(self) -> list[AuditChain]:
        """Each group's chain: its deployment list and anchor (one without groups)."""

        async def read(shard: int) -> AuditChain:
            # One transaction (one slot): a prune between the reads would not match.
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.lrange(self.keys.audit_all(shard), 0, -1)
                pipe.get(self.keys.audit_anchor(shard))
                pipe.get(self.keys.audit_head(shard))
                lines, kept, head = await pipe.execute()
            left = AuditAnchor.model_validate_json(kept) if kept is not None else None
            stored = head_link(head) if head is not None else None
            return AuditChain(shard, [str(line) for line in lines], left, stored)

        return list(await asyncio.gather(*(read(shard) for shard in self.keys.groups)))

    async def read_audit(
        self, chain: int, after: int, *, limit: int = AUDIT_READ_BATCH
    ) -> list[str]:
        """The group's deployment list from the line after ``after``, found by the first
        line's ``seq`` (the list only ever loses its start), in one script."""
        if chain not in self.keys.groups:
            return []
        key = self.keys.audit_all(chain)
        return [str(line) for line in await self._read_audit(keys=[key], args=[after, limit])]

    async def seal_audit(self, seal: Seal) -> int:
        """A checkpoint after each group's head, unless its last entry is one."""

        async def one(shard: int) -> int:
            lists = [self.keys.audit_all(shard)]
            while True:
                async with self._redis.pipeline(transaction=False) as pipe:
                    pipe.get(self.keys.audit_head(shard))
                    pipe.lindex(lists[0], -1)
                    head, last = await pipe.execute()
                if head is None:
                    return 0  # nothing chained yet
                if (
                    last is not None
                    and head_of(last) == head_link(head)
                    and AUDIT_ADAPTER.validate_json(last).event == CHECKPOINT
                ):
                    return 0
                self._heads[shard] = head
                entry = checkpoint(head_link(head), shard, seal)
                if await self._append_linked([entry], shard, lists):
                    return 1

        return sum(await asyncio.gather(*(one(shard) for shard in self.keys.groups)))

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

        First a step of each one-time move after an upgrade: a cluster's histories into
        their threads' groups (``RedisHistoryMove``), and the backfill of runs saved
        before these indexes; until every child is indexed, nothing is due (``more``)."""
        await self._history_move.step()
        return await self._retention.prunable(before, limit=limit)

    async def prune(self, due: Pruned) -> Pruned:
        """Each listed thread's history first, each checked and deleted at once, then
        each root run still due after its children; see ``Store.prune`` and
        ``RedisRetention.prune``."""
        return await self._retention.prune(due)

    async def prune_audit(
        self, before: datetime, *, limit: int = AUDIT_PRUNE_BATCH, seal: Seal | None = None
    ) -> int:
        """The oldest entries of the deployment's lists (of every group, merged by time),
        each group's trimmed from its start with the run's and thread's lists of what
        it removes, in one script; see ``Store.prune_audit``."""
        return await self._retention.prune_audit(before, limit=limit, seal=seal)

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
