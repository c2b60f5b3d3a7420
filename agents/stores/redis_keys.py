"""Every Redis key the store writes, and why it exists.

All keys start with a deployment prefix (``ab`` unless the URL says
``?prefix=...``) so several bots, or test runs, can share one Redis and each
can remove its own keys. A run's keys carry its id as a hash tag (``{run_id}``)
and a thread's keys carry the thread id, so each group lands in one cluster
slot. ``save_run`` also updates the deployment-wide indexes in the same Lua
script, which a Redis Cluster would refuse across slots: the store targets one
primary (with replicas or Sentinel), where hash tags are harmless.
"""

from __future__ import annotations

from dataclasses import dataclass

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
# One sorted set of paused root runs scored by their earliest expiry, so the
# expiry sweep reads only what is due.
EXPIRING = "expiring"
# Root runs with work in flight (a model turn, a tool, a decided call), scored
# by creation time: what a restarted replica must recover. Sorted for a stable order.
IN_FLIGHT = "in-flight"

# List per thread of JSON messages, trimmed to the caller's window on append.
# No TTL: thread memory lasts as long as the other stores keep it.
HISTORY = "history"
# Append-only audit lists: per run, per thread, and one for the whole
# deployment. Never expire and never trimmed: they are the record of decisions.
AUDIT_RUN = "audit:run"
AUDIT_THREAD = "audit:thread"
AUDIT_ALL = "audit:all"
# Heartbeat per root run: the time (epoch seconds) its driver is alive until,
# expiring then by itself, so a finished or crashed run leaves nothing behind.
ALIVE = "alive"
# Lock lease holding a random token; its TTL is the caller's ``ttl``, which bounds
# how long a crashed holder blocks everyone else.
LOCK = "lock"

# Redis rejects a zero expiry; sub-millisecond TTLs are rounded up to this.
MIN_TTL_MS = 1


@dataclass(frozen=True)
class RedisKeys:
    """Key names under one prefix."""

    prefix: str = DEFAULT_PREFIX

    def run(self, run_id: str) -> str:
        """The hash holding a run's snapshot and revision."""
        return f"{self.prefix}:{RUN}:{{{run_id}}}"

    def audit_run(self, run_id: str) -> str:
        """The audit list of one run."""
        return f"{self.prefix}:{AUDIT_RUN}:{{{run_id}}}"

    def paused(self, thread_id: str) -> str:
        """The index of a thread's paused root runs."""
        return self.paused_prefix() + f"{{{thread_id}}}"

    def paused_prefix(self) -> str:
        """What ``paused`` puts before the thread's hash tag (the Lua script needs it)."""
        return f"{self.prefix}:{PAUSED}:"

    def expiring(self) -> str:
        """The index of paused root runs by earliest expiry."""
        return f"{self.prefix}:{EXPIRING}"

    def in_flight(self) -> str:
        """The index of root runs with work in flight."""
        return f"{self.prefix}:{IN_FLIGHT}"

    def history(self, thread_id: str) -> str:
        """A thread's remembered conversation."""
        return f"{self.prefix}:{HISTORY}:{{{thread_id}}}"

    def audit_thread(self, thread_id: str) -> str:
        """The audit list of one thread."""
        return f"{self.prefix}:{AUDIT_THREAD}:{{{thread_id}}}"

    def audit_all(self) -> str:
        """The audit list of the whole deployment."""
        return f"{self.prefix}:{AUDIT_ALL}"

    def alive(self, run_id: str) -> str:
        """A run's heartbeat."""
        return f"{self.prefix}:{ALIVE}:{{{run_id}}}"

    def lock(self, name: str) -> str:
        """A lock lease."""
        return f"{self.prefix}:{LOCK}:{name}"

    def pattern(self) -> str:
        """A SCAN pattern for every key under the prefix (tests and tools, never hot paths)."""
        return f"{self.prefix}:*"
