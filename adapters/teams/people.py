"""People's Teams user ids (``29:...``), which card refreshes name them by, for the
Entra object ids the policy names them by.

Every activity from a person carries both (``from.id``, ``from.aadObjectId``), so
the ids of people who have written or clicked are learned as they come. Anyone
else is looked up in the conversation the card goes to (``GET
/v3/conversations/{id}/members/{user}`` takes an Entra object id); a 404 means
they are not a member there, so they cannot see the card at all. What a replica
learned stays in its memory only: another replica looks it up again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from cachetools import LRUCache, TTLCache

log = logging.getLogger(__name__)

TEAMS_ID_PREFIX: Final = "29:"
KNOWN_PEOPLE: Final = 10_000
"""People whose Teams id one process remembers (the ids never change)."""
ABSENT_TTL: Final = 300.0
"""How long (seconds) "not a member of that conversation" is believed (they may join)."""
LOOKUP_TIMEOUT: Final = 3.0
"""The longest a card waits for its approvers' ids (then it keeps its buttons for all)."""

Fetch = Callable[[list[str]], Awaitable[dict[str, str | None]]]
"""Looks people up in one conversation: each one's Teams id, ``None`` for a non-member;
raises for a lookup that failed (it is left out of the answer)."""


@dataclass(frozen=True, kw_only=True)
class Found:
    """The outcome of looking people up: their Teams ids (``None``: not a member there),
    and who could not be looked up."""

    ids: dict[str, str | None] = field(default_factory=dict)
    unknown: frozenset[str] = frozenset()


class Directory:
    """Teams user ids by Entra object id, learned and looked up."""

    def __init__(self) -> None:
        self._ids: LRUCache[str, str] = LRUCache(maxsize=KNOWN_PEOPLE)
        self._absent: TTLCache[tuple[str, str], bool] = TTLCache(
            maxsize=KNOWN_PEOPLE, ttl=ABSENT_TTL
        )

    def learn(self, entra_id: str | None, teams_id: str | None) -> None:
        """Remember a person's Teams id (from an activity they sent)."""
        if entra_id and teams_id and teams_id.startswith(TEAMS_ID_PREFIX):
            self._ids[entra_id] = teams_id

    def known(self, user: str) -> str | None:
        """The Teams id of ``user`` (an Entra object id, or already a Teams id), if known."""
        return user if user.startswith(TEAMS_ID_PREFIX) else self._ids.get(user)

    async def find(self, users: Iterable[str], *, conversation: str, fetch: Fetch) -> Found:
        """Each of ``users``' Teams id in ``conversation``: known ones at once, the others
        looked up there (within ``LOOKUP_TIMEOUT``; failures are ``unknown``)."""
        ids: dict[str, str | None] = {}
        missing: list[str] = []
        for user in dict.fromkeys(users):
            teams_id = self.known(user)
            if teams_id is not None:
                ids[user] = teams_id
            elif (conversation, user) in self._absent:
                ids[user] = None
            else:
                missing.append(user)
        if not missing:
            return Found(ids=ids)
        try:
            fetched = await asyncio.wait_for(fetch(missing), LOOKUP_TIMEOUT)
        except Exception as exc:
            log.warning("could not look up %d people in %s: %s", len(missing), conversation, exc)
            fetched = {}
        for user, teams_id in fetched.items():
            if teams_id is None:
                self._absent[conversation, user] = True
            else:
                self.learn(user, teams_id)
            ids[user] = teams_id
        return Found(ids=ids, unknown=frozenset(u for u in missing if u not in fetched))
