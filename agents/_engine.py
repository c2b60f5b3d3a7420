"""The runtime's engine: one store, one agent tree, and the parts that move runs.

``Engine`` holds the store and the frozen agent spec and calls its parts:
``Turns`` (model turns and tool batches), ``Decider`` (claiming and carrying
out decisions) and ``Recoverer`` (crash recovery). Each stream's worth of work
is a session, which ends by announcing the calls it left waiting. While a
session runs, its process keeps the run's heartbeat (``Store.beat``) one lease
ahead; a crash stops it, and recovery takes the run once the lease has lapsed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

from ._calls import CallPredicate, Expiry, StandingApproval
from ._decide import CLAIM_TRIES, Decider
from ._recover import Recoverer, Recovery
from ._turns import Turns, audit_entry, lock_name
from .chunks import (
    Chunk,
    FinishChunk,
    PendingInfo,
    ToolCallApprovalChunk,
    ToolCallSuspendedChunk,
)
from .errors import RunNotFoundError
from .snapshot import Decision, FinishReason, PendingCall, RunSnapshot, StopRequest, utcnow
from .spec import AgentSpec
from .stores.base import Store, StoreConflict
from .tools import jsonable

__all__ = ["DEFAULT_LEASE", "Engine", "Recovery"]

log = logging.getLogger(__name__)

DEFAULT_LEASE = timedelta(seconds=60)
"""How long a run outlives its driver's last heartbeat before recovery may take it."""
# Renewed three times a lease: two beats can fail before a live run looks dead.
_BEATS_PER_LEASE = 3
_BEAT_RETRY = 2.0
# Runs whose ended snapshot is kept for a ``result()`` that may follow; a caller
# that only reads chunks (the chat layer) never asks, so the oldest are dropped.
_ENDED_KEPT = 64


