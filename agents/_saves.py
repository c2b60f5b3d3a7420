"""How ``Turns`` keeps runs: each save a compare-and-set on the revisions it read (a
tree's runs together, ``Store.save_runs``), the sub-agent runs whose latest state
waits for their tree's next save, the start of a top run with its thread's history,
and what a top run that ends adds to that history."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from ._calls import Calls
from .errors import RunNotFoundError
from .messages import Message, TextPart
from .snapshot import AuditEntry, RunSnapshot
from .stores.base import Remember

_SAVED_KEPT = 128
"""Top runs whose last saved snapshot is kept for the end of their session."""


class Saves(Calls):
    """Loading and saving the runs of one agent tree, for ``Turns``."""

    saved: OrderedDict[str, RunSnapshot]
    unsaved: dict[str, dict[str, RunSnapshot]]

    async def load(self, run_id: str) -> RunSnapshot:
        """A run's snapshot, or ``RunNotFoundError``."""
        snap = await self.store.load_run(run_id)
        if snap is None:
            raise RunNotFoundError(run_id)
        return snap

    async def save(
        self, snap: RunSnapshot, audit: Sequence[AuditEntry] = (), *, release: bool = False
    ) -> None:
        """Save ``snap`` (compare-and-set) with the audit entries it puts on record;
        ``release`` hands it back for another process to take on (``released``). The
        sub-agent runs of its tree waiting to be saved (``defer``) go in the same write."""
        await self.save_together([snap], audit, release=release)

    async def save_together(
        self,
        snaps: Sequence[RunSnapshot],
        audit: Sequence[AuditEntry] = (),
        *,
        release: bool = False,
    ) -> None:
        """Save runs of one tree at once, all or none (``Store.save_runs``), with the
        sub-agent runs of the tree waiting to be saved; the first with the audit
        entries it puts on record (the top, when it is among them)."""
        waiting = self.unsaved.get(snaps[0].root_run_id, {})
        listed = {snap.run_id for snap in snaps}
        writes = [*snaps, *(run for run_id, run in waiting.items() if run_id not in listed)]
        for snap in writes:
            snap.released = False
        snaps[0].released = release
        remember = self._remember(snaps[0])
        try:
            if len(writes) == 1:
                saved = [await self.store.save_run(writes[0], audit, remember=remember)]
            else:
                saved = await self.store.save_runs(writes, audit, remember=remember)
        except BaseException:
            if remember is not None:
                snaps[0].remembered = False  # not saved: the next save remembers it
            raise
        for snap, copy in zip(writes, saved, strict=True):
            self._after_save(snap, copy)
            waiting.pop(snap.run_id, None)
        if not waiting:
            self.unsaved.pop(snaps[0].root_run_id, None)

    def defer(self, snap: RunSnapshot) -> None:
        """Leave a sub-agent run's latest state to the next save of a run of its tree:
        its parent's, which takes in what it came to (one write instead of two). A
        crash in between is one a moment earlier: its parent's batch was saved open."""
        self.unsaved.setdefault(snap.root_run_id, {})[snap.run_id] = snap

    def deferred(self, run_id: str, root_run_id: str) -> bool:
        """Whether a run's latest state waits for the next save of its tree (``defer``)."""
        return run_id in self.unsaved.get(root_run_id, {})

    def _after_save(self, snap: RunSnapshot, saved: RunSnapshot) -> None:
        snap.revision = saved.revision
        snap.updated_at = saved.updated_at
        if snap.is_root:
            self.saved[snap.run_id] = saved
            while len(self.saved) > _SAVED_KEPT:
                self.saved.popitem(last=False)

    def _remember(self, snap: RunSnapshot) -> Remember | None:
        """What the save that ends a top run adds to its thread's history (its own
        messages), once: the same write marks it ``remembered``."""
        ended = snap.status in ("finished", "failed", "stopped")
        if not (snap.is_root and snap.thread_id and ended) or snap.remembered:
            return None
        snap.remembered = True
        return Remember(
            messages=snap.messages[snap.history_len :],
            window=self.agent_at(snap.agent_path).options.history_window,
        )

    async def start(self, snap: RunSnapshot) -> None:
        """Save a new top run and put its thread's history before its messages, in one
        store call (``Store.start_run``); ``StoreConflict`` when its id is taken."""
        snap.history_pending = snap.thread_id is not None
        saved, history = await self.store.start_run(snap)
        self._after_save(snap, saved)
        self._take_history(snap, history)

    async def load_history(self, snap: RunSnapshot) -> None:
        """Put the thread's history first in a run whose first save read it but whose
        process died before saving it again (crash recovery)."""
        if snap.history_pending and snap.thread_id is not None:
            self._take_history(snap, await self.store.load_history(snap.thread_id))

    def _take_history(self, snap: RunSnapshot, history: list[Message]) -> None:
        kept = clean_history(history)
        snap.messages = [*kept, *snap.messages]
        snap.history_len, snap.history_pending = len(kept), False


def clean_history(history: list[Message]) -> list[Message]:
    """Drop a cut-off start: remembered history must begin with a user's own words."""
    for i, message in enumerate(history):
        if message.role == "user" and all(isinstance(p, TextPart) for p in message.parts):
            return history[i:]
    return []
