"""The chat layer's own state: one protocol, one implementation per backend.

The runtime's store keeps runs; everything the chat layer must remember across
replicas and restarts is here, under named operations: the threads the bot
follows, each thread's conversation reference (for proactive messages), where
each card was posted, the votes on quorum cards, dedupe claims for platform
redeliveries, and a lock per card. Backends: memory (tests, the console), the
same SQLite file as the store, the same PostgreSQL database, the same Redis; each
passes ``tests/bot/test_chat_state.py``.

The intake queue is here too: every message and click is written to it before the
platform gets its ack, in the same atomic step as its dedupe claim, and worked
off by leased workers on any replica (``bot.intake``). On Redis it is a stream
with a consumer group; on SQLite a table; on PostgreSQL a table whose writes wake
the other replicas (``IntakeSignal``); in memory a dictionary.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from pydantic import TypeAdapter

from agents import PendingInfo

from ..types import Destination, MessageRef, Person, Posted, ThreadKey


@dataclass(frozen=True, kw_only=True)
class CardCopy:
    """A card the policy sent away from its thread: where to (``to``), and where it is."""

    to: Destination
    thread: ThreadKey
    ref: MessageRef

    @property
    def posted(self) -> Posted:
        return Posted(thread=self.thread, ref=self.ref)


@dataclass(frozen=True, kw_only=True)
class CardPlace:
    """Where a pending call's card (or question) was posted.

    ``thread`` is the run's own thread and ``ref`` the message there: the card, or,
    when the policy sent the card elsewhere, the pointer to it (a ``CardPointer``).
    ``copies`` are the cards posted elsewhere (an approvers' channel, each approver's
    direct message), each updated with the card.
    """

    thread: ThreadKey
    ref: MessageRef
    copies: tuple[CardCopy, ...] = ()
    batch: str | None = None
    """On a card of several calls (a ``BatchCard``): the note that keeps how each of its
    calls reads now (``batch_key``), which every update of one of them redraws from."""
    about: str | None = None
    """The request the run's answer names first, once decided: its thread went on while
    this call waited (``FollowUps``). Read with the place, at no extra cost."""

    def holds(self, ref: MessageRef) -> bool:
        """Whether the message ``ref`` is this card (or one of its copies)."""
        return ref == self.ref or any(ref == copy.ref for copy in self.copies)


@dataclass(frozen=True, kw_only=True)
class IntakeEntry:
    """One delivery in the intake queue, as a worker took it."""

    id: str
    body: str
    attempts: int
    """How many times a worker has taken it, this time included."""


@dataclass(frozen=True, kw_only=True)
class ThreadNote:
    """What recording a message does for its thread, in the same atomic step."""

    thread_id: str
    only_if_followed: bool = False
    """Record the message only if the bot follows the thread (a reply without a mention)."""
    follow: bool = False
    """Follow the thread from now on (the bot was addressed there)."""
    reference: dict[str, Any] | None = None
    """Keep this as the thread's conversation reference (``set_conversation_ref``)."""


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


def grant_key(requester: str | None, tool_name: str, tier: str | None = None) -> str:
    """Whose calls of which tool (in which tier of the policy) a thread's grant covers."""
    key = f"{requester or ''}|{tool_name}"
    return f"{key}|{tier}" if tier else key


def never_key(tool_name: str) -> str:
    """A thread's standing decline of a tool (whoever asks), beside its grants."""
    return f"!never|{tool_name}"


def batch_key(first: PendingInfo) -> str:
    """Where a card of several calls keeps how each of them reads now (by its first)."""
    return f"batch:{first.run_id}:{ask_of(first)}"


def ask_of(call: PendingInfo) -> str:
    """The ask of a pending call (see ``ask_id``)."""
    return ask_id(call.tool_call_id, call.created_at)


def json_object(text: str) -> dict[str, Any]:
    """Stored JSON that must be an object (a conversation reference)."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"stored reference is not a JSON object: {text[:80]!r}")
    return value


CARD_LOCK_TTL = 30.0
"""Seconds a card's lock holds without its holder giving it back (a holder that died)."""


class ThreadState(Protocol):
    """Threads the bot takes part in, and how to message each unprompted."""

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


