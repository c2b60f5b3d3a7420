"""Every Redis key the store writes, and why it exists.

All keys start with a deployment prefix (``ab`` unless the URL says
``?prefix=...``) so several bots, or test runs, can share one Redis and each
can remove its own keys.

On one primary a run's keys carry its id as a hash tag (``{run_id}``), a
thread's keys the thread id, and the deployment-wide indexes have none. On a
Redis Cluster each script must stay within one hash slot, yet ``save_run``
moves a run between its indexes atomically: so there the runs fall into
``SHARDS`` groups by their id, each group's keys share one hash tag (the group's
runs, and the group's part of every index), and a deployment-wide read asks
each group and merges. The groups' tags are chosen to spread evenly over the
slot range, hence over the primaries of a cluster that splits it evenly.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from functools import cache

from .base import TREE_GROUPS

# Isolates one deployment (or one test) from others sharing the server.
DEFAULT_PREFIX = "ab"

# Hash per run: ``rev`` (the CAS counter, read without parsing JSON), ``thread``
# (to drop the run from its old thread index) and ``snapshot`` (the JSON).
# No TTL: a paused run must wait as long as its approval does.
RUN = "run"
RUN_REVISION_FIELD = "rev"
RUN_THREAD_FIELD = "thread"
RUN_SNAPSHOT_FIELD = "snapshot"

# Sorted set per thread of paused root runs, scored by creation time, so an
# incoming message finds "the pending run of this thread" without a scan.
PAUSED = "paused"
# Sorted set per thread of root runs that wait or work (paused or in flight),
# scored by creation time, so the chat layer finds a thread's live runs (to stop
# them, to say what is under way) without reading every run in flight.
LIVE = "live"
# One sorted set of paused root runs scored by their earliest expiry, so the
# expiry sweep reads only what is due.
EXPIRING = "expiring"
# Root runs with work in flight (a model turn, a tool, a decided call), scored
# by creation time: what a restarted replica must recover. Sorted for a stable order.
IN_FLIGHT = "in-flight"

# Finished root runs (neither waiting nor working), scored by their last change: what
# the retention prune reads, oldest first, without a scan. One set (per group).
DONE = "done"
# Sorted set per thread of all its root runs, scored by their last change, so a
# prune knows when a thread has no run left (its history then goes too).
THREAD_RUNS = "thread-runs"
# Set per root run of its sub-agent runs (of one group on a cluster: a child's
# group), written before a child's first save, so a pruned tree leaves no child.
CHILDREN = "children"

# Hash of the one-time backfill of ``thread-runs``, ``children`` and ``done`` from runs
# saved before those indexes existed (an upgrade): a SCAN cursor per phase and primary
# (``backfill_cursor``), so each prune resumes where the last one stopped, and the
# ``complete`` marker once every primary was scanned in both phases. No TTL: removing
# it only repeats idempotent writes.
BACKFILL = "backfill"
BACKFILL_COMPLETE_FIELD = "complete"
BACKFILL_END = "end"
"""The cursor of a phase and primary whose scan came back to 0."""

# List per thread of JSON messages, trimmed to the caller's window on append.
# No TTL: it is removed with the thread's last run (``prune``), however long that lives.
HISTORY = "history"
# On a cluster, a root run starting on a thread sets this key beside the thread's
# history to its creation time, before its first save (the thread's runs indexes are
# in every group, out of reach of one script): a prune that checked those indexes
# before the run was saved keeps the history while the key holds a time past its
# cut-off. The TTL outlasts the few steps between setting it and the save, and
# between a prune's check and its delete.
HISTORY_HOLD = "history-hold"
HISTORY_HOLD_MS = 10 * 60 * 1000
# On a cluster, a thread's history and hold are in the thread's group, with its top
# runs (drawn there: ``tree_run_id``), so the save that ends a run appends to it in one
# script. A version before kept the history under the thread's own tag: the move
# (``RedisHistoryMove``, a bounded step per prune) brings each old list over, marking
# the thread moved (``history-moved``, a day: long enough for any mover that read the
# list to find the mark), and the hash ``history-move`` keeps its SCAN cursor per
# primary and, once every primary was scanned, ``complete``. Until then a read that
# finds no history under the new name looks under the old one too.
HISTORY_MOVE = "history-move"
HISTORY_MOVED = "history-moved"
HISTORY_MOVED_MS = 24 * 60 * 60 * 1000
# Append-only audit lists: per run, per thread, and one for the whole
# deployment. Never expire; only ever shortened from their start, by the audit
# retention (``prune_audit``): they are the record of decisions.
AUDIT_RUN = "audit:run"
AUDIT_THREAD = "audit:thread"
AUDIT_ALL = "audit:all"
# Beside each deployment list: its chain's head ("<seq> <hash>", see ``agents.chain``),
# set by the script that appends, which appends only after the head the writer linked
# its entries to; and the anchor the last prune left (JSON), set by the prune's script.
AUDIT_HEAD = "audit:head"
AUDIT_ANCHOR = "audit:anchor"
# Heartbeat per root run: the time (epoch seconds) its driver is alive until,
# expiring then by itself, so a finished or crashed run leaves nothing behind.
ALIVE = "alive"
# Lock lease holding a random token; its TTL is the caller's ``ttl``, which bounds
# how long a crashed holder blocks everyone else.
LOCK = "lock"

# Shard groups on a Redis Cluster. Fixed for a deployment's lifetime: a run is
# found by its id's group, so a different count would lose every stored run.
SHARDS = TREE_GROUPS
SLOTS = 16384

# Redis rejects a zero expiry; sub-millisecond TTLs are rounded up to this.
MIN_TTL_MS = 1


@cache
def shard_tags(count: int) -> tuple[str, ...]:
    """A hash tag per shard group, the ``i``-th in the ``i``-th ``1/count`` of the slots."""
    from redis.crc import key_slot

    tags: list[str | None] = [None] * count
    candidate = 0
    while None in tags:
        group = key_slot(str(candidate).encode()) * count // SLOTS
        if tags[group] is None:
            tags[group] = str(candidate)
        candidate += 1
    return tuple(tag for tag in tags if tag is not None)


def shard_of(name: str, count: int) -> int:
    """The shard group of a run id or thread id (0 when there are no groups)."""
    return zlib.crc32(name.encode()) % count if count else 0


@dataclass(frozen=True)
class ShardedKeys:
    """Key names under one prefix, in shard groups on a cluster (the store's and
    the chat state's keys share the groups and their tags).

    Attributes:
        prefix: The deployment's prefix.
        shards: Shard groups: 0 on one primary (no groups), ``SHARDS`` on a cluster.
    """

    prefix: str = DEFAULT_PREFIX
    shards: int = 0
    _tags: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_tags", shard_tags(self.shards) if self.shards else ())

    @property
    def groups(self) -> range:
        """Every shard group (one without groups), to read a deployment-wide key from each."""
        return range(max(1, self.shards))


@dataclass(frozen=True)
class RedisKeys(ShardedKeys):
    """The store's key names."""

    def shard(self, run_id: str) -> int:
        """The shard group a run's keys are in."""
        return shard_of(run_id, self.shards)

    def _own(self, kind: str, name: str, shard: int) -> str:
        """A key of one run or thread: tagged by the name, or by its group on a cluster."""
        if not self.shards:
            return f"{self.prefix}:{kind}:{{{name}}}"
        return f"{self.prefix}:{kind}:{{{self._tags[shard]}}}:{name}"

    def _index(self, kind: str, shard: int) -> str:
        """A deployment-wide key: one, or one per group on a cluster."""
        if not self.shards:
            return f"{self.prefix}:{kind}"
        return f"{self.prefix}:{kind}:{{{self._tags[shard]}}}"

    def run(self, run_id: str) -> str:
        """The hash holding a run's snapshot and revision."""
        return self._own(RUN, run_id, self.shard(run_id))

    def audit_run(self, run_id: str) -> str:
        """The audit list of one run."""
        return self._own(AUDIT_RUN, run_id, self.shard(run_id))

    def paused(self, thread_id: str, shard: int = 0) -> str:
        """The index of a thread's paused root runs (of one group on a cluster)."""
        return self._own(PAUSED, thread_id, shard)

    def paused_affixes(self, shard: int) -> tuple[str, str]:
        """What ``paused`` puts before and after the thread id (the Lua script needs it)."""
        before, _, after = self.paused("\0", shard).partition("\0")
        return before, after

    def live(self, thread_id: str, shard: int = 0) -> str:
        """The index of a thread's root runs that wait or work (of one group on a cluster)."""
        return self._own(LIVE, thread_id, shard)

    def live_affixes(self, shard: int) -> tuple[str, str]:
        """What ``live`` puts before and after the thread id (the Lua script needs it)."""
        before, _, after = self.live("\0", shard).partition("\0")
        return before, after

    def thread_runs(self, thread_id: str, shard: int = 0) -> str:
        """The index of all a thread's root runs (of one group on a cluster)."""
        return self._own(THREAD_RUNS, thread_id, shard)

    def thread_runs_affixes(self, shard: int) -> tuple[str, str]:
        """What ``thread_runs`` puts before and after the thread id (for the Lua script)."""
        before, _, after = self.thread_runs("\0", shard).partition("\0")
        return before, after

    def children(self, root_run_id: str, shard: int = 0) -> str:
        """The sub-agent runs of a root run (those in one group on a cluster)."""
        return self._own(CHILDREN, root_run_id, shard)

    def done(self, shard: int = 0) -> str:
        """The index of finished root runs by their last change."""
        return self._index(DONE, shard)

    def expiring(self, shard: int = 0) -> str:
        """The index of paused root runs by earliest expiry."""
        return self._index(EXPIRING, shard)

    def in_flight(self, shard: int = 0) -> str:
        """The index of root runs with work in flight."""
        return self._index(IN_FLIGHT, shard)

    def history(self, thread_id: str) -> str:
        """A thread's remembered conversation: tagged by the thread on one primary, in
        the thread's group on a cluster (where its top runs are: ``tree_run_id``)."""
        return self._own(HISTORY, thread_id, shard_of(thread_id, self.shards))

    def legacy_history(self, thread_id: str) -> str:
        """Where a version before ``history``'s groups kept a thread's conversation on a
        cluster (``RedisHistoryMove`` moves it)."""
        return f"{self.prefix}:{HISTORY}:{{{thread_id}}}"

    def history_hold(self, thread_id: str) -> str:
        """The hold a root run starting on a thread takes on its history (a cluster's)."""
        return self._own(HISTORY_HOLD, thread_id, shard_of(thread_id, self.shards))

    def history_pattern(self) -> str:
        """A SCAN pattern for every thread's conversation as a version before groups kept
        it on a cluster (the move's, never a hot path's)."""
        return f"{_glob_escaped(self.prefix)}:{HISTORY}:{{*"

    def history_move(self) -> str:
        """The state of the move of a cluster's histories into their threads' groups."""
        return f"{self.prefix}:{HISTORY_MOVE}"

    def history_moved(self, thread_id: str) -> str:
        """The mark that one thread's old conversation was moved (beside ``history``)."""
        return self._own(HISTORY_MOVED, thread_id, shard_of(thread_id, self.shards))

    def audit_thread(self, thread_id: str, shard: int = 0) -> str:
        """The audit list of one thread (of one group on a cluster)."""
        return self._own(AUDIT_THREAD, thread_id, shard)

    def audit_all(self, shard: int = 0) -> str:
        """The audit list of the whole deployment."""
        return self._index(AUDIT_ALL, shard)

    def audit_head(self, shard: int = 0) -> str:
        """The head of the deployment's audit chain (of one group on a cluster)."""
        return self._index(AUDIT_HEAD, shard)

    def audit_anchor(self, shard: int = 0) -> str:
        """Where the last prune left the deployment's audit chain (of one group)."""
        return self._index(AUDIT_ANCHOR, shard)

    def alive(self, run_id: str) -> str:
        """A run's heartbeat (one key: tagged by the run everywhere)."""
        return f"{self.prefix}:{ALIVE}:{{{run_id}}}"

    def lock(self, name: str) -> str:
        """A lock lease."""
        return f"{self.prefix}:{LOCK}:{name}"

    def backfill(self) -> str:
        """The state of the backfill of the indexes from runs saved before them."""
        return f"{self.prefix}:{BACKFILL}"

    def run_pattern(self) -> str:
        """A SCAN pattern for every run hash (the backfill's, never a hot path's)."""
        return f"{_glob_escaped(self.prefix)}:{RUN}:*"

    def pattern(self) -> str:
        """A SCAN pattern for every key under the prefix (tests and tools, never hot paths)."""
        return f"{self.prefix}:*"


def backfill_cursor(phase: str, node: str) -> str:
    """The field of the backfill's hash holding one phase's SCAN cursor on one primary."""
    return f"{phase}:{node}"


def _glob_escaped(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)
