"""Every Redis key the chat state writes, and why it exists.

Keys live under the deployment prefix of the store's URL (``ab`` unless
``?prefix=...``), beside the store's own keys. ``seen`` and ``ref`` keep the
names they had when the store kept them, so an upgrade carries them over.
Thread keys carry the thread id, and card keys the run id, as a hash tag.
"""

from __future__ import annotations

from dataclasses import dataclass

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
# List of JSON votes on a quorum card, in voting order; changed only by the
# add-vote script, which keeps each person once. No TTL, like the audit log.
VOTES = "votes"

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
class ChatKeys:
    """Key names under one prefix."""

    prefix: str

    def seen(self, key: str) -> str:
        """A dedupe claim."""
        return f"{self.prefix}:{SEEN}:{key}"

    def inbox(self) -> str:
        """The inbox stream."""
        return f"{self.prefix}:{INBOX}"

    def reference(self, thread_id: str) -> str:
        """A thread's conversation reference."""
        return f"{self.prefix}:{REFERENCE}:{{{thread_id}}}"

    def follow(self, thread_id: str) -> str:
        """The mark of a thread the bot follows."""
        return f"{self.prefix}:{FOLLOW}:{{{thread_id}}}"

    def card(self, run_id: str, ask: str) -> str:
        """Where a call's card was posted."""
        return f"{self.prefix}:{CARD}:{{{run_id}}}:{ask}"

    def votes(self, run_id: str, ask: str) -> str:
        """The votes on a quorum card."""
        return f"{self.prefix}:{VOTES}:{{{run_id}}}:{ask}"
