"""The store protocol: one contract for the memory, SQLite and Redis stores.

Everything a paused run needs to survive restarts and replicas lives here, and
nothing else: runs, the run lock, run heartbeats, thread history and the audit log. The run loop
keeps the logic; stores keep data and offer two atomic primitives: ``save_run``
(compare-and-set on the snapshot's revision) and ``lock`` (a named
mutual-exclusion lease shared by every process on the store). Callers keep
their own state elsewhere.
"""

from __future__ import annotations

import itertools
import uuid
import zlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from ..chain import AuditChain, Seal
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
"""Root runs one prune batch holds at most: short writes, repeated until done."""
AUDIT_PRUNE_BATCH = 500
"""Audit entries one ``Store.prune_audit`` call removes at most."""
AUDIT_READ_BATCH = 500
"""Lines one ``Store.read_audit`` call returns at most."""
BEGINNING = datetime.min.replace(tzinfo=UTC)
"""A cut-off nothing is older than: the batch of ``Pruned()`` removes nothing."""


@dataclass(frozen=True, kw_only=True)
class Pruned:
    """One prune batch: what is due (``Store.prunable``), then what was removed
    (``Store.prune``). The chat layer forgets its own records of a due batch before
    the batch is removed, so a crash in between leaves nothing that is not found again.

    Attributes:
        before: The cut-off: finished root runs last changed before it are due.
        root_ids: The finished root runs of the batch, oldest first.
        run_ids: Every run of the batch: the root runs and their sub-agent runs.
        thread_ids: The threads with no run but the batch's, whose history goes with them.
        more: The store has work left before it can prune all that is due (an index
            still being built): call again even though nothing is due.
    """

    before: datetime = BEGINNING
    root_ids: tuple[str, ...] = ()
    run_ids: tuple[str, ...] = ()
    thread_ids: tuple[str, ...] = ()
    more: bool = False


@dataclass(frozen=True, kw_only=True)
class Remember:
    """What a save adds to its run's thread history: a top run's own messages, as it
    ends; the history keeps the newest ``window`` (none when 0)."""

    messages: Sequence[Message]
    window: int


class SavesInOne(ABC):
    """A store whose every write of runs is one call (``_save``): a save, a save of a
    tree, and a run's start with the read of its thread's history."""

    async def save_run(
        self,
        snapshot: RunSnapshot,
        audit: Sequence[AuditEntry] = (),
        *,
        remember: Remember | None = None,
    ) -> RunSnapshot:
        """Compare-and-set on ``revision`` with its audit entries and the history it
        remembers, at once (``_save``); see ``Store.save_run``."""
        saved, _ = await self._save([snapshot], audit, remember=remember)
        return saved[0]

    async def save_runs(
        self,
        snapshots: Sequence[RunSnapshot],
        audit: Sequence[AuditEntry] = (),
        *,
        remember: Remember | None = None,
    ) -> list[RunSnapshot]:
        """``save_run`` of each, all or none (``_save``); see ``Store.save_runs``."""
        saved, _ = await self._save(snapshots, audit, remember=remember)
        return saved

    async def start_run(self, snapshot: RunSnapshot) -> tuple[RunSnapshot, list[Message]]:
        """The first save and the read of its thread's history at once (``_save``)."""
        saved, history = await self._save([snapshot], (), read_history=True)
        return saved[0], history

    @abstractmethod
    async def _save(
        self,
        snapshots: Sequence[RunSnapshot],
        audit: Sequence[AuditEntry],
        *,
        remember: Remember | None = None,
        read_history: bool = False,
    ) -> tuple[list[RunSnapshot], list[Message]]:
        """Save ``snapshots`` (the first with ``audit`` and ``remember``), each by
        compare-and-set on its revision, all or none; with ``read_history`` the first
        one's thread history after it, from the same moment.

        Raises:
            StoreConflict: A run's revision is not the one it was loaded at.
        """


