"""Threads the bot takes part in, so replies there continue without a mention.

Slack sends every message of a channel the bot is in (``message.channels`` /
``message.groups``); only replies in threads the bot is active in are for it.
A thread becomes active when someone mentions the bot in it or the bot posts in
it. The mark lives in the store (``put_reference`` under its own key prefix), so
every replica and a restarted process agree; ``seen_before`` would not do, as it
cannot be read without writing. Positive answers are cached in-process: a thread
never becomes inactive.
"""

from __future__ import annotations

import logging

from cachetools import LRUCache

from agents import Store
from bot import ThreadKey

log = logging.getLogger(__name__)

KEY_PREFIX = "slack-active:"
"""Keeps the marks apart from the per-thread references the core may store."""

CACHE_SIZE = 10_000


class ActiveThreads:
    """Marks and checks threads in the store, with a bounded in-process cache."""

    def __init__(self, store: Store, *, cache_size: int = CACHE_SIZE) -> None:
        self._store = store
        self._known: LRUCache[str, bool] = LRUCache(maxsize=cache_size)

    async def mark(self, thread: ThreadKey) -> None:
        """Remember that the bot takes part in ``thread`` (a failure is logged, not raised)."""
        if thread.id in self._known:
            return
        try:
            await self._store.put_reference(KEY_PREFIX + thread.id, {"root": thread.root})
        except Exception:
            log.exception("could not mark %s as active", thread.id)
            return
        self._known[thread.id] = True

    async def contains(self, thread: ThreadKey) -> bool:
        """Whether the bot takes part in ``thread``."""
        if self._known.get(thread.id):  # a read counts as a use: recent threads stay
            return True
        if await self._store.get_reference(KEY_PREFIX + thread.id) is None:
            return False
        self._known[thread.id] = True
        return True
