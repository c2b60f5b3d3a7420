"""Decision links: one per approver and call, to decide it in a browser (``bot.pages``).

A link is ``<public url>/approve/<token>``; the token names the run, the call and the
person it is for, signed (``itsdangerous``, HMAC-SHA256) with a key the store keeps, so
every replica makes and reads the same links, across restarts, and nobody can make
one for another person or call. It lasts as long as its call waits, and is spent by
the first decision made with it (``spend``): opened again, it says so.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Final

from itsdangerous import BadSignature, URLSafeSerializer

from .chat_state import ChatState

PATH: Final = "/approve/"
"""Where decision pages are served: ``PATH + token``."""
MAX_TOKEN: Final = 1000
"""The longest token read (a longer one is no link of the bot's)."""
SALT: Final = "decision-page"
KEY_RECORD: Final = "decision-page:key"
"""The record holding the signing key (made once, by the first replica that needs it)."""
SPENT_FOR: Final = 30 * 24 * 3600.0
"""Seconds a spent link is remembered as spent (longer than any call waits)."""


@dataclass(frozen=True, kw_only=True)
class LinkFor:
    """What a link decides, and for whom."""

    run_id: str
    tool_call_id: str
    user_id: str

    @property
    def key(self) -> str:
        return f"page-spent:{self.run_id}:{self.tool_call_id}:{self.user_id}"


class Links:
    """Makes and reads decision links.

    Args:
        chat: Where the signing key is kept, and which links are spent.
        public_url: Where people's browsers reach the bot (``https://bot.example.com``):
            links are made with it; without it they are paths (``/approve/...``).
    """

    def __init__(self, chat: ChatState, public_url: str | None = None) -> None:
        self._chat = chat
        self.public_url = public_url.rstrip("/") if public_url else None
        self._signer: URLSafeSerializer | None = None

    async def url(self, link: LinkFor) -> str:
        """The link (absolute with ``public_url``, else a path)."""
        token = (await self._sign()).dumps([link.run_id, link.tool_call_id, link.user_id])
        return f"{self.public_url or ''}{PATH}{token}"

    async def read(self, token: str) -> LinkFor | None:
        """What ``token`` links to, or ``None`` for one the bot did not sign."""
        if not token or len(token) > MAX_TOKEN:
            return None
        try:
            value = (await self._sign()).loads(token)
        except BadSignature:
            return None
        if not (isinstance(value, list) and len(value) == 3):
            return None
        if not all(isinstance(part, str) and part for part in value):
            return None
        return LinkFor(run_id=value[0], tool_call_id=value[1], user_id=value[2])

    async def spend(self, link: LinkFor) -> None:
        """Mark ``link`` used: it no longer decides."""
        await self._chat.set_note(link.key, "1", ttl=SPENT_FOR)

    async def spent(self, link: LinkFor) -> bool:
        """Whether ``link`` was used."""
        return await self._chat.note(link.key) is not None

    async def _sign(self) -> URLSafeSerializer:
        if self._signer is None:
            self._signer = URLSafeSerializer(await self._key(), salt=SALT)
        return self._signer

    async def _key(self) -> str:
        """The signing key: the store's, made under a lock by the first who needs it."""
        found = await self._chat.record(KEY_RECORD)
        if found is None:
            async with self._chat.card_lock(KEY_RECORD, "make"):
                found = await self._chat.record(KEY_RECORD)
                if found is None:
                    found = json.dumps({"key": secrets.token_urlsafe(32)})
                    await self._chat.put_record(KEY_RECORD, found)
        key = json.loads(found)["key"]
        if not isinstance(key, str):
            raise ValueError(f"record {KEY_RECORD} holds no key")
        return key
