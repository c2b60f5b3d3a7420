"""Threads the bot takes part in, so replies there reach it without a mention.

Platforms that deliver every message of a channel (Slack's ``message.channels``,
Teams with RSC) leave it to the bot to tell which are for it: replies in threads
it follows. The core follows a thread when someone addresses the bot there and
when the bot posts there. The mark is the chat state's ``follow``, so every
replica and a restarted process agree; positive answers are cached in-process,
since a thread never stops being followed.
"""

from __future__ import annotations

import logging

from cachetools import LRUCache

from .chat_state import ThreadState
from .types import ThreadKey

log = logging.getLogger(__name__)

CACHE_SIZE = 10_000


class Following:
    """Marks and checks followed threads, with a bounded in-process cache."""

    def __init__(self, chat: ThreadState, *, cache_size: int = CACHE_SIZE) -> None:
        self._chat = chat
        self._known: LRUCache[str, bool] = LRUCache(maxsize=cache_size)

    async def follow(self, thread: ThreadKey) -> None:
        """Follow ``thread`` from now on (a failure is logged, not raised)."""
        if thread.id in self._known:
            return
        try:
            await self._chat.follow(thread.id)
        except Exception as exc:  # the store is away: the intake write marks it later
            log.warning("could not follow %s: %s", thread.id, exc)
            return
        self._known[thread.id] = True

    def remember(self, thread: ThreadKey) -> None:
        """``thread`` was followed elsewhere (in the step that recorded a message)."""
        self._known[thread.id] = True

    async def follows(self, thread: ThreadKey) -> bool:
        """Whether the bot takes part in ``thread``."""
        if self._known.get(thread.id):  # a read counts as a use: recent threads stay
            return True
        if not await self._chat.follows(thread.id):
            return False
        self._known[thread.id] = True
        return True
