"""Calls to the Bot Connector besides posts and updates: a streamed answer's requests
and member lookups, with the connector's error answers made readable, and how every
activity is addressed to a stored conversation.

Each call runs with the ``ConnectorClient`` of one proactive turn (``Run``: the
messenger's way of continuing a conversation).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from botbuilder.schema import Activity, ConversationReference
from botframework.connector.aio import ConnectorClient
from botframework.connector.models import ErrorResponseException

from .streaming import StreamRefused

log = logging.getLogger(__name__)

Send = Callable[[ConnectorClient, ConversationReference], Awaitable[Any]]
Run = Callable[[ConversationReference, Send], Awaitable[Any]]


def addressed(activity: Activity, reference: ConversationReference) -> Activity:
    """A copy of ``activity`` from the bot into the reference's conversation."""
    out = Activity().deserialize(activity.serialize())
    # Read back as plain ``Entity``s, mentions (and stream infos) would lose their fields.
    out.entities = activity.entities
    out.conversation = reference.conversation
    out.from_property = reference.bot
    out.recipient = reference.user
    out.channel_id = reference.channel_id
    out.service_url = reference.service_url
    return out


class StreamChannel:
    """Where a streamed answer's requests go: straight to the connector, like posts (and
    under the same limits: ``run`` keeps to them)."""

    def __init__(self, run: Run, reference: ConversationReference) -> None:
        self._run = run
        self._reference = reference

    async def send(self, activity: Activity) -> str | None:
        """``POST`` it; the id Teams answered with (``StreamRefused`` on an error)."""

        async def send(connector: ConnectorClient, reference: ConversationReference) -> Any:
            response = await connector.conversations.send_to_conversation(
                reference.conversation.id, addressed(activity, reference)
            )
            return getattr(response, "id", None)

        try:
            sent: str | None = await self._run(self._reference, send)
        except ErrorResponseException as exc:  # what the limits do not wait out
            raise refused(exc) from None
        return sent

    async def replace(self, activity_id: str, activity: Activity) -> None:
        """``PUT`` it in place of ``activity_id`` (``StreamRefused`` on an error)."""

        async def send(connector: ConnectorClient, reference: ConversationReference) -> None:
            updated = addressed(activity, reference)
            updated.id = activity_id
            await connector.conversations.update_activity(
                reference.conversation.id, activity_id, updated
            )

        try:
            await self._run(self._reference, send)
        except ErrorResponseException as exc:
            raise refused(exc) from None


async def members(
    connector: ConnectorClient, conversation: str, users: list[str]
) -> dict[str, str | None]:
    """Each user's Teams id in ``conversation`` (``None``: not a member); a lookup that
    fails otherwise is left out."""

    async def one(user: str) -> str | None:
        try:
            member = await connector.conversations.get_conversation_member(conversation, user)
        except ErrorResponseException as exc:
            if status(exc) == 404:
                return None
            raise
        return getattr(member, "id", None) or None

    outcomes = await asyncio.gather(*(one(user) for user in users), return_exceptions=True)
    found: dict[str, str | None] = {}
    for user, outcome in zip(users, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            log.warning("could not look up %s in %s: %s", user, conversation, outcome)
        else:
            found[user] = outcome
    return found


def status(exc: ErrorResponseException) -> int:
    """The HTTP status the connector answered with."""
    return int(getattr(exc.response, "status_code", 0) or 0)


def refused(exc: ErrorResponseException) -> StreamRefused:
    """The connector's error answer, with Teams' error code and message."""
    error = getattr(getattr(exc, "error", None), "error", None)
    code = str(getattr(error, "code", None) or "")
    message = str(getattr(error, "message", None) or exc)
    return StreamRefused(status(exc), code, message)
