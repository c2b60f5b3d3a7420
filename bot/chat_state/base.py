"""The chat layer's own state: one protocol, one implementation per backend.

The runtime's store keeps runs; everything the chat layer must remember across
replicas and restarts is here, under named operations: the threads the bot
follows, each thread's conversation reference (for proactive messages), where
each card was posted, the votes on quorum cards, dedupe claims for platform
redeliveries, and a lock per card. Backends: memory (tests, the console), the
same SQLite file as the store, the same Redis; each passes ``tests/bot/
test_chat_state.py``.

When the bot gets a durable inbox for incoming messages and clicks (written
before the ack, worked off by leased workers), it belongs here: it is chat
state, shared by every replica, with the same backends; ``ChatBot.on_message``
and ``on_click`` are where it would be written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from pydantic import TypeAdapter

from agents import PendingInfo, Store

from ..types import MessageRef, Person, ThreadKey


@dataclass(frozen=True, kw_only=True)
class CardPlace:
    """Where a pending call's card (or question) was posted."""

    thread: ThreadKey
    ref: MessageRef


CARD_PLACE = TypeAdapter(CardPlace)
"""JSON for ``CardPlace`` (backends store it as text)."""
PERSON = TypeAdapter(Person)
"""JSON for ``Person`` (backends store votes as text)."""


def ask_id(tool_call_id: str, asked_at: datetime) -> str:
    """One asking of a tool call, which cards, votes and card locks are kept by.

    A call asked again (an answer after its approval changed its arguments) is
    a new card with votes of its own: approvals of the old arguments do not count.
    """
    return f"{tool_call_id}@{asked_at.isoformat()}"


def ask_of(call: PendingInfo) -> str:
    """The ask of a pending call (see ``ask_id``)."""
    return ask_id(call.tool_call_id, call.created_at)


def json_object(text: str) -> dict[str, Any]:
    """Stored JSON that must be an object (a conversation reference)."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"stored reference is not a JSON object: {text[:80]!r}")
    return value


class StoreCardLocks:
    """``card_lock`` for every backend: a lease of the store's, named per card.

    The runtime's own locks are named ``run:<id>``; a card's are ``card:<run>:<ask>``.
    """

    _locks: Store

    def card_lock(
        self, run_id: str, ask: str, *, wait: float = 30.0
    ) -> AbstractAsyncContextManager[None]:
        """Hold one card's lock across every process (see ``ChatState.card_lock``)."""
        return self._locks.lock(f"card:{run_id}:{ask}", wait=wait)


@runtime_checkable
class ChatState(Protocol):
    """What the chat layer keeps, shared by every process of one deployment."""

    async def follow(self, thread_id: str) -> None:
        """Remember that the bot takes part in a thread (replies there are for it)."""
        ...

    async def follows(self, thread_id: str) -> bool:
        """Whether the bot takes part in a thread."""
        ...

    async def set_conversation_ref(self, thread_id: str, ref: dict[str, Any]) -> None:
        """Keep (or replace) the platform's reference for messaging a thread unprompted."""
        ...

    async def conversation_ref(self, thread_id: str) -> dict[str, Any] | None:
        """The thread's conversation reference, or ``None``."""
        ...

    async def set_card(self, run_id: str, ask: str, place: CardPlace) -> None:
        """Remember where a pending call's card was posted."""
        ...

    async def card_of(self, run_id: str, ask: str) -> CardPlace | None:
        """Where a pending call's card was posted, or ``None`` if it never was."""
        ...

    async def add_vote(self, run_id: str, ask: str, voter: Person) -> list[Person]:
        """Add one approval vote, atomically; a second vote by the same person is no-op.

        Returns every vote on the card, in voting order.
        """
        ...

    async def votes(self, run_id: str, ask: str) -> list[Person]:
        """The votes on a card, in voting order (none yet: empty)."""
        ...

    async def first_delivery(self, keys: Sequence[str], *, ttl: float) -> bool:
        """Whether this is the first delivery of a message, its ``keys`` remembered ``ttl`` s.

        Atomic over every key: ``True`` (and all keys claimed) only when none was
        seen; otherwise ``False`` and nothing claimed, so a redelivery can never
        take a key from the delivery that is handled.
        """
        ...

    def card_lock(
        self, run_id: str, ask: str, *, wait: float = 30.0
    ) -> AbstractAsyncContextManager[None]:
        """Hold one card's lock across every process (votes, declines, expiry).

        Raises ``LockTimeout`` when it cannot be had within ``wait`` (see ``Store.lock``).
        """
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
