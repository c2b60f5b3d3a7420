"""An in-process store for tests and experiments (``memory://``). Nothing survives."""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

from ..chain import (
    CHECKPOINT,
    AuditAnchor,
    AuditChain,
    Link,
    Seal,
    anchor,
    checkpoint,
    head_of,
    link,
)
from ..messages import Message
from ..snapshot import (
    AUDIT_ADAPTER,
    AuditEntry,
    RunIndex,
    RunSnapshot,
    load_snapshot,
    next_revision,
    run_index,
)
from .base import (
    AUDIT_PRUNE_BATCH,
    AUDIT_READ_BATCH,
    PRUNE_BATCH,
    LockTimeout,
    Pruned,
    Remember,
    StoreConflict,
    check_audit,
)


class MemoryStore:
    """The store protocol over dictionaries, for one process."""

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._saved: dict[str, str] = {}
        """Each run's JSON as last saved: callers get copies parsed from it, as from a file."""
        self._index: dict[str, RunIndex] = {}
        self._revisions: dict[str, int] = {}
        self._paused: dict[str, dict[str, datetime]] = {}
        """Per thread, its paused root runs and when each was created."""
        self._live: dict[str, dict[str, datetime]] = {}
        """Per thread, its root runs that wait or work, and when each was created."""
        self._history: dict[str, list[Message]] = {}
        self._audit: list[AuditEntry] = []
        self._lines: list[str] = []
        """The audit log as stored (``_audit`` parsed), one chain."""
        self._head = Link()
        self._anchor: AuditAnchor | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._alive: dict[str, datetime] = {}
        self._changed: dict[str, datetime] = {}
        """Each root run's last change (``updated_at``)."""
        self._children: dict[str, set[str]] = {}
        """Each root run's sub-agent runs."""

    async def load_run(self, run_id: str) -> RunSnapshot | None:
        data = self._saved.get(run_id)
        return load_snapshot(data) if data is not None else None

    async def save_run(
        self,
        snapshot: RunSnapshot,
        audit: Sequence[AuditEntry] = (),
        *,
        remember: Remember | None = None,
    ) -> RunSnapshot:
        return (await self.save_runs([snapshot], audit, remember=remember))[0]

    async def save_runs(
        self,
        snapshots: Sequence[RunSnapshot],
        audit: Sequence[AuditEntry] = (),
        *,
        remember: Remember | None = None,
    ) -> list[RunSnapshot]:
        check_audit(snapshots[0], audit)
        for snapshot in snapshots:
            actual = self._revisions.get(snapshot.run_id, 0)
            if actual != snapshot.revision:
                raise StoreConflict(snapshot.run_id, snapshot.revision, actual)
        saved = [self._put(snapshots[0], audit, remember)]
        return saved + [self._put(snapshot, (), None) for snapshot in snapshots[1:]]

    def _put(
        self, snapshot: RunSnapshot, audit: Sequence[AuditEntry], remember: Remember | None
    ) -> RunSnapshot:
        """Write one run whose revision was checked, with its audit and history."""
        run_id = snapshot.run_id
        saved, data = next_revision(snapshot)
        lines, head = link(audit, self._head)  # what can fail, before anything changes
        self._saved[run_id] = data
        self._revisions[run_id] = saved.revision
        old, index = self._index.get(run_id), run_index(saved)
        self._index[run_id] = index
        was_paused, was_live = bool(old and old.paused), bool(old and old.live)
        _reindex(self._paused, run_id, old if was_paused else None, index.paused, index)
        _reindex(self._live, run_id, old if was_live else None, index.live, index)
        self._appended(lines, head)
        if saved.is_root:
            self._changed[run_id] = saved.updated_at
        else:
            self._children.setdefault(saved.root_run_id, set()).add(run_id)
        if not saved.in_flight:
            self._alive.pop(run_id, None)
        if remember is not None and saved.thread_id is not None:
            self._remember(saved.thread_id, remember.messages, remember.window)
        return load_snapshot(data)

    async def start_run(self, snapshot: RunSnapshot) -> tuple[RunSnapshot, list[Message]]:
        saved = await self.save_run(snapshot)
        thread = snapshot.thread_id
        return saved, await self.load_history(thread) if thread is not None else []

    @asynccontextmanager
    async def lock(
        self, name: str, *, ttl: float = 30.0, wait: float | None = None
    ) -> AsyncIterator[None]:
        # One process: a holder cannot crash and keep it, so there is no lease.
        lock = self._locks.setdefault(name, asyncio.Lock())
        try:
            # A timeout scope, not wait_for: on Python 3.11 wait_for returns the lock
            # to a task cancelled as it got it, swallowing the cancel.
            async with asyncio.timeout(ttl if wait is None else wait):
                await lock.acquire()
        except TimeoutError as exc:
            raise LockTimeout(name) from exc
        try:
            yield
        finally:
            lock.release()

    async def beat(self, run_id: str, until: datetime) -> None:
        if run_id in self._saved:
            self._alive[run_id] = until

    async def alive_until(self, run_id: str) -> datetime | None:
        return self._alive.get(run_id)

    def _indexed(self) -> list[tuple[str, RunIndex]]:
        return sorted(self._index.items(), key=lambda item: item[1].created_at)

    async def paused_runs(self, thread_id: str) -> list[str]:
        runs = self._paused.get(thread_id, {})
        return sorted(runs, key=lambda run_id: (runs[run_id], run_id))

    async def thread_runs(self, thread_id: str) -> list[str]:
        runs = self._live.get(thread_id, {})
        return sorted(runs, key=lambda run_id: (runs[run_id], run_id))

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
        self._remember(thread_id, messages, window)

    def _remember(self, thread_id: str, messages: Sequence[Message], window: int) -> None:
        kept = [*self._history.get(thread_id, []), *messages]
        self._history[thread_id] = kept[-window:] if window > 0 else []

    async def append_audit(self, entry: AuditEntry) -> None:
        self._append_audit([entry])

    def _append_audit(self, entries: Sequence[AuditEntry]) -> None:
        self._appended(*link(entries, self._head))

    def _appended(self, lines: list[str], head: Link) -> None:
        self._lines += lines
        self._head = head
        self._audit += [AUDIT_ADAPTER.validate_json(line) for line in lines]

    async def audit_chains(self) -> list[AuditChain]:
        return [AuditChain(0, list(self._lines), self._anchor)]

    async def read_audit(
        self, chain: int, after: int, *, limit: int = AUDIT_READ_BATCH
    ) -> list[str]:
        start = bisect.bisect_right(self._audit, after, key=lambda e: e.seq or 0)
        return self._lines[start : start + limit] if chain == 0 else []

    async def seal_audit(self, seal: Seal) -> int:
        if not self._audit or self._audit[-1].event == CHECKPOINT:
            return 0
        self._append_audit([checkpoint(self._head, 0, seal)])
        return 1

    async def list_audit(
        self, *, run_id: str | None = None, thread_id: str | None = None
    ) -> list[AuditEntry]:
        return [
            e
            for e in self._audit
            if (run_id is None or e.run_id == run_id)
            and (thread_id is None or e.thread_id == thread_id)
        ]

    async def prunable(self, before: datetime, *, limit: int = PRUNE_BATCH) -> Pruned:
        roots = [run_id for _, run_id in sorted(self._due(before))[:limit]]
        runs = [
            run_id for root in roots for run_id in (*sorted(self._children.get(root, ())), root)
        ]
        threads = {self._index[root].thread_id for root in roots}
        # A thread with a root run outside the batch keeps its history.
        batch = set(roots)
        busy = {self._index[run_id].thread_id for run_id in self._changed if run_id not in batch}
        alone = sorted(t for t in threads - busy if t is not None)
        return Pruned(
            before=before, root_ids=tuple(roots), run_ids=tuple(runs), thread_ids=tuple(alone)
        )

    async def prune(self, due: Pruned) -> Pruned:
        still = {run_id for _, run_id in self._due(due.before)}
        removed: list[str] = []
        roots = [root for root in due.root_ids if root in still]
        for root in roots:
            del self._changed[root]
            for run_id in (*sorted(self._children.pop(root, set())), root):
                self._saved.pop(run_id, None)
                self._revisions.pop(run_id, None)
                self._index.pop(run_id, None)
                self._alive.pop(run_id, None)
                removed.append(run_id)
        kept = {ix.thread_id for run_id, ix in self._index.items() if run_id in self._changed}
        gone = [t for t in due.thread_ids if t not in kept]
        for thread_id in gone:
            self._history.pop(thread_id, None)
        return Pruned(
            before=due.before, root_ids=tuple(roots), run_ids=tuple(removed), thread_ids=tuple(gone)
        )

    def _due(self, before: datetime) -> list[tuple[datetime, str]]:
        """Finished root runs last changed before ``before``: (last change, id)."""
        return [
            (changed, run_id)
            for run_id, changed in self._changed.items()
            if changed < before and not self._index[run_id].live
        ]

    async def prune_audit(
        self, before: datetime, *, limit: int = AUDIT_PRUNE_BATCH, seal: Seal | None = None
    ) -> int:
        due = 0
        for entry in self._audit[:limit]:
            if entry.at >= before:
                break
            due += 1
        if due:
            self._anchor = anchor(head_of(self._lines[due - 1]), self._anchor, due, 0, seal)
        del self._audit[:due]
        del self._lines[:due]
        return due

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        return None


def _reindex(
    threads: dict[str, dict[str, datetime]],
    run_id: str,
    listed: RunIndex | None,
    belongs: bool,
    index: RunIndex,
) -> None:
    """Move a run in a per-thread index: out of the thread it was ``listed`` under (if
    it was), then under its thread in ``index`` if it ``belongs`` there."""
    if listed is not None and listed.thread_id in threads:
        runs = threads[listed.thread_id]
        runs.pop(run_id, None)
        if not runs:
            del threads[listed.thread_id]
    if belongs and index.thread_id is not None:
        threads.setdefault(index.thread_id, {})[run_id] = index.created_at
