"""User groups named in the policy (a Slack ``S0GROUP`` or ``@oncall``), as their members.

The platform says who is in a group (``Messenger.group_members``); members are kept
for a short while, so a person added to the group may decide within a minute and
one removed stops being able to as soon. A group that cannot be looked up counts as
nobody: a click is refused rather than let through (fail closed).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from cachetools import TTLCache

from .types import Messenger, Undeliverable

log = logging.getLogger(__name__)

GROUP_TTL = 60.0
"""How long (seconds) a group's members are kept before the platform is asked again."""
GROUPS_KEPT = 1_000


class Groups:
    """The people a policy's names stand for, per platform."""

    def __init__(self, *, ttl: float = GROUP_TTL) -> None:
        self._members: TTLCache[tuple[str, str], frozenset[str] | None] = TTLCache(
            maxsize=GROUPS_KEPT, ttl=ttl
        )

    async def members(self, platform: str, messenger: Messenger, name: str) -> frozenset[str]:
        """Who ``name`` stands for on ``platform``: a group's members, else ``name`` itself.

        Raises:
            LookupError: ``name`` looks like a group the platform does not have.
            Undeliverable: The platform could not be asked.
        """
        key = (platform, name)
        if key not in self._members:
            self._members[key] = await messenger.group_members(name)
        found = self._members[key]
        return frozenset({name}) if found is None else found

    async def expand(
        self, platform: str, messenger: Messenger | None, names: Iterable[str]
    ) -> frozenset[str]:
        """Everyone the names stand for; a group that cannot be looked up adds nobody."""
        people: set[str] = set()
        for name in names:
            if messenger is None:
                people.add(name)
                continue
            try:
                people |= await self.members(platform, messenger, name)
            except (LookupError, Undeliverable) as exc:
                log.warning("user group %s on %s could not be looked up: %s", name, platform, exc)
            except Exception:
                log.exception("user group %s on %s could not be looked up", name, platform)
        return frozenset(people)