@runtime_checkable
class Store(Protocol):
    """Durable state shared by every process of one bot deployment."""

    url: str

    async def load_run(self, run_id: str) -> RunSnapshot | None:
        """The snapshot of a run, or ``None``."""
        ...

    async def save_run(
        self,
        snapshot: RunSnapshot,
        audit: Sequence[AuditEntry] = (),
        *,
        remember: Remember | None = None,
    ) -> RunSnapshot:
        """Store a snapshot if the stored revision still equals ``snapshot.revision``.

        Returns the saved copy with ``revision + 1``; raises ``StoreConflict``
        otherwise, changing nothing. ``audit`` (entries of this run) is appended
        to the log in the same atomic write: what a save decided is on record
        exactly when it took effect. ``remember`` (a top run that ends) is added to
        its thread's history in that write too (on a Redis Cluster, right after it
        when the run's id was not drawn in its thread's group: ``tree_run_id``).
        Keeps its indexes current from the snapshot (``run_index``), in the same
        write: root runs that wait for a
        person per thread (``paused_runs``), that wait or work per thread
        (``thread_runs``), by earliest expiry (``runs_expiring``), and with work
        in flight (``runs_in_flight``).
        """
        ...

    async def save_runs(
        self,
        snapshots: Sequence[RunSnapshot],
        audit: Sequence[AuditEntry] = (),
        *,
        remember: Remember | None = None,
    ) -> list[RunSnapshot]:
        """``save_run`` of several runs of one tree at once: all or none. Each must still
        have the revision it was read at, or ``StoreConflict`` (of the first that did
        not) and nothing is written. ``audit`` and ``remember`` are the first run's.

        Atomic for the runs of a tree whose ids were drawn by ``tree_run_id`` (every
        tree this version starts). A Redis Cluster writes an older tree spanning
        shard groups group by group, the first run last (see ``CONCURRENCY.md``).
        """
        ...

    async def start_run(self, snapshot: RunSnapshot) -> tuple[RunSnapshot, list[Message]]:
        """Save a new top run (``save_run`` of revision 0: ``StoreConflict`` when its id
        is taken) and read its thread's history (``load_history``), in one round trip
        (two on a Redis Cluster for an id not drawn in its thread's group); the saved
        copy and the history."""
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
        """Append to the audit log: to the end of its chain (``agents.chain``), atomically
        (as ``save_run`` appends its ``audit``)."""
        ...

    async def audit_chains(self) -> list[AuditChain]:
        """Every chain of the audit log as stored (one; a Redis Cluster's: one per group),
        each with the anchor its last prune left, for ``agents.chain.walk``."""
        ...

    async def read_audit(
        self, chain: int, after: int, *, limit: int = AUDIT_READ_BATCH
    ) -> list[str]:
        """Up to ``limit`` lines of chain ``chain`` (``audit_chains``' numbering) as
        stored, oldest first, from the first whose ``seq`` is above ``after``: what a
        reader that got as far as ``after`` reads next (an export's)."""
        ...

    async def seal_audit(self, seal: Seal) -> int:
        """Append a ``checkpoint`` entry signing its head to each chain whose last entry
        is not one already, each atomically; how many were appended."""
        ...

    async def list_audit(
        self, *, run_id: str | None = None, thread_id: str | None = None
    ) -> list[AuditEntry]:
        """Audit entries of a run or a thread, oldest first."""
        ...

    async def prunable(self, before: datetime, *, limit: int = PRUNE_BATCH) -> Pruned:
        """The next prune batch, changing nothing: up to ``limit`` finished root runs last
        changed before ``before``, oldest first, with their sub-agent runs, and the
        threads the batch would leave with no run at all (their history goes with it:
        a thread's conversation is kept while it has a run).

        A run that waits for a person or works (``RunIndex.live``) is never due, however
        old. Empty (and not ``more``): nothing is due.
        """
        ...

    async def prune(self, due: Pruned) -> Pruned:
        """Remove a batch ``prunable`` found, checking again what it checked, atomically
        per root run and per thread: a root run still finished and last changed before
        ``due.before`` goes with its sub-agent runs; a thread of ``due.thread_ids`` loses
        its history only if it has no run but the batch's (a run started since keeps it).
        No other root run or thread is touched; a store may leave the roots of a thread
        whose history stays to a later batch (they are found again).

        Deletes are idempotent: processes may prune at once, and a batch removed halfway
        (a crash) is found again by ``prunable``. The audit log is kept (see
        ``prune_audit``). Returns what was removed.
        """
        ...

    async def prune_audit(
        self, before: datetime, *, limit: int = AUDIT_PRUNE_BATCH, seal: Seal | None = None
    ) -> int:
        """Remove up to ``limit`` audit entries from the start of the log, oldest first,
        while they are older than ``before`` (``AuditEntry.at``); from the run's and the
        thread's entries too. The log stays a log: only ever shortened from its start.
        Each chain shortened keeps, in the same write, the anchor of the last entry
        removed (``agents.chain.anchor``), signed by ``seal`` when given, so what
        remains still verifies.

        Returns how many were removed (0: none is due).
        """
        ...

    async def ping(self) -> bool:
        """Whether the store answers."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


def tree_run_id(root_run_id: str | None = None, *, thread_id: str | None = None) -> str:
    """A fresh, globally unique run id, in the group (``tree_group``) of what it belongs
    to: a sub-agent run's root run, or a top run's thread. A store that shards runs by
    group (a Redis Cluster) then keeps a whole tree, and a thread's history, where one
    atomic write reaches them (``save_runs``, the history ``remember`` adds)."""
    near = root_run_id or thread_id
    while True:
        run_id = f"run_{uuid.uuid4().hex}"
        if near is None or tree_group(run_id) == tree_group(near):
            return run_id


def run_id_for(name: str, thread_id: str | None) -> str:
    """The id of a top run a caller names (a chat message's run, after its intake entry):
    ``name``, or ``name.<n>`` for the first ``n`` that puts it in its thread's group, as
    ``tree_run_id`` draws one. The same name and thread always give the same id."""
    if thread_id is None or tree_group(name) == tree_group(thread_id):
        return name
    return next(
        f"{name}.{n}"
        for n in itertools.count(1)
        if tree_group(f"{name}.{n}") == tree_group(thread_id)
    )


TREE_GROUPS = 16
"""Groups run ids fall into by ``tree_group``: a Redis Cluster's shard groups. Fixed for
a deployment's lifetime: a run is found by its id's group."""


def tree_group(run_id: str) -> int:
    """The group of a run id (or any name): its CRC-32 modulo ``TREE_GROUPS``."""
    return zlib.crc32(run_id.encode()) % TREE_GROUPS


def check_audit(snapshot: RunSnapshot, audit: Sequence[AuditEntry]) -> None:
    """Refuse audit entries that are not the saved run's (``save_run`` writes them with it)."""
    strays = [
        (e.run_id, e.thread_id)
        for e in audit
        if (e.run_id, e.thread_id) != (snapshot.run_id, snapshot.thread_id)
    ]
    if strays:
        raise ValueError(f"audit entries of {strays} cannot be saved with run {snapshot.run_id}")
