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
from ._redis_history import RedisHistoryMove
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

# Saves runs of one tree, all or none (``save_runs``; ``save_run`` is a tree of one).
# ARGV[1]: how many runs; then per run how many of KEYS and of ARGV are its own, and
# what its last key is for: 'children' its root's children set (a new sub-agent run
# joins it in the same write), 'hold' its thread's history hold (a new top run on a
# cluster takes it in the same write), '' neither; then each run's ARGV, in order.
# Every revision is checked before anything is written. Returns {1, old revision of
# the first[, the history]} when saved, {0, which run, its stored revision or -1}
# otherwise.
#
# Per run (``save``), its keys: run hash, expiring index, in-flight index, done index[,
# paused index, live index and runs index of the thread], then the audit lists the
# entries go to (from keys[argv[11]] on)[, the thread's history].
# argv: expected revision, snapshot JSON, thread id or '', run id, '1' if a paused
# root run, creation score, expiry score or '', '1' if a root run has work in flight,
# what the paused index's name has before and after the thread id (to drop the
# run from a thread it no longer belongs to; the same shard group on a cluster),
# the index of the first audit list in keys, '1' if a live root run (paused or in
# flight), what the live index's name has before and after the thread id, the
# last-change score if a finished root run or '', the last-change score if a root
# run or '', what the runs index's name has before and after the thread id, how
# many audit entries follow, the audit entries' JSON, then what to do with the
# thread's history, the last key ('' nothing, 'append': the window and the
# messages' JSON follow, 'read').
_SAVE_RUN_TEMPLATE = """
local function save(keys, argv, current)
  local run_id = argv[4]
  local old_thread = redis.call('HGET', keys[1], '$THREAD')
  redis.call('HSET', keys[1], '$REV', current + 1, '$THREAD', argv[3], '$SNAPSHOT', argv[2])
  if old_thread and old_thread ~= '' and old_thread ~= argv[3] then
    redis.call('ZREM', argv[9] .. old_thread .. argv[10], run_id)
    redis.call('ZREM', argv[13] .. old_thread .. argv[14], run_id)
    redis.call('ZREM', argv[17] .. old_thread .. argv[18], run_id)
  end
  local lists = tonumber(argv[11])
  if lists == 8 then
    if argv[5] == '1' then
      redis.call('ZADD', keys[5], argv[6], run_id)
    else
      redis.call('ZREM', keys[5], run_id)
    end
    if argv[12] == '1' then
      redis.call('ZADD', keys[6], argv[6], run_id)
    else
      redis.call('ZREM', keys[6], run_id)
    end
    if argv[16] ~= '' then redis.call('ZADD', keys[7], argv[16], run_id) end
  end
  if argv[5] == '1' and argv[7] ~= '' then
    redis.call('ZADD', keys[2], argv[7], run_id)
  else
    redis.call('ZREM', keys[2], run_id)
  end
  if argv[8] == '1' then
    redis.call('ZADD', keys[3], argv[6], run_id)
  else
    redis.call('ZREM', keys[3], run_id)
  end
  if argv[15] ~= '' then
    redis.call('ZADD', keys[4], argv[15], run_id)
  else
    redis.call('ZREM', keys[4], run_id)
  end
  local entries = tonumber(argv[19])
  local mode = argv[20 + entries]
  local last_list = #keys
  if mode ~= '' then last_list = #keys - 1 end
  for i = 20, 19 + entries do
    for j = lists, last_list do redis.call('RPUSH', keys[j], argv[i]) end
  end
  if mode == 'append' then
    local window = tonumber(argv[21 + entries])
    if window <= 0 then
      redis.call('DEL', keys[#keys])
    else
      if #argv >= 22 + entries then redis.call('RPUSH', keys[#keys], unpack(argv, 22 + entries)) end
      redis.call('LTRIM', keys[#keys], -window, -1)
    end
  elseif mode == 'read' then
    return {1, current, redis.call('LRANGE', keys[#keys], 0, -1)}
  end
  return {1, current}
end
local n = tonumber(ARGV[1])
local runs = {}
local key, arg = 0, 1 + 3 * n
for i = 1, n do
  local nkeys, nargs = tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i])
  local keys = {unpack(KEYS, key + 1, key + nkeys)}
  local extra, last = ARGV[3 * i + 1], nil
  if extra ~= '' then last = table.remove(keys) end
  runs[i] = {keys, {unpack(ARGV, arg + 1, arg + nargs)}, extra, last}
  key, arg = key + nkeys, arg + nargs
end
local currents = {}
for i = 1, n do
  local stored = redis.call('HGET', runs[i][1][1], '$REV')
  currents[i] = tonumber(stored or '0')
  if currents[i] ~= tonumber(runs[i][2][1]) then
    if stored then return {0, i, currents[i]} end
    return {0, i, -1}
  end
end
local answer
for i = n, 1, -1 do
  if runs[i][3] == 'children' then
    redis.call('SADD', runs[i][4], runs[i][2][4])
  elseif runs[i][3] == 'hold' then
    redis.call('SET', runs[i][4], runs[i][2][6], 'PX', $HOLD_MS)
  end
  answer = save(runs[i][1], runs[i][2], currents[i])
end
return answer
"""
_SAVE_RUN = (
    _SAVE_RUN_TEMPLATE.replace("$REV", k.RUN_REVISION_FIELD)
    .replace("$THREAD", k.RUN_THREAD_FIELD)
    .replace("$SNAPSHOT", k.RUN_SNAPSHOT_FIELD)
    .replace("$HOLD_MS", str(k.HISTORY_HOLD_MS))
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

    async def save_run(
        self,
        snapshot: RunSnapshot,
        audit: Sequence[AuditEntry] = (),
        *,
        remember: Remember | None = None,
    ) -> RunSnapshot:
        """Compare-and-set, index upkeep, the audit entries and the history it remembers
        in one Lua script (on a cluster, the history right after for a run whose id is
        not in its thread's group); see ``Store.save_run``."""
        saved, _ = await self._save_runs([snapshot], audit, remember=remember)
        return saved[0]

    async def save_runs(
        self,
        snapshots: Sequence[RunSnapshot],
        audit: Sequence[AuditEntry] = (),
        *,
        remember: Remember | None = None,
    ) -> list[RunSnapshot]:
        """``save_run`` of each in one script, which checks every revision first (one
        slot on a cluster: a tree's runs share their root's group); see
        ``Store.save_runs``."""
        saved, _ = await self._save_runs(snapshots, audit, remember=remember)
        return saved

    async def start_run(self, snapshot: RunSnapshot) -> tuple[RunSnapshot, list[Message]]:
        """The save and the history's read in one script (two calls on a cluster)."""
        saved, history = await self._save_runs([snapshot], (), read_history=True)
        return saved[0], history

    async def _save_runs(
        self,
        snapshots: Sequence[RunSnapshot],
        audit: Sequence[AuditEntry],
        *,
        remember: Remember | None = None,
        read_history: bool = False,
    ) -> tuple[list[RunSnapshot], list[Message]]:
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
            saved_rest = {s.run_id: (await self._save_runs([s], ()))[0][0] for s in rest}
            near = [s for s in snapshots if s.run_id not in saved_rest]
            saved_near, history = await self._save_runs(near, audit, remember=remember)
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
        header: list[str | int] = [len(snapshots)]
        keys: list[str] = []
        args: list[str | int] = []
        saved: list[RunSnapshot] = []
        for n, snapshot in enumerate(snapshots):
            own = _RunWrite(self.keys, snapshot, audit if n == 0 else ())
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
        answer = await self._save(keys=keys, args=[*header, *args])
        if not answer[0]:
            conflict = snapshots[int(answer[1]) - 1]
            actual = int(answer[2])
            raise StoreConflict(conflict.run_id, conflict.revision, None if actual < 0 else actual)
        history = [Message.model_validate_json(m) for m in answer[2]] if len(answer) > 2 else []
        if not along and thread is not None:  # a cluster: the history in another slot
            if remember is not None:
                await self.append_history(thread, remember.messages, window=remember.window)
            if read_history:
                history = await self.load_history(thread)
        elif read_history and not history and thread is not None:
            history = await self._history_move.legacy(thread)
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
        """Append to the run's, the thread's and the deployment's audit lists at once."""
        shard = self.keys.shard(entry.run_id)
        keys = _audit_keys(self.keys, entry.run_id, entry.thread_id, shard)
        await self._append_audit(keys=keys, args=[entry.model_dump_json()])

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


class _RunWrite:
    """One run's part of the save script: its keys and arguments (see ``_SAVE_RUN``)."""

    def __init__(
        self, keys: k.RedisKeys, snapshot: RunSnapshot, audit: Sequence[AuditEntry]
    ) -> None:
        self.saved, data = next_revision(snapshot)
        saved = self.saved
        run_id = saved.run_id
        index = run_index(saved)
        self.shard = shard = keys.shard(run_id)
        self.keys = [
            keys.run(run_id),
            keys.expiring(shard),
            keys.in_flight(shard),
            keys.done(shard),
        ]
        if saved.thread_id is not None:
            self.keys.append(keys.paused(saved.thread_id, shard))
            self.keys.append(keys.live(saved.thread_id, shard))
            self.keys.append(keys.thread_runs(saved.thread_id, shard))
        changed = repr(saved.updated_at.timestamp())
        expiry = index.expires_at
        self.args: list[str | int] = [
            snapshot.revision,
            data,
            saved.thread_id or "",
            run_id,
            "1" if index.paused else "0",
            repr(saved.created_at.timestamp()),
            repr(expiry.timestamp()) if expiry is not None else "",
            "1" if index.in_flight else "0",
            *keys.paused_affixes(shard),
            len(self.keys) + 1,
            "1" if index.live else "0",
            *keys.live_affixes(shard),
            changed if saved.is_root and not index.live else "",
            changed if saved.is_root else "",
            *keys.thread_runs_affixes(shard),
            len(audit),
            *(entry.model_dump_json() for entry in audit),
        ]
        if audit:
            self.keys += _audit_keys(keys, run_id, saved.thread_id, shard)

    def with_history(self, key: str, remember: Remember | None, *, read: bool) -> None:
        """Append to the thread's history (``remember``), or read it, in the same write."""
        if remember is not None:
            self.keys.append(key)
            self.args += [
                "append",
                remember.window,
                *(m.model_dump_json() for m in remember.messages),
            ]
        elif read:
            self.keys.append(key)
            self.args.append("read")
        else:
            self.args.append("")


def _audit_keys(keys: k.RedisKeys, run_id: str, thread_id: str | None, shard: int) -> list[str]:
    """The lists an entry of a run goes to: the run's, the deployment's, the thread's."""
    lists = [keys.audit_run(run_id), keys.audit_all(shard)]
    if thread_id is not None:
        lists.append(keys.audit_thread(thread_id, shard))
    return lists
