"""Crash recovery: runs a crash left in flight, each settled exactly once.

A run counts as crashed when no process keeps its heartbeat any more (the
lease lapsed) and it (and every sub-agent run it waits on) has not changed for
a lease either, which covers the moment between a claim and its first beat; or
at once when the process driving it shut down and released it (``released``:
its compare-and-set proved nobody else had written it since).
Under the run's lock, a run cut off in a model turn is driven again from its
last save (the turn is asked again; a batch is saved before its tools run, so
none ran for it), and one cut off in a tool batch goes on with each call
settled (``Turns.drive``); a single decided call whose owner still waits on it
is carried out again when that is safe (a decline, an expiry, an idempotent
tool). Anything else (a decided call that is not safe to repeat, a sub-agent
run in flight) marks the run interrupted, so no side effect happens twice.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from . import texts
from ._decide import Decider
from ._turns import Turns, audit_entry, lock_name
from .chunks import Chunk
from .snapshot import Decision, PendingCall, RunSnapshot, utcnow
from .stores.base import StoreConflict

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Recovery:
    """What recovering one run came to: a retry to consume, or an interruption."""

    run: RunSnapshot
    call: PendingCall | None
    retry: AsyncIterator[Chunk] | None
    dropped: list[PendingCall]
    shown: list[PendingCall] = field(default_factory=list)
    """Calls the retry asks anew, announced as it pauses (its session shows them)."""


class Recoverer:
    """Finds and settles crashed runs, over one ``Turns`` and its ``Decider``."""

    def __init__(self, turns: Turns, decider: Decider) -> None:
        self._turns = turns
        self._decider = decider

    async def recover(self, run_id: str, now: datetime, quiet: timedelta) -> Recovery | None:
        """Deal with a run a crash left in flight: no heartbeat and no change for ``quiet``.

        A run cut off in a model turn or a tool batch is driven on (see the module);
        a single decided call whose owner still waits on it is carried out again
        when that is safe (a decline, an expiry, or an idempotent tool); anything
        else marks the run interrupted, so no side effect happens twice. Returns
        ``None`` when there is nothing to do.
        """
        async with self._turns.store.lock(lock_name(run_id)):
            try:
                return await self._recover(run_id, now, quiet)
            except StoreConflict:  # a claim (it takes no lock) got there first: not crashed
                return None

    async def _recover(self, run_id: str, now: datetime, quiet: timedelta) -> Recovery | None:
        """``recover`` under the run's lock."""
        top = await self._turns.store.load_run(run_id)
        if top is None or not top.is_root or not top.in_flight:
            return None
        executing = [p for p in top.pending if p.state == "executing"]
        if not top.released and not await self._crashed(top, executing, now, quiet):
            return None
        call = executing[0] if executing else None
        shown: list[PendingCall] = []
        retry = await self._plan_retry(top, executing)
        if retry is not None:
            chain, decision, value = retry
            await self._turns.save_together(chain)
            assert call is not None
            body = self._decider.carry_out(chain, call, decision, value, shown)
            return Recovery(run=top, call=call, retry=body, dropped=[], shown=shown)
        if top.status == "running" and not executing and not top.busy_children:
            # Cut off in a model turn, or in a batch saved before its tools ran:
            # driven again from there. The save claims it (other recoverers find
            # it changed a moment ago), then the session's heartbeat keeps it.
            await self._turns.save(top)
            shown = []
            body = self._turns.drive(top, shown, again=True)
            return Recovery(run=top, call=None, retry=body, dropped=[], shown=shown)
        top.status, top.finish_reason = "interrupted", "interrupted"
        top.error = (
            texts.INTERRUPTED_TOOL.format(tool=call.tool_name) if call else texts.INTERRUPTED_RUN
        )
        # Every call still shown goes with the run: each is audited and returned,
        # so the caller can tell people it can no longer be decided.
        dropped, top.pending, top.busy_children = top.pending, [], []
        await self._turns.save(top, [audit_entry(top, e, "interrupted") for e in dropped])
        log.warning("run %s was interrupted by a crash: %s", run_id, top.error)
        return Recovery(run=top, call=call, retry=None, dropped=dropped)

    async def _crashed(
        self, top: RunSnapshot, executing: list[PendingCall], now: datetime, quiet: timedelta
    ) -> bool:
        """Whether nobody drives ``top`` any more: its heartbeat lapsed, and neither it,
        its decided calls nor the sub-agent runs it waits on changed for ``quiet``."""
        alive_until = await self._turns.store.alive_until(top.run_id)
        if alive_until is not None and alive_until > now:
            return False
        decided = [p.decision.decided_at for p in executing if p.decision]
        progress = await self._busy_progress(top)
        return max([top.updated_at, *decided, *progress]) <= now - quiet

    async def _busy_progress(self, snap: RunSnapshot) -> list[datetime]:
        """When each sub-agent run this one waits on (at any depth) last saved progress."""
        times: list[datetime] = []
        for child_id in snap.busy_children:
            child = await self._turns.store.load_run(child_id)
            if child is not None:
                times.append(child.updated_at)
                times.extend(await self._busy_progress(child))
        return times

    async def _plan_retry(
        self, top: RunSnapshot, executing: list[PendingCall]
    ) -> tuple[list[RunSnapshot], Decision, Any] | None:
        """The chain and fresh decision for a safe retry of the one decided call, if any."""
        if top.status != "paused" or len(executing) != 1 or top.busy_children:
            return None
        entry = executing[0]
        decision = entry.decision
        # A declined or answered-for approval, or an expiry, runs nothing; a declined
        # question runs a tool that hears declines, so it is safe only as an idempotent
        # call is.
        runs_nothing = decision is not None and (
            decision.action in ("expire", "respond")
            or (decision.action == "decline" and entry.kind == "approval")
        )
        if decision is None or not (runs_nothing or entry.idempotent):
            return None
        chain = await self._decider.chain(top, entry.tool_call_id)
        owner = chain[-1].find_pending(entry.tool_call_id)
        if owner is None or owner.child_run_id is not None:
            return None  # the outcome was recorded below; what came after is unknown
        value = decision.data
        if decision.action == "resume":
            value, _ = self._decider.answer(chain[-1], entry, decision.data)
        fresh = decision.model_copy(update={"decided_at": utcnow()})
        for snap in chain:
            call = snap.find_pending(entry.tool_call_id)
            assert call is not None
            call.decision = fresh
        return chain, fresh, value