class Engine:
    """Runs, decisions and recovery for one agent tree over one store."""

    def __init__(
        self,
        root: AgentSpec,
        store: Store,
        *,
        lease: timedelta = DEFAULT_LEASE,
        expiry: Expiry | None = None,
        standing: StandingApproval | None = None,
    ) -> None:
        if lease <= timedelta(0):
            raise ValueError("the lease must be positive")
        self.store = store
        self.turns = Turns(root, store, expiry=expiry, standing=standing)
        self.decider = Decider(self.turns)
        self.recoverer = Recoverer(self.turns, self.decider)
        self.lease = lease
        """How long a run is kept alive by one heartbeat."""
        self.driving: dict[str, int] = {}
        """Root runs this process drives now (sessions per run): never crashed."""
        self.closing = False
        """This process shuts down: a session cancelled now hands its run back."""
        self._ended: OrderedDict[str, RunSnapshot] = OrderedDict()

    # -- lookups ---------------------------------------------------------------

    def agent_at(self, path: list[str] | tuple[str, ...]) -> AgentSpec:
        """The agent a snapshot's ``agent_path`` names, from the top."""
        return self.turns.agent_at(path)

    async def load(self, run_id: str) -> RunSnapshot:
        """A run's snapshot, or ``RunNotFoundError``."""
        return await self.turns.load(run_id)

    def register_predicate(self, root_run_id: str, predicate: CallPredicate) -> None:
        """Keep a per-call approval predicate for a run (in this process only)."""
        self.turns.register_predicate(root_run_id, predicate)

    async def ended(self, run_id: str) -> RunSnapshot:
        """The run as the stream that just ended left it (loaded only if not known)."""
        top = self._ended.pop(run_id, None)
        return top if top is not None else await self.load(run_id)

    # -- sessions: one stream's worth of work ----------------------------------

    async def start(self, snap: RunSnapshot) -> AsyncIterator[Chunk]:
        """Save a new top-level run now; the iterator drives it until it finishes or pauses.

        Saved eagerly, like a decision's claim: a store that fails, or a run id
        that is taken (``StoreConflict``), fails the start, not its first chunk.
        """
        await self.turns.start(snap)
        shown: list[PendingCall] = []
        return self._session(snap.run_id, self.turns.drive(snap, shown), shown)

    async def _session(
        self, run_id: str, body: AsyncIterator[Chunk], shown: list[PendingCall]
    ) -> AsyncIterator[Chunk]:
        """Run ``body``, then announce newly pending calls (already saved) and finish.

        Each pending call is announced once, by whichever session first sees it:
        a drive that pauses the top run announces what it asked in that same
        save; anything else unannounced (a sub-agent's call that reached the top
        another way) gets its flag under the run's lock here. Either way it is
        audited before the flag is saved, so the record does not depend on the
        stream being read on.
        """
        self._ended.pop(run_id, None)
        try:
            async with self._alive(run_id):
                async for chunk in body:
                    yield chunk
        except asyncio.CancelledError:
            if self.closing:
                await asyncio.shield(self._release(run_id))
            raise
        # What this session last saved of the top run is what it did; a change by
        # another process since is that process's session to announce and report.
        top = self.turns.saved.pop(run_id, None) or await self.turns.load(run_id)
        new = _unannounced(top)
        if new:  # the lock only when there is something to announce (not on every answer)
            async with self.turns.store.lock(lock_name(run_id)):
                for _ in range(CLAIM_TRIES):  # a claim takes no lock: read again if one won
                    top = await self.turns.load(run_id)
                    new = _unannounced(top)
                    for call in new:
                        call.announced = True
                    try:
                        if new:
                            audit = [audit_entry(top, c, "requested") for c in new]
                            await self.turns.save(top, audit)
                        break
                    except StoreConflict:
                        continue
        path = tuple(top.agent_path)
        for call in [*shown, *new]:
            info = PendingInfo.of(run_id, call)
            if call.kind == "approval":
                yield ToolCallApprovalChunk(run_id=run_id, agent_path=path, payload=info)
            else:
                yield ToolCallSuspendedChunk(run_id=run_id, agent_path=path, payload=info)
        reason: FinishReason = (
            "suspended" if top.status == "paused" else top.finish_reason or "stop"
        )
        self._ended[run_id] = top
        while len(self._ended) > _ENDED_KEPT:
            self._ended.popitem(last=False)
        yield FinishChunk(run_id=run_id, agent_path=path, finish_reason=reason, usage=top.usage)

    @asynccontextmanager
    async def _alive(self, run_id: str) -> AsyncIterator[None]:
        """Keep ``run_id``'s heartbeat one lease ahead while the block runs.

        The first beat is skipped when this process saved the run a moment ago
        (a start, a claim): recovery leaves a run alone for a lease after its
        last save anyway. A session that starts later (one that waited for its
        thread) beats at once. Not cleared at the end: a finished run leaves the
        in-flight index, and a cancelled one (a process going down) must look
        alive no longer than its lease.
        """
        self.driving[run_id] = self.driving.get(run_id, 0) + 1
        try:
            saved = self.turns.saved.get(run_id)
            fresh = saved is not None and utcnow() - saved.updated_at < self.lease / 3
            beaten = True if fresh else await self._beat(run_id)
            beating = asyncio.create_task(
                self._keep_beating(run_id, beaten), name=f"heartbeat:{run_id}"
            )
            try:
                yield
            finally:
                beating.cancel()
                await asyncio.gather(beating, return_exceptions=True)
        finally:
            self.driving[run_id] -= 1
            if not self.driving[run_id]:
                del self.driving[run_id]

    async def _keep_beating(self, run_id: str, beaten: bool) -> None:
        every = self.lease.total_seconds() / _BEATS_PER_LEASE
        while True:
            # After a failure, again soon: the store may be back before the lease lapses.
            await asyncio.sleep(every if beaten else min(every, _BEAT_RETRY))
            beaten = await self._beat(run_id)

    async def _beat(self, run_id: str) -> bool:
        try:
            await self.turns.store.beat(run_id, utcnow() + self.lease)
        except Exception as exc:  # the run goes on; the next beat may get through
            log.warning("heartbeat of run %s failed: %s", run_id, exc)
            return False
        return True

    async def _release(self, run_id: str) -> None:
        """Hand a run this process stops driving back as it last saved it, for another
        process's recovery to take on at once (``RunSnapshot.released``).

        The save is a compare-and-set on that revision: if anyone wrote the run since
        (a decision claimed elsewhere), it is not released and waits for its lease.
        """
        saved = self.turns.saved.get(run_id)
        if saved is None or saved.status not in ("running", "paused"):
            return
        try:
            await self.turns.save(saved.model_copy(deep=True), release=True)
            await self.store.beat(run_id, utcnow())
        except Exception as exc:  # changed elsewhere, or the store is away: the lease
            log.info("run %s is left to its lease: %s", run_id, exc)
            return
        log.info("run %s handed back for another process to go on with", run_id)

    # -- stopping ----------------------------------------------------------------

    async def stop(
        self, run_id: str, by: str | None
    ) -> tuple[RunSnapshot, list[PendingCall]] | None:
        """Stop a top run: the run as stopped and the calls that waited on it (dropped,
        each audited ``stopped``), or ``None`` when it is over already.

        Under the run's lock. A run that waits only for people ends here and now; one
        with work under way (a model turn, a tool, a sub-agent) ends where that work
        is next saved: at once in this process, at its next step in another. Either
        way the model hears nothing more, and no call it asked for runs afterwards.
        """
        async with self.store.lock(lock_name(run_id)):
            for _ in range(CLAIM_TRIES - 1):  # a claim takes no lock: read again if one won
                try:
                    stopped = await self._stop(run_id, by)
                    break
                except StoreConflict:
                    continue
            else:
                stopped = await self._stop(run_id, by)
        return stopped

    async def _stop(
        self, run_id: str, by: str | None
    ) -> tuple[RunSnapshot, list[PendingCall]] | None:
        """One try of ``stop``, under its lock (``StoreConflict``: written meanwhile)."""
        top = await self.turns.load(run_id)
        if not top.is_root:
            raise RunNotFoundError(run_id)
        if top.status not in ("running", "paused"):
            return None
        if top.stop is not None:
            return top, []  # stopping already: whoever drives it ends it
        top.stop = StopRequest(by=by)
        dropped = [p for p in top.pending if p.state == "pending"]
        top.pending = [p for p in top.pending if p.state != "pending"]
        if top.status == "paused" and not top.pending and not top.busy_children:
            self.turns.end_stopped(top)  # it only waited for people: it ends now
        else:
            self.turns.stops[run_id] = top.stop
            while len(self.turns.stops) > _ENDED_KEPT:
                self.turns.stops.popitem(last=False)
        audit = [audit_entry(top, p, "stopped", actor=by) for p in dropped]
        await self.turns.save(top, audit)
        return top, dropped

    # -- decisions and recovery ------------------------------------------------

    async def decide(
        self,
        run_id: str,
        tool_call_id: str | None,
        decision: Decision,
        resume_data: Any = None,
    ) -> AsyncIterator[Chunk]:
        """Claim the decision eagerly; the returned iterator does the work it unlocks."""
        if decision.action == "resume":
            decision = decision.model_copy(update={"data": jsonable(resume_data)})
        chain, entry, value = await self.decider.claim(run_id, tool_call_id, decision, resume_data)
        shown: list[PendingCall] = []
        # As claimed: an edit's arguments validated, or dropped when they changed nothing.
        body = self.decider.carry_out(chain, entry, entry.decision or decision, value, shown)
        return self._session(run_id, body, shown)

    async def recover(self, run_id: str, now: datetime, quiet: timedelta) -> Recovery | None:
        """Settle a run a crash left in flight (see ``Recoverer.recover``).

        Never one this process drives: its heartbeat may have lapsed only because
        the store was away for a while.
        """
        if run_id in self.driving:
            return None
        recovery = await self.recoverer.recover(run_id, now, quiet)
        if recovery is None or recovery.retry is None:
            return recovery
        return Recovery(
            run=recovery.run,
            call=recovery.call,
            retry=self._session(run_id, recovery.retry, recovery.shown),
            dropped=recovery.dropped,
        )


def _unannounced(snap: RunSnapshot) -> list[PendingCall]:
    """Pending calls no stream has announced yet."""
    return [p for p in snap.pending if p.state == "pending" and not p.announced]
