"""People: who they are in each workspace, and who may decide what.

Ids are per platform and workspace; display names are only what adapters told this
process (``remember_name``), never parsed back from text. User groups the policy names
are expanded to their members through the platform (``Groups``). An approvals list
reads a person's waiting calls under the names they go by (``inbox_names``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Final

from cachetools import LRUCache

from agents import PendingInfo

from .groups import Groups
from .policy import ApprovalPolicy
from .tiers import Call
from .types import Messenger, Person, ThreadKey

log = logging.getLogger(__name__)

NAME_CACHE_SIZE: Final = 10_000
"""People whose display names one process remembers (ids are always known)."""
MAX_DIRECT: Final = 25
"""The most people one call is sent to directly (a DM each, a link each)."""
ANYONE = "*"
"""The inbox index's name for calls anyone may decide."""
ASKED = "asked:"
"""The inbox index's prefix for a requester's own calls."""


def scope_of(thread: ThreadKey) -> str:
    """The workspace a thread is in, as thread ids start (inboxes and grants are per one)."""
    return f"{thread.platform}:{thread.workspace}:"


class People:
    """The people of every workspace the bot serves, as this process knows them.

    Args:
        policy: Who may decide what.
        messenger_of: The messenger of a thread's platform, if this process serves it
            (user groups are looked up through it).
    """

    def __init__(
        self,
        policy: ApprovalPolicy,
        messenger_of: Callable[[ThreadKey | None], Messenger | None],
    ) -> None:
        self._policy = policy
        self._named = policy.names()[0]
        """Every person and group the policy names (it never changes once loaded)."""
        self._messenger_of = messenger_of
        self._names: LRUCache[str, str] = LRUCache(maxsize=NAME_CACHE_SIZE)
        self.groups = Groups()

    def remember_name(self, thread: ThreadKey, user_id: str, user_name: str | None) -> None:
        """Keep a display name an adapter told us for someone in ``thread``'s workspace."""
        if user_name:
            self._names[_person_key(thread, user_id)] = user_name

    def who(self, thread: ThreadKey, user_id: str) -> Person:
        """A person of ``thread``'s workspace, with the name we were told (in this process).

        Ids are per platform and workspace: a name heard on one never names
        someone on another, whatever the ids look like.
        """
        return Person(id=user_id, name=self._names.get(_person_key(thread, user_id)))

    async def deciders(self, thread: ThreadKey, call: Call) -> frozenset[str]:
        """Who may decide ``call`` in ``thread`` now (empty: anyone), user groups as their
        members (a call not asked yet: as it would be asked)."""
        names = self._policy.deciders_of(call)
        return await self.groups.expand(thread.platform, self._messenger_of(thread), names)

    def approvers(self, call: Call, people: frozenset[str]) -> list[str]:
        """Of ``people`` who may decide ``call``, those to send it to (not its requester,
        when they may not approve their own call), in order (a caller takes at most
        ``MAX_DIRECT``)."""
        tool, requester = call.tool_name, call.requester
        if not self._policy.rule(tool, call).allow_self_approval and requester is not None:
            people = people - {requester}
        return sorted(people)

    def waiting_names(self, info: PendingInfo) -> list[str]:
        """Whom a waiting call is indexed under for inboxes: the names that may decide it
        (escalation's included; ``*`` when anyone may) and ``asked:<requester>``."""
        rule = self._policy.rule(info.tool_name, info)
        names = sorted(rule.approvers | rule.escalate_to) if rule.approvers else [ANYONE]
        return names + ([f"{ASKED}{info.requester}"] if info.requester else [])

    async def inbox_names(self, thread: ThreadKey, user_id: str) -> list[str]:
        """The names a person's inbox reads the index under: theirs, anyone's, their own
        requests', and each user group of the policy they are in."""
        return [user_id, ANYONE, f"{ASKED}{user_id}", *await self.groups_of(thread, user_id)]

    async def groups_of(
        self, thread: ThreadKey, user_id: str, *, strict: bool = False
    ) -> list[str]:
        """The user groups the policy names that ``user_id`` is in (in ``thread``'s
        workspace), as the policy names them; one that cannot be looked up is left out
        (``strict``: ``LookupError``, for a rule that must not guess)."""
        messenger = self._messenger_of(thread)
        people = self._named
        found: list[str] = []
        for name in sorted(people - {user_id}):
            if messenger is None:
                break
            try:
                members = await self.groups.members(thread.platform, messenger, name)
            except Exception as exc:
                log.warning("user group %s could not be looked up", name, exc_info=True)
                if strict:
                    raise LookupError(f"user group {name} could not be looked up") from exc
                continue
            if name not in members and user_id in members:
                found.append(name)
        return found

    async def check_name(
        self, name: str, messengers: Mapping[str, Messenger]
    ) -> tuple[str, str] | None:
        """Why ``name``, which looks like a user group somewhere, is none on any of
        ``messengers``' platforms, or ``None`` (a problem of the policy, for its check)."""
        unknown = False
        why: list[str] = []
        for platform, messenger in messengers.items():
            try:
                members = await self.groups.members(platform, messenger, name)
            except LookupError as exc:
                unknown = True
                why += [f"{platform}: {exc}"] if str(exc) else []
                continue
            except Exception as exc:  # an outage, a refusal (a scope the app lacks)
                return ("approvers", f"{platform} could not be asked about {name!r}: {exc}")
            if members != frozenset({name}):
                return None
        if unknown or name.startswith("@"):
            said = f" ({'; '.join(why)})" if why else ""
            return ("approvers", f"{name!r} is no user group the bot can look up{said}")
        return None


def _person_key(thread: ThreadKey, user_id: str) -> str:
    return f"{thread.platform}:{thread.workspace}:{user_id}"
