"""The Redis store's save (``redis.RedisStore.save_runs``): one Lua script that checks
every run's revision, then writes each run with its index upkeep, audit entries and
thread history; and how one run's part of it is laid out (``RunWrite``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..chain import Link, link
from ..snapshot import AuditEntry, RunSnapshot, next_revision, run_index
from . import redis_keys as k
from .base import Remember

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
# the index in keys of the audit chain's head (the lists follow it), '1' if a live
# root run (paused or in flight), what the live index's name has before and after the
# thread id, the last-change score if a finished root run or '', the last-change
# score if a root run or '', what the runs index's name has before and after the
# thread id, how many audit values follow (0, or 2 and the entries: the chain's head
# the entries were linked after, as read, then after them, then the entries' JSON),
# then what to do with the thread's history, the last key ('' nothing, 'append': the
# window and the messages' JSON follow, 'read'). A head that moved since the writer
# read it (another process appended) returns {2, the head} and writes nothing.
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
  if entries > 0 then
    redis.call('SET', keys[lists], argv[21])
    for i = 22, 19 + entries do
      for j = lists + 1, last_list do redis.call('RPUSH', keys[j], argv[i]) end
    end
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
for i = 1, n do
  local argv = runs[i][2]
  if tonumber(argv[19]) > 0 then
    local head = redis.call('GET', runs[i][1][tonumber(argv[11])]) or ''
    if head ~= argv[20] then return {2, head} end
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
SAVE_RUN = (
    _SAVE_RUN_TEMPLATE.replace("$REV", k.RUN_REVISION_FIELD)
    .replace("$THREAD", k.RUN_THREAD_FIELD)
    .replace("$SNAPSHOT", k.RUN_SNAPSHOT_FIELD)
    .replace("$HOLD_MS", str(k.HISTORY_HOLD_MS))
)


class RunWrite:
    """One run's part of the save script: its keys and arguments (see ``SAVE_RUN``)."""

    def __init__(self, keys: k.RedisKeys, snapshot: RunSnapshot, audit: Chained | None) -> None:
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
        ]
        if audit is None:
            self.args.append(0)
        else:
            self.args += [len(audit.lines) + 2, audit.before, audit.after, *audit.lines]
            self.keys.append(keys.audit_head(shard))
            self.keys += audit_keys(keys, run_id, saved.thread_id, shard)

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


@dataclass(frozen=True)
class Chained:
    """Audit entries linked after a chain's head: the head as read and after them
    (``head_text``), and their JSON lines."""

    before: str
    after: str
    lines: list[str]

    @classmethod
    def of(cls, entries: Sequence[AuditEntry], head: str, chain: int | None) -> Chained:
        """``entries`` linked after ``head`` (as the head key holds it) in ``chain``."""
        lines, after = link(entries, head_link(head), chain)
        return cls(head, head_text(after), lines)


def head_link(text: str) -> Link:
    """A chain's head as its key holds it ('' before its first entry)."""
    if not text:
        return Link()
    seq, _, digest = text.partition(" ")
    return Link(seq=int(seq), hash=digest)


def head_text(head: Link) -> str:
    """A chain's head as its key holds it."""
    return f"{head.seq} {head.hash}"


def audit_keys(keys: k.RedisKeys, run_id: str, thread_id: str | None, shard: int) -> list[str]:
    """The lists an entry goes to: its run's (if it is a run's), the deployment's (of the
    group ``shard``), its thread's (if it has one)."""
    lists = [keys.audit_run(run_id)] if run_id else []
    lists.append(keys.audit_all(shard))
    if thread_id is not None:
        lists.append(keys.audit_thread(thread_id, shard))
    return lists