class CardState(Protocol):
    """Where each card is, its votes and its lock, and whose approvals list it is in."""

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

    async def index_waiting(self, scope: str, names: Sequence[str], run_id: str) -> None:
        """Note that run ``run_id``, in a thread of ``scope`` (a workspace), waits for the
        people ``names`` stand for (user ids, group names, ``*`` for anyone, ``asked:<id>``
        for its requester): an inbox reads only its runs, never every waiting one."""
        ...

    async def waiting_for(self, scope: str, names: Sequence[str]) -> set[str]:
        """The runs indexed in ``scope`` under any of ``names`` (some may be decided since:
        the reader checks, and drops those with ``unindex_waiting``)."""
        ...

    async def unindex_waiting(self, scope: str, names: Sequence[str], run_id: str) -> None:
        """Forget that ``run_id`` waits for ``names``."""
        ...

    def card_lock(
        self, run_id: str, ask: str, *, wait: float = 30.0
    ) -> AbstractAsyncContextManager[None]:
        """Hold one card's lock across every process (votes, declines, expiry).

        Raises ``LockTimeout`` when it cannot be had within ``wait``. A lock whose holder
        is gone lapses after ``CARD_LOCK_TTL``.
        """
        ...


class GrantState(Protocol):
    """Standing grants per thread (``bot.grants``)."""

    async def set_grant(self, thread_id: str, key: str, until: float, granted_by: str) -> None:
        """Keep a standing approval in a thread (``key``: whose calls of which tool) until
        ``until`` (epoch seconds), replacing one under the same key."""
        ...

    async def grant(self, thread_id: str, key: str, now: float) -> str | None:
        """Who granted the standing approval ``key`` in a thread, if it holds at ``now``."""
        ...

    async def revoke_grants(self, thread_id: str) -> int:
        """End every standing approval of a thread; how many there were."""
        ...

    async def revoke_grant(self, thread_id: str, key: str) -> bool:
        """End one standing approval of a thread; whether it was there."""
        ...

    async def grants_given(self, granted_by: str, scope: str, now: float) -> list[tuple[str, str]]:
        """The standing approvals ``granted_by`` gave that hold at ``now``, in threads whose
        id starts with ``scope`` (a workspace), as ``(thread_id, key)``."""
        ...


class NoteState(Protocol):
    """Short-lived notes and short recent lists by key, for adapters and inboxes."""

    async def set_note(self, key: str, value: str, *, ttl: float) -> None:
        """Keep ``value`` under ``key`` for ``ttl`` seconds (replacing what was there):
        what an adapter must find again on any replica, such as the run a posted
        answer belongs to, or who has opened the bot's home view."""
        ...

    async def note(self, key: str) -> str | None:
        """The value kept under ``key`` (``None``: none, or it lapsed)."""
        ...

    async def push_recent(self, key: str, item: str, *, keep: int) -> None:
        """Add ``item`` to the newest end of the list under ``key``, which keeps only its
        ``keep`` newest (a person's recent decisions)."""
        ...

    async def recent(self, key: str) -> list[str]:
        """The list under ``key``, newest first (empty when there is none)."""
        ...


class RecordState(Protocol):
    """Permanent records by key (an adapter's installations), and notes taken once.

    Records are JSON text the caller owns; nothing lapses until ``drop_records``.
    """

    async def put_record(self, key: str, value: str) -> None:
        """Keep ``value`` under ``key`` for good (replacing what was there)."""
        ...

    async def record(self, key: str) -> str | None:
        """The record under ``key`` (``None``: none)."""
        ...

    async def drop_records(self, keys: Sequence[str]) -> int:
        """Remove the records under ``keys``; how many there were."""
        ...

    async def records(self, prefix: str) -> list[tuple[str, str]]:
        """Every record whose key starts with ``prefix``, as ``(key, value)`` sorted by key.

        Keys are whole, as ``put_record`` was given them (``record`` and ``drop_records``
        take them back). It reads every such record: for tools such as ``check --live``
        (each installation), never for a request.
        """
        ...

    async def take_note(self, key: str) -> str | None:
        """The note under ``key`` (see ``NoteState.set_note``), removed in the same
        atomic step: of callers racing for one note, one gets it (a one-time state)."""
        ...


class TimerState(Protocol):
    """Timed jobs (reminders, escalations), each handed out once."""

    async def set_timer(self, key: str, due: float, data: str) -> None:
        """Keep a timed job (a reminder, an escalation) due at ``due`` (epoch seconds),
        replacing one under the same ``key``, until ``take_due`` hands it out."""
        ...

    async def take_due(self, now: float, *, limit: int = 100) -> list[tuple[str, str]]:
        """The jobs due by ``now`` (``(key, data)``, earliest first), each handed to
        exactly one caller across every process: a job taken is gone."""
        ...


