"""The store protocol: one contract for the memory, SQLite and Redis stores.

Everything a paused run needs to survive restarts and replicas lives here, and
nothing else: runs, the run lock, run heartbeats, thread history and the audit log. The run loop
keeps the logic; stores keep data and offer two atomic primitives: ``save_run``
(compare-and-set on the snapshot's revision) and ``lock`` (a named
mutual-exclusion lease shared by every process on the store). Callers keep
their own state elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from ..messages import Message
from ..snapshot import AuditEntry, RunSnapshot


class StoreConflict(Exception):
    """A snapshot was saved by someone else since it was loaded."""

    def __init__(self, run_id: str, expected: int, actual: int | None) -> None:
        super().__init__(f"run {run_id}: expected revision {expected}, store has {actual}")
        self.run_id = run_id


class LockTimeout(Exception):
    """A named lock could not be acquired in time."""


PRUNE_BATCH = 100
"""Root runs one ``Store.prune`` call removes at most: short writes, repeated until done."""


@dataclass(frozen=True, kw_only=True)
class Pruned:
    """What one ``Store.prune`` removed (the chat layer forgets its own records of them).

    Attributes:
        run_ids: Every run removed: the finished root runs and their sub-agent runs.
        thread_ids: The threads left with no run at all, whose history went with them.
        more: The store has work left before it can prune all that is due (an index
            still being built): call again even though nothing was removed.
    """

    run_ids: tuple[str, ...] = ()
    thread_ids: tuple[str, ...] = ()
    more: bool = False


@runtime_checkable
class Store(Protocol):
    """Durable state shared by every process of one bot deployment."""

    url: str

    async def load_run(self, run_id: str) -> RunSnapshot | None:
        """The snapshot of a run, or ``None``."""
        ...

    async def save_run(
        self, snapshot: RunSnapshot, audit: Sequence[AuditEntry] = ()
    ) -> RunSnapshot:
        """Store a snapshot if the stored revision still equals ``snapshot.revision``.

        Returns the saved copy with ``revision + 1``; raises ``StoreConflict``
        otherwise, changing nothing. ``audit`` (entries of this run) is appended
        to the log in the same atomic write: what a save decided is on record
        exactly when it took effect. Keeps its indexes current from the
        snapshot (``run_index``), in the same write: root runs that wait for a
        person per thread (``paused_runs``), that wait or work per thread
        (``thread_runs``), by earliest expiry (``runs_expiring``), and with work
        in flight (``runs_in_flight``).
        """
        ...

    def lock(
        self, name: str, *, ttl: float = 30.0, wait: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        """Hold a named lock across every process of the store.

        ``ttl`` is the lease: how long a crashed holder keeps it. ``wait`` is how
        long to try before ``LockTimeout`` (``ttl`` when not given).
        """
        ...

    async def beat(self, run_id: str, until: datetime) -> None:
        """Record that a live process drives ``run_id`` (a root run) until ``until``.

        The driver renews it while it works; crash recovery leaves a run alone
        while its heartbeat lasts (``alive_until``). Not part of the snapshot:
        a beat changes no revision and conflicts with no save.
        """
        ...

    async def alive_until(self, run_id: str) -> datetime | None:
        """Until when the newest heartbeat of ``run_id`` keeps it alive (``None``: none)."""
        ...

    async def paused_runs(self, thread_id: str) -> list[str]:
        """Ids of root runs on this thread that wait for a person, oldest first."""
        ...

    async def thread_runs(self, thread_id: str) -> list[str]:
        """Ids of root runs on this thread that wait for a person or have work in flight
        (paused or running), oldest first."""
        ...

    async def runs_expiring(self, before: datetime) -> list[str]:
        """Ids of root runs with a pending call that expires before ``before``."""
        ...

    async def runs_in_flight(self) -> list[str]:
        """Ids of root runs with work in flight (``RunSnapshot.in_flight``), oldest first.

        What a restarted process must check: a crash leaves them in this state.
        """
        ...

    async def load_history(self, thread_id: str) -> list[Message]:
        """The thread's remembered conversation, oldest first."""
        ...

    async def append_history(
        self, thread_id: str, messages: Sequence[Message], *, window: int
    ) -> None:
        """Append messages, keeping at most ``window`` (older ones are dropped)."""
        ...

    async def append_audit(self, entry: AuditEntry) -> None:
        """Append to the audit log."""
        ...

    async def list_audit(
        self, *, run_id: str | None = None, thread_id: str | None = None
    ) -> list[AuditEntry]:
        """Audit entries of a run or a thread, oldest first."""
        ...

    async def prune(self, before: datetime, *, limit: int = PRUNE_BATCH) -> Pruned:
        """Remove up to ``limit`` finished root runs last changed before ``before``, oldest
        first, with their sub-agent runs; then the history of each of their threads
        left with no run at all (a thread's conversation is kept while it is active).

        A run that waits for a person or works (``RunIndex.live``) is never removed,
        however old. Deletes are idempotent: processes may prune at once. The audit
        log is kept. Returns what was removed (empty: nothing is due).
        """
        ...

    async def ping(self) -> bool:
        """Whether the store answers."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


def check_audit(snapshot: RunSnapshot, audit: Sequence[AuditEntry]) -> None:
    """Refuse audit entries that are not the saved run's (``save_run`` writes them with it)."""
    strays = [
        (e.run_id, e.thread_id)
        for e in audit
        if (e.run_id, e.thread_id) != (snapshot.run_id, snapshot.thread_id)
    ]
    if strays:
        raise ValueError(f"audit entries of {strays} cannot be saved with run {snapshot.run_id}")
