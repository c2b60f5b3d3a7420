"""Every Redis key the chat state writes, and why it exists.

Keys live under the deployment prefix of the store's URL (``ab`` unless
``?prefix=...``), beside the store's own keys. ``seen`` and ``ref`` keep the
names they had when the store kept them, so an upgrade carries them over.
Thread keys carry the thread id, and card keys the run id, as a hash tag.

On a Redis Cluster a delivery's write (dedupe keys, inbox entry, thread marks) is
one script, so it must stay in one slot: there the inbox is one stream per shard
group (the store's groups and tags), a delivery goes to its thread's group, and
its dedupe keys and the thread's marks carry that group's tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agents.stores.redis_keys import ShardedKeys, shard_of

# Dedupe claim per platform delivery; its TTL is the caller's (the platform's
# retry horizon), so no constant here.
SEEN = "seen"
# Conversation reference per thread, for proactive messages. No TTL: a card may
# be decided long after the thread last spoke.
REFERENCE = "ref"
# Marker per thread the bot takes part in. No TTL: a thread never stops being one.
FOLLOW = "follow"
# Where a pending call's card was posted (JSON). No TTL: a few hundred bytes per
# call, read by the expiry sweep and by clicks however late they come.
CARD = "card"
# The lock of one card (votes, declines, expiry): a lease with a random token, deleted
# by its holder (compare-and-delete); its TTL frees it when a holder dies.
CARD_LOCK = "card-lock"
# List of JSON votes on a quorum card, in voting order; changed only by the
# add-vote script, which keeps each person once. No TTL, like the audit log.
VOTES = "votes"

# The asks of a run that have a card or votes (a set, in the run's slot), so a
# pruned run's cards and votes are found without a scan. No TTL: it goes with them.
ASKS = "asks"
# The waiting-index sets a run was put in (a set of their key names, in the run's
# slot), so a pruned run leaves none of its entries behind.
WAITING_OF = "waiting-of"

# Timed jobs (reminders, escalations): a sorted set of keys by due time and a hash
# of their data, in one slot (one hash tag) so the take script may touch both.
TIMERS = "timers"
# Standing approvals of a thread: a hash of JSON {until, by} by whose calls of which
# tool. No TTL on the hash (each entry says until when it holds); revoking deletes it.
GRANTS = "grants"
# Notes adapters keep for a while: a string with its TTL, in a slot of its own.
NOTE = "note"
# Permanent records (an adapter's installations, JSON): a string, no TTL, in a slot of
# its own; removed only when the platform says the installation is gone.
RECORD = "record"
# Short lists (a person's recent decisions): a list, newest first, trimmed on each push.
RECENT = "recent"
# Who each waiting run waits for: a set of run ids per workspace and name (user id,
# group, "*", "asked:<id>"), all of a workspace in one slot. Readers prune decided runs.
WAITING = "waiting"

# The inbox: one stream of deliveries (field ``body``) with one consumer group,
# whose pending-entries list is who holds what, and since when (the lease).
# Entries are deleted once worked off, so the stream holds only unfinished work.
INBOX = "inbox"
INBOX_GROUP = "workers"
# Consumers idle this long and holding nothing are processes gone: forgotten,
# looked for at most once per interval per process.
GONE_AFTER_MS = 3_600_000
PRUNE_INTERVAL = 600.0

# Redis rejects a zero expiry; sub-millisecond TTLs are rounded up to this.
MIN_TTL_MS = 1


@dataclass(frozen=True)
class ChatKeys(ShardedKeys):
    """The chat state's key names (an inbox stream per shard group)."""

    def shard(self, thread_id: str) -> int:
        """The shard group of a thread's deliveries and marks."""
        return shard_of(thread_id, self.shards)

    def _group(self, shard: int) -> str:
        return f"{{{self._tags[shard]}}}:" if self.shards else ""

    def seen(self, key: str, shard: int = 0) -> str:
        """A dedupe claim (in its delivery's group on a cluster)."""
        return f"{self.prefix}:{SEEN}:{self._group(shard)}{key}"

    def inbox(self, shard: int = 0) -> str:
        """The inbox stream (of one group on a cluster)."""
        if not self.shards:
            return f"{self.prefix}:{INBOX}"
        return f"{self.prefix}:{INBOX}:{{{self._tags[shard]}}}"

    def _thread(self, kind: str, thread_id: str) -> str:
        if not self.shards:
            return f"{self.prefix}:{kind}:{{{thread_id}}}"
        return f"{self.prefix}:{kind}:{self._group(self.shard(thread_id))}{thread_id}"

    def reference(self, thread_id: str) -> str:
        """A thread's conversation reference."""
        return self._thread(REFERENCE, thread_id)

    def follow(self, thread_id: str) -> str:
        """The mark of a thread the bot follows."""
        return self._thread(FOLLOW, thread_id)

    def card(self, run_id: str, ask: str) -> str:
        """Where a call's card was posted."""
        return f"{self.prefix}:{CARD}:{{{run_id}}}:{ask}"

    def card_lock(self, run_id: str, ask: str) -> str:
        """The lock of a card."""
        return f"{self.prefix}:{CARD_LOCK}:{{{run_id}}}:{ask}"

    def votes(self, run_id: str, ask: str) -> str:
        """The votes on a quorum card."""
        return f"{self.prefix}:{VOTES}:{{{run_id}}}:{ask}"

    def asks(self, run_id: str) -> str:
        """The asks of a run with a card or votes."""
        return f"{self.prefix}:{ASKS}:{{{run_id}}}"

    def waiting_of(self, run_id: str) -> str:
        """The waiting-index sets a run is in."""
        return f"{self.prefix}:{WAITING_OF}:{{{run_id}}}"

    def grants(self, thread_id: str) -> str:
        """A thread's standing approvals."""
        return self._thread(GRANTS, thread_id)

    def waiting(self, scope: str, name: str) -> str:
        """The runs of a workspace waiting for someone (an inbox's index), in one slot."""
        return f"{self.prefix}:{WAITING}:{{{scope}}}:{name}"

    def grants_by(self, granted_by: str) -> str:
        """The threads where someone gave standing approvals (an index, read-repaired)."""
        return f"{self.prefix}:{GRANTS}-by:{{{granted_by}}}"

    def note(self, key: str) -> str:
        """A note an adapter keeps for a while (``set_note``), in a slot of its own."""
        return f"{self.prefix}:{NOTE}:{{{key}}}"

    def record(self, key: str) -> str:
        """A permanent record (``put_record``)."""
        return f"{self.prefix}:{RECORD}:{{{key}}}"

    def records_pattern(self, prefix: str) -> str:
        """A SCAN pattern for the records whose key starts with ``prefix`` (a listing's,
        never a hot path's): glob characters of either prefix stand for themselves."""
        return f"{glob_escaped(self.record(prefix)[:-1])}*}}"

    def record_key(self, name: str) -> str:
        """The key a record was put under, from its Redis key (``record``'s inverse)."""
        return name[len(self.record("")) - 1 : -1]

    def recent(self, key: str) -> str:
        """A short list kept newest first (``push_recent``), in a slot of its own."""
        return f"{self.prefix}:{RECENT}:{{{key}}}"

    def timers(self) -> tuple[str, str]:
        """The timed jobs: their due times (sorted set) and their data (hash)."""
        return f"{self.prefix}:{{{TIMERS}}}:due", f"{self.prefix}:{{{TIMERS}}}:data"


def glob_escaped(text: str) -> str:
    """``text`` as a SCAN pattern matching only itself."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)
