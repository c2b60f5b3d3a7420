"""An in-process store for tests and experiments (``memory://``). Nothing survives."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

from ..messages import Message
from ..snapshot import AuditEntry, RunIndex, RunSnapshot, run_index, utcnow
from .base import LockTimeout, StoreConflict


class MemoryStore:
    """The store protocol over dictionaries, for one process."""

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._runs: dict[str, RunSnapshot] = {}
        self._history: dict[str, list[Message]] = {}
        self._audit: list[AuditEntry] = []
        self._locks: dict[str, asyncio.Lock] = {}
        self._alive: dict[str, datetime] = {}

    async def load_run(self, run_id: str) -> RunSnapshot | None:
        snapshot = self._runs.get(run_id)
        return snapshot.model_copy(deep=True) if snapshot else None

    async def save_run(self, snapshot: RunSnapshot) -> RunSnapshot:
        current = self._runs.get(snapshot.run_id)
        actual = current.revision if current else 0
        if actual != snapshot.revision:
            raise StoreConflict(snapshot.run_id, snapshot.revision, actual)
        saved = snapshot.model_copy(
            deep=True, update={"revision": snapshot.revision + 1, "updated_at": utcnow()}
        )
        self._runs[saved.run_id] = saved
        if not saved.in_flight:
            self._alive.pop(saved.run_id, None)
        return saved.model_copy(deep=True)

    @asynccontextmanager
    async def lock(
        self, name: str, *, ttl: float = 30.0, wait: float | None = None
    ) -> AsyncIterator[None]:
        # One process: a holder cannot crash and keep it, so there is no lease.
        lock = self._locks.setdefault(name, asyncio.Lock())
        try:
            await asyncio.wait_for(lock.acquire(), timeout=ttl if wait is None else wait)
        except TimeoutError as exc:
            raise LockTimeout(name) from exc
        try:
            yield
        finally:
            lock.release()

    async def beat(self, run_id: str, until: datetime) -> None:
        if run_id in self._runs:
            self._alive[run_id] = until

    async def alive_until(self, run_id: str) -> datetime | None:
        return self._alive.get(run_id)

    def _indexed(self) -> list[tuple[str, RunIndex]]:
        indexed = [(run_id, run_index(run)) for run_id, run in self._runs.items()]
        return sorted(indexed, key=lambda item: item[1].created_at)

    async def paused_runs(self, thread_id: str) -> list[str]:
        return [i for i, ix in self._indexed() if ix.paused and ix.thread_id == thread_id]

    async def runs_expiring(self, before: datetime) -> list[str]:
        due = [
            (ix.expires_at, i)
            for i, ix in self._indexed()
            if ix.expires_at and ix.expires_at < before
        ]
        return [i for _, i in sorted(due, key=lambda item: item[0])]

    async def runs_in_flight(self) -> list[str]:
        return [i for i, ix in self._indexed() if ix.in_flight]

    async def load_history(self, thread_id: str) -> list[Message]:
        return list(self._history.get(thread_id, []))

    async def append_history(
        self, thread_id: str, messages: Sequence[Message], *, window: int
    ) -> None:
        kept = [*self._history.get(thread_id, []), *messages]
        self._history[thread_id] = kept[-window:] if window > 0 else []

    async def append_audit(self, entry: AuditEntry) -> None:
        self._audit.append(entry)

    async def list_audit(
        self, *, run_id: str | None = None, thread_id: str | None = None
    ) -> list[AuditEntry]:
        return [
            e
            for e in self._audit
            if (run_id is None or e.run_id == run_id)
            and (thread_id is None or e.thread_id == thread_id)
        ]

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        return None
