"""Chat state in this process only: tests and single-process runs on ``memory://``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from agents.stores import hold_lease

from ..types import Person
from .base import CARD_LOCK_TTL, CardPlace, IntakeEntry, ThreadNote

_NOTES_PRUNED_AT = 10_000


@dataclass(kw_only=True)
class _Slot:
    body: str
    worker: str | None = None
    lease_until: float = 0.0
    attempts: int = 0


class MemoryChatState:
    """Everything in dictionaries (one process)."""

    def __init__(self) -> None:
        self._card_locks: dict[str, tuple[str, float]] = {}
        self._followed: set[str] = set()
        self._refs: dict[str, dict[str, Any]] = {}
        self._cards: dict[tuple[str, str], CardPlace] = {}
        self._votes: dict[tuple[str, str], list[Person]] = {}
        self._seen: dict[str, float] = {}
        self._inbox: dict[str, _Slot] = {}
        self._timers: dict[str, tuple[float, str]] = {}
        self._grants: dict[str, dict[str, tuple[float, str]]] = {}
        self._waiting: dict[tuple[str, str], set[str]] = {}
        self._notes: dict[str, tuple[float, str]] = {}
        self._recent: dict[str, list[str]] = {}
        self._records: dict[str, str] = {}

    def card_lock(
        self, run_id: str, ask: str, *, wait: float = 30.0
    ) -> AbstractAsyncContextManager[None]:
        name = f"{run_id}:{ask}"

        async def take(token: str) -> bool:
            held = self._card_locks.get(name)
            if held is not None and held[1] > time.monotonic():
                return False
            self._card_locks[name] = (token, time.monotonic() + CARD_LOCK_TTL)
            return True

        async def give_back(token: str) -> None:
            if self._card_locks.get(name, ("",))[0] == token:
                del self._card_locks[name]

        return hold_lease(f"card {name}", wait, take=take, give_back=give_back)

    async def follow(self, thread_id: str) -> None:
        self._followed.add(thread_id)

    async def follows(self, thread_id: str) -> bool:
        return thread_id in self._followed

    async def set_conversation_ref(self, thread_id: str, ref: dict[str, Any]) -> None:
        self._refs[thread_id] = dict(ref)

    async def conversation_ref(self, thread_id: str) -> dict[str, Any] | None:
        ref = self._refs.get(thread_id)
        return dict(ref) if ref is not None else None

    async def set_card(self, run_id: str, ask: str, place: CardPlace) -> None:
        self._cards[run_id, ask] = place

    async def card_of(self, run_id: str, ask: str) -> CardPlace | None:
        return self._cards.get((run_id, ask))

    async def set_note(self, key: str, value: str, *, ttl: float) -> None:
        now = time.time()
        if len(self._notes) > _NOTES_PRUNED_AT:  # lapsed notes go now and then, not one by one
            self._notes = {k: v for k, v in self._notes.items() if v[0] > now}
        self._notes[key] = (now + ttl, value)

    async def note(self, key: str) -> str | None:
        until, value = self._notes.get(key, (0.0, ""))
        return value if until > time.time() else None

    async def take_note(self, key: str) -> str | None:
        until, value = self._notes.pop(key, (0.0, ""))
        return value if until > time.time() else None

    async def put_record(self, key: str, value: str) -> None:
        self._records[key] = value

    async def record(self, key: str) -> str | None:
        return self._records.get(key)

    async def drop_records(self, keys: Sequence[str]) -> int:
        return sum(self._records.pop(key, None) is not None for key in set(keys))

    async def records(self, prefix: str) -> list[tuple[str, str]]:
        return sorted(
            (key, value) for key, value in self._records.items() if key.startswith(prefix)
        )

    async def push_recent(self, key: str, item: str, *, keep: int) -> None:
        self._recent[key] = [item, *self._recent.get(key, ())][:keep]

    async def recent(self, key: str) -> list[str]:
        return list(self._recent.get(key, ()))

    async def set_grant(self, thread_id: str, key: str, until: float, granted_by: str) -> None:
        self._grants.setdefault(thread_id, {})[key] = (until, granted_by)

    async def grant(self, thread_id: str, key: str, now: float) -> str | None:
        until, by = self._grants.get(thread_id, {}).get(key, (0.0, ""))
        return by if until > now else None

    async def revoke_grants(self, thread_id: str) -> int:
        return len(self._grants.pop(thread_id, {}))

    async def index_waiting(self, scope: str, names: Sequence[str], run_id: str) -> None:
        for name in names:
            self._waiting.setdefault((scope, name), set()).add(run_id)

    async def waiting_for(self, scope: str, names: Sequence[str]) -> set[str]:
        return {run for name in names for run in self._waiting.get((scope, name), ())}

    async def unindex_waiting(self, scope: str, names: Sequence[str], run_id: str) -> None:
        for name in names:
            self._waiting.get((scope, name), set()).discard(run_id)

    async def revoke_grant(self, thread_id: str, key: str) -> bool:
        return self._grants.get(thread_id, {}).pop(key, None) is not None

    async def grants_given(self, granted_by: str, scope: str, now: float) -> list[tuple[str, str]]:
        return [
            (thread_id, key)
            for thread_id, grants in self._grants.items()
            if thread_id.startswith(scope)
            for key, (until, by) in grants.items()
            if by == granted_by and until > now
        ]

    async def set_timer(self, key: str, due: float, data: str) -> None:
        self._timers[key] = (due, data)

    async def take_due(self, now: float, *, limit: int = 100) -> list[tuple[str, str]]:
        due = sorted((t, key) for key, (t, _) in self._timers.items() if t <= now)[:limit]
        return [(key, self._timers.pop(key)[1]) for _, key in due]

    async def add_vote(self, run_id: str, ask: str, voter: Person) -> list[Person]:
        votes = self._votes.setdefault((run_id, ask), [])
        if all(v.id != voter.id for v in votes):
            votes.append(voter)
        return list(votes)

    async def votes(self, run_id: str, ask: str) -> list[Person]:
        return list(self._votes.get((run_id, ask), []))

    async def enqueue(
        self, body: str, *, keys: Sequence[str], ttl: float, note: ThreadNote | None = None
    ) -> str | None:
        if note is not None and note.only_if_followed and note.thread_id not in self._followed:
            return None
        now = time.monotonic()
        if len(self._seen) > _NOTES_PRUNED_AT:  # lapsed claims go now and then, as notes do
            self._seen = {k: until for k, until in self._seen.items() if until > now}
        if any(self._seen.get(key, 0.0) > now for key in keys):
            return None
        self._seen.update(dict.fromkeys(keys, now + ttl))
        if note is not None:
            if note.follow:
                self._followed.add(note.thread_id)
            if note.reference is not None:
                self._refs[note.thread_id] = dict(note.reference)
        # Unique beyond this state: a message's run is named after its entry.
        entry_id = uuid.uuid4().hex
        self._inbox[entry_id] = _Slot(body=body)
        return entry_id

    async def take(
        self, worker: str, *, count: int, lease: float, take_over: bool = True
    ) -> list[IntakeEntry]:
        now = time.monotonic()
        free = [
            (i, s)
            for i, s in self._inbox.items()
            if (s.worker is None or take_over) and s.lease_until <= now
        ][:count]
        for _, slot in free:
            slot.worker, slot.lease_until, slot.attempts = worker, now + lease, slot.attempts + 1
        return [IntakeEntry(id=i, body=s.body, attempts=s.attempts) for i, s in free]

    async def renew(self, worker: str, ids: Sequence[str], *, lease: float) -> None:
        until = time.monotonic() + lease
        for entry_id in ids:
            slot = self._inbox.get(entry_id)
            if slot is not None and slot.worker == worker:
                slot.lease_until = until

    async def release(self, worker: str, ids: Sequence[str]) -> None:
        await self.renew(worker, ids, lease=-1.0)

    async def done(self, entry_id: str) -> None:
        self._inbox.pop(entry_id, None)

    async def forget(self, run_ids: Sequence[str], thread_ids: Sequence[str]) -> None:
        runs, threads = set(run_ids), set(thread_ids)
        for pair in [pair for pair in self._cards if pair[0] in runs]:
            del self._cards[pair]
        for pair in [pair for pair in self._votes if pair[0] in runs]:
            del self._votes[pair]
        for waiting in self._waiting.values():
            waiting -= runs
        self._waiting = {key: waiting for key, waiting in self._waiting.items() if waiting}
        self._followed -= threads
        for thread_id in threads:
            self._refs.pop(thread_id, None)
            self._grants.pop(thread_id, None)

    async def close(self) -> None:
        return None