class RetentionState(Protocol):
    """Forgetting what the chat layer kept about runs and threads the runtime removed."""

    async def forget(self, run_ids: Sequence[str], thread_ids: Sequence[str]) -> None:
        """Remove the records of runs and threads the runtime is about to prune (found
        by ``Agent.prunable``, forgotten before ``Agent.prune`` removes them):
        the runs' card places, votes and waiting-index entries, and the threads'
        follow marks, conversation references and standing approvals. Idempotent:
        processes may forget the same runs at once."""
        ...


class IntakeState(Protocol):
    """The durable intake queue: deliveries written before the ack, worked off once."""

    async def enqueue(
        self, body: str, *, keys: Sequence[str], ttl: float, note: ThreadNote | None = None
    ) -> str | None:
        """Write a delivery to the intake queue unless it is a copy, in one atomic step.

        The dedupe claim and the write are one: when no key was seen, every
        key is claimed for ``ttl`` s and ``body`` appended (a copy may share
        just one key with the delivery it copies, and never takes any of its);
        returns the new entry's id. A copy writes nothing and returns ``None``;
        so does a message whose ``note`` asks for a followed thread that is not.
        Otherwise the ``note``'s follow and reference are kept in the same step.

        A copy comes with its delivery's thread (or, like it, with none): the
        platforms' retries and twin events do. A store may keep dedupe keys per
        thread (on a Redis Cluster they live in the thread's hash slot).
        """
        ...

    async def take(
        self, worker: str, *, count: int, lease: float, take_over: bool = True
    ) -> list[IntakeEntry]:
        """Lease up to ``count`` entries to ``worker`` for ``lease`` s, oldest first.

        A thread's entries are always in the order written; a store may order
        across threads only roughly (a Redis Cluster's intake queue is a stream per group).

        An entry is free when no worker took it yet, or (with ``take_over``) when
        its worker's lease lapsed (it died): then it is taken over and its
        ``attempts`` grow. Every worker of a deployment uses the same lease.
        """
        ...

    async def renew(self, worker: str, ids: Sequence[str], *, lease: float) -> None:
        """Extend ``worker``'s lease on entries it still holds; others are left alone."""
        ...

    async def release(self, worker: str, ids: Sequence[str]) -> None:
        """End ``worker``'s lease on entries it still holds: any worker may take them
        at once (a replica shutting down hands back what it could not finish)."""
        ...

    async def done(self, entry_id: str) -> None:
        """Remove a worked-off entry from the intake queue."""
        ...


@runtime_checkable
class IntakeSignal(Protocol):
    """An intake queue that tells a waiting reader when other processes write to it
    (PostgreSQL's ``LISTEN``); without one, readers look now and then (``Intake.start``)."""

    async def wait_for_entries(self) -> None:
        """Return at word of an entry written or handed back by another process.

        Word may be lost (a connection lost) and lapsed leases send none: a reader
        bounds the wait (``asyncio.timeout``) and looks then anyway. Never raises.
        """
        ...


@runtime_checkable
class ChatState(
    ThreadState,
    CardState,
    GrantState,
    NoteState,
    RecordState,
    TimerState,
    IntakeState,
    RetentionState,
    Protocol,
):
    """What the chat layer keeps, shared by every process of one deployment: one port
    per concern, and each part of the bot is given only the ports it uses."""

    async def close(self) -> None:
        """Release connections."""
        ...


class AdapterState(ThreadState, NoteState, RecordState, Protocol):
    """What an adapter keeps and finds again on any replica: each thread's conversation
    reference, whether the bot follows it, notes, and records such as its installations
    (``ChatCore.chat``)."""


class InstallationState(RecordState, NoteState, Protocol):
    """What a platform's installations need: permanent records, and one-time notes
    (OAuth states)."""


class InboxState(CardState, GrantState, NoteState, Protocol):
    """What approvals lists read: whose lists a card is in, its votes, the grants a person
    gave, and their kept decisions."""


class ShownState(CardState, TimerState, RetentionState, NoteState, Protocol):
    """What showing cards needs: where each card is, its lock and index, its timers, and
    forgetting them once their runs are pruned."""
