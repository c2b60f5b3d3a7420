"""Where the bot can start a conversation in each tenant: one it heard from.

Teams starts a new conversation (a post in a channel, a message in a group chat) only
from a conversation reference the bot was given: the service URL, the tenant and the
bot's account. So the first conversation the bot is addressed in, per tenant, is kept
here (a record, read by every replica), and a client's channel of that tenant
(``TeamsMessenger.channel_place``) starts its threads from it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from typing import Final

from bot import AdapterState, ThreadKey

log = logging.getLogger(__name__)

NEAR: Final = "teams:near:"
"""Records ``teams:near:<tenant>`` (and ``teams:near:*``, any tenant's): a thread the bot
was addressed in, whose reference the core kept."""
ANY: Final = "*"


class Nearby:
    """A conversation the bot heard from, per tenant."""

    def __init__(self, chat: AdapterState) -> None:
        self._chat = chat
        self._kept: set[str] = set()
        """Tenants this process has kept one for (once is enough)."""

    async def heard(self, thread: ThreadKey) -> None:
        """The bot was addressed in ``thread`` (its reference is kept): a place to start
        conversations of its tenant from. A failure is logged; the next message tries."""
        if thread.workspace in self._kept:
            return
        value = json.dumps(asdict(thread))
        try:
            for tenant in (thread.workspace, ANY):
                await self._chat.put_record(NEAR + tenant, value)
        except Exception as exc:
            log.warning("could not keep where tenant %s can be reached: %s", thread.workspace, exc)
            return
        self._kept.add(thread.workspace)

    async def near(self, tenant: str | None) -> ThreadKey | None:
        """A thread of ``tenant`` (any tenant's, without one) the bot heard from."""
        stored = await self._chat.record(NEAR + (tenant or ANY))
        if stored is None:
            return None
        return ThreadKey(**json.loads(stored))
