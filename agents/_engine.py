"""Decisions on paused runs: claiming them, carrying them out, and crash recovery.

A decision takes the top run's store lock, so exactly one decision wins per
waiting call across every process. The work it unlocks (the tool) runs outside
the lock; its outcome is then recorded in locked passes that bring every run
above it up to date. A run whose batch is complete is set running under the
lock, so exactly one process continues it. Every lock and their order:
``bot/CONCURRENCY.md``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from ._loop import DELEGATION_PREFIX, RunLoop, _error, _error_chunk, _Outcome, lock_name
from .chunks import (
    Chunk,
    FinishChunk,
    PendingInfo,
    ToolCallApprovalChunk,
    ToolCallSuspendedChunk,
)
from .errors import (
    AlreadyDecidedError,
    ApprovalExpiredError,
    ResumeDataInvalidError,
    RunChangedError,
    RunNotFoundError,
    RunNotPausedError,
    ToolCallNotPendingError,
    validation_messages,
)
from .snapshot import Decision, FinishReason, PendingCall, RunSnapshot, utcnow
from .stores.base import StoreConflict
from .tools import Tool, jsonable

log = logging.getLogger(__name__)

DECLINED_TEXT = "Tool call was not approved by the user"
EXPIRED_TEXT = "The approval request expired before anyone decided; the tool did not run."
INTERRUPTED_TOOL_TEXT = (
    "The bot stopped while {tool} was running, so it may or may not have finished. "
    "It was not run again; please check its effect and ask again."
)
APPROVED_ARGS_INVALID_TEXT = (
    "The approved arguments of {tool} are no longer valid ({errors}); it did not run. "
    "Please ask again."
)
APPROVED_ARGS_CHANGED_TEXT = (
    "{tool} would not run with exactly the arguments that were approved, so it did not run. "
    "Please ask again."
)
INTERRUPTED_RUN_TEXT = (
    "The bot stopped while working on this, so some steps may or may not have happened. "
    "Nothing was run again; please check and ask again."
)

__all__ = ["DELEGATION_PREFIX", "Engine", "Recovery"]


@dataclass(frozen=True, kw_only=True)
class Recovery:
    """What recovering one run came to: a retry to consume, or an interruption."""

    run: RunSnapshot
    call: PendingCall | None
    retry: AsyncIterator[Chunk] | None
    dropped: list[PendingCall]


class Engine(RunLoop):
    """The run loop plus everything that happens to a paused run."""

    # -- sessions: one stream's worth of work ---------------------------------

    async def start(self, snap: RunSnapshot) -> AsyncIterator[Chunk]:
        """Save a new top-level run and drive it until it finishes or pauses."""
        await self._save(snap)
        async for chunk in self._session(snap.run_id, self._drive(snap)):
            yield chunk

    async def _session(self, run_id: str, body: AsyncIterator[Chunk]) -> AsyncIterator[Chunk]:
        """Run ``body``, then announce newly waiting calls (already saved) and finish.

        Each waiting call is announced once, by whichever session first sees it:
        the flag is set under the run's lock, and audited there too, so the
        record does not depend on the stream being read on.
        """
        async for chunk in body:
            yield chunk
        top = await self.load(run_id)
        new = _unannounced(top)
        if new:  # the lock only when there is something to announce (not on every answer)
            async with self.store.lock(lock_name(run_id)):
                top = await self.load(run_id)
                new = _unannounced(top)
                for call in new:
                    call.announced = True
                    await self._audit(top, call, "requested")
                if new:
                    await self._save(top)
        path = tuple(top.agent_path)
        for call in new:
            info = PendingInfo.of(run_id, call)
            if call.kind == "approval":
                yield ToolCallApprovalChunk(run_id=run_id, agent_path=path, payload=info)
            else:
                yield ToolCallSuspendedChunk(run_id=run_id, agent_path=path, payload=info)
        reason: FinishReason = (
            "suspended" if top.status == "paused" else top.finish_reason or "stop"
        )
        yield FinishChunk(run_id=run_id, agent_path=path, finish_reason=reason, usage=top.usage)

    # -- claiming a decision --------------------------------------------------

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
        chain, entry, value = await self.claim(run_id, tool_call_id, decision, resume_data)
        return self._session(run_id, self._carry_out(chain, entry, decision, value))

    async def claim(
        self,
        run_id: str,
        tool_call_id: str | None,
        decision: Decision,
        resume_data: Any = None,
    ) -> tuple[list[RunSnapshot], PendingCall, Any]:
        """Atomically claim a waiting call for a decision.

        Returns the chain of snapshots from the top run to the run owning the
        call, the call and the validated resume data. Raises a typed error,
        changing nothing, when the decision cannot be taken.
        """
        async with self.store.lock(lock_name(run_id)):
            top = await self.store.load_run(run_id)
            if top is None:
                raise RunNotFoundError(run_id, tool_call_id)
            if not top.is_root:
                raise ToolCallNotPendingError(
                    run_id, tool_call_id or "", "belongs to a sub-agent; use the top run id"
                )
            entry = self._select(top, tool_call_id, decision)
            chain = await self._chain(top, entry.tool_call_id)
            value = resume_data
            if decision.action == "resume":
                value = self._validate_resume(chain[-1], entry, resume_data)
            for snap in chain:
                call = snap.find_pending(entry.tool_call_id)
                assert call is not None
                call.state, call.decision = "executing", decision
            top.decisions[entry.tool_call_id] = decision
            # Audited before anything is saved: if the log cannot be written, the
            # claim has not happened either.
            event = {"approve": "approved", "decline": "declined", "resume": "resumed"}.get(
                decision.action, "expired"
            )
            await self._audit(top, entry, event, decision)
            # The top last: until it is saved, the claim has not happened.
            try:
                for snap in reversed(chain):
                    await self._save(snap)
            except StoreConflict as exc:
                # Someone wrote the run without its lock (a lease that ran out):
                # this claim lost, and says so instead of a storage error.
                raise RunChangedError(run_id, entry.tool_call_id) from exc
        return chain, entry, value

    def _select(
        self, top: RunSnapshot, tool_call_id: str | None, decision: Decision
    ) -> PendingCall:
        """The waiting call a decision is about, or the typed error saying why not."""
        entry = top.find_pending(tool_call_id) if tool_call_id else None
        if entry is None and tool_call_id in top.decisions:
            raise AlreadyDecidedError(top.run_id, tool_call_id, top.decisions[tool_call_id])
        if top.status != "paused":
            raise RunNotPausedError(top.run_id, top.status, tool_call_id)
        if tool_call_id is None:
            waiting = [p for p in top.pending if p.state == "pending"]
            if not waiting:
                raise ToolCallNotPendingError(top.run_id, "", "(no call is pending)")
            entry = max(waiting, key=lambda p: p.created_at)
        if entry is None:
            raise ToolCallNotPendingError(top.run_id, tool_call_id or "")
        if entry.decision is not None:
            raise AlreadyDecidedError(top.run_id, entry.tool_call_id, entry.decision)
        wants = "suspension" if decision.action == "resume" else "approval"
        if decision.action != "expire" and entry.kind != wants:
            detail = (
                "waits for resume data, not for approval"
                if entry.kind == "suspension"
                else "waits for approval, not for resume data"
            )
            raise ToolCallNotPendingError(top.run_id, entry.tool_call_id, detail)
        if decision.action != "expire" and entry.expires_at <= utcnow():
            raise ApprovalExpiredError(top.run_id, entry.tool_call_id)
        return entry

    async def _chain(self, top: RunSnapshot, tool_call_id: str) -> list[RunSnapshot]:
        """The runs from the top down to the one that owns a waiting call."""
        chain = [top]
        link = top.find_pending(tool_call_id)
        while link is not None and link.child_run_id:
            chain.append(await self.load(link.child_run_id))
            link = chain[-1].find_pending(tool_call_id)
        return chain

    def _validate_resume(self, owner: RunSnapshot, entry: PendingCall, data: Any) -> Any:
        """The validated answer; it must also leave the call's arguments valid."""
        tool = self.agent_at(owner.agent_path).tool(entry.tool_name)
        if tool is None:
            return data
        owned = owner.find_pending(entry.tool_call_id) or entry
        try:
            answer = tool.validate_resume(data)
            tool.answered_args(owned.args, answer)
        except ValidationError as exc:
            raise ResumeDataInvalidError(
                owner.root_run_id, entry.tool_call_id, validation_messages(exc)
            ) from exc
        return answer

    # -- carrying a decision out ----------------------------------------------

    async def _carry_out(
        self,
        chain: list[RunSnapshot],
        entry: PendingCall,
        decision: Decision,
        resume_data: Any,
    ) -> AsyncIterator[Chunk]:
        leaf = chain[-1]
        outcomes: dict[str, _Outcome] = {}
        call = next(c for c in leaf.batch if c.tool_call_id == entry.tool_call_id)
        owned = leaf.find_pending(entry.tool_call_id)
        assert owned is not None
        agent = self.agent_at(leaf.agent_path)
        tool = agent.tool(call.tool_name)
        assert tool is not None
        if decision.action in ("decline", "expire"):
            text = EXPIRED_TEXT if decision.action == "expire" else DECLINED_TEXT
            if decision.action == "decline" and decision.reason:
                text += f". Reason: {decision.reason}"
            outcomes[call.tool_call_id] = _error(call, text)
            yield _error_chunk(leaf, call, text)
        elif decision.action == "approve":
            # Exactly the approved arguments run, and nothing else: no resume data.
            args = _approved_args(tool, owned)
            if isinstance(args, str):
                outcomes[call.tool_call_id] = _error(call, args)
                yield _error_chunk(leaf, call, args)
            else:
                async for chunk in self._execute(
                    agent, leaf, call, tool, args, outcomes, approved=True
                ):
                    yield chunk
        else:
            # The answer fills the arguments it names (validated when it was claimed).
            args = tool.answered_args(owned.args, resume_data)
            # An approval holds for the arguments it was given; changed ones are
            # gated again, as a new call would be.
            approved = owned.approved and tool.dump_args(args) == owned.args
            gated = None
            if not approved:
                gated = await self._gate(leaf, tool, call, args, resume_data=resume_data)
            if gated is not None:
                outcomes[call.tool_call_id] = gated
                if gated.result is not None:
                    yield _error_chunk(leaf, call, gated.result.content)
            else:
                async for chunk in self._execute(
                    agent,
                    leaf,
                    call,
                    tool,
                    args,
                    outcomes,
                    approved=approved,
                    resume_data=resume_data,
                ):
                    yield chunk
        ids = [snap.run_id for snap in chain]
        async for chunk in self._settle(ids, call.tool_call_id, outcomes[call.tool_call_id]):
            yield chunk

    async def _settle(
        self, chain_ids: list[str], tool_call_id: str, outcome: _Outcome
    ) -> AsyncIterator[Chunk]:
        """Record a call's outcome where it belongs, then continue what it completed.

        Each locked pass brings every run above the changed one up to date; a
        run whose batch is complete is set running (by this process only) and
        driven outside the lock, after which the next pass carries its answer
        up. Runs in between never continue: while a child is paused or running,
        its parent lacks that child's result.
        """
        low = len(chain_ids) - 1
        record: _Outcome | None = outcome
        while low >= 0:
            async with self.store.lock(lock_name(chain_ids[0])):
                snaps = [await self.load(run_id) for run_id in chain_ids[: low + 1]]
                changed = {snaps[-1].run_id} if record is not None else set()
                if record is not None:
                    _record(snaps[-1], tool_call_id, record)
                    record = None
                for parent, child in zip(reversed(snaps[:-1]), reversed(snaps[1:]), strict=True):
                    if self._sync(parent, child):
                        changed.add(parent.run_id)
                target = next((s for s in reversed(snaps) if _batch_complete(s)), None)
                if target is not None:
                    target.status = "running"
                    changed.add(target.run_id)
                    # The runs above now wait on a busy child: say so all the way up.
                    for parent, child in zip(
                        reversed(snaps[:-1]), reversed(snaps[1:]), strict=True
                    ):
                        if self._sync(parent, child):
                            changed.add(parent.run_id)
                # Only what changed is written: a run another process is driving
                # must keep its revision.
                for snap in reversed(snaps):
                    if snap.run_id in changed:
                        await self._save(snap)
            if target is None:
                return
            async for chunk in self._drive(target):
                yield chunk
            low = chain_ids.index(target.run_id)
            if low == 0:
                return

    def _sync(self, parent: RunSnapshot, child: RunSnapshot) -> bool:
        """Make a parent's view of a child run current: its waiting calls or its answer.

        A call the parent already shows keeps whether it was announced. Returns
        whether the parent changed.
        """
        was = (list(parent.pending), dict(parent.results), list(parent.busy_children))
        shown = {(p.tool_call_id, p.created_at): p for p in parent.pending}
        others = [p for p in parent.pending if p.child_run_id != child.run_id]
        seen = self._child_outcome(child, child.parent_call_id or "")
        surfaced = []
        for call in seen.pending or []:
            before = shown.get((call.tool_call_id, call.created_at))
            kept = {"announced": before.announced} if before else {}
            surfaced.append(call.model_copy(update=kept))
        parent.pending = others + surfaced
        if seen.result is not None and child.parent_call_id is not None:
            parent.results[child.parent_call_id] = seen.result
        # A child someone is driving (or that waits on its own) keeps the parent in
        # flight, so a crash there is found even while siblings still wait.
        busy = child.status == "running" or bool(child.busy_children)
        parent.busy_children = [c for c in parent.busy_children if c != child.run_id]
        if busy:
            parent.busy_children.append(child.run_id)
        return (parent.pending, parent.results, parent.busy_children) != was

    # -- crash recovery -------------------------------------------------------

    async def recover(self, run_id: str, stale_before: datetime) -> Recovery | None:
        """Deal with a run a crash left in flight, if it has been quiet since ``stale_before``.

        A single decided call whose owner still waits on it is carried out
        again when that is safe (a decline, an expiry, or an idempotent tool);
        anything else marks the run interrupted, so no side effect happens
        twice. Returns ``None`` when there is nothing to do.
        """
        async with self.store.lock(lock_name(run_id)):
            top = await self.store.load_run(run_id)
            if top is None or not top.is_root or not top.in_flight:
                return None
            executing = [p for p in top.pending if p.state == "executing"]
            decided = [p.decision.decided_at for p in executing if p.decision]
            progress = await self._busy_progress(top)
            if max([top.updated_at, *decided, *progress]) > stale_before:
                return None
            call = executing[0] if executing else None
            retry = await self._plan_retry(top, executing)
            if retry is not None:
                chain, decision, value = retry
                for snap in reversed(chain):
                    await self._save(snap)
                assert call is not None
                body = self._carry_out(chain, call, decision, value)
                return Recovery(run=top, call=call, retry=self._session(run_id, body), dropped=[])
            top.status, top.finish_reason = "interrupted", "interrupted"
            top.error = (
                INTERRUPTED_TOOL_TEXT.format(tool=call.tool_name) if call else INTERRUPTED_RUN_TEXT
            )
            # Every call still shown goes with the run: each is audited and returned,
            # so the caller can tell people it can no longer be decided.
            dropped, top.pending, top.busy_children = top.pending, [], []
            await self._save(top)
        for entry in dropped:
            await self._audit(top, entry, "interrupted")
        log.warning("run %s was interrupted by a crash: %s", run_id, top.error)
        return Recovery(run=top, call=call, retry=None, dropped=dropped)

    async def _busy_progress(self, snap: RunSnapshot) -> list[datetime]:
        """When each sub-agent run this one waits on (at any depth) last saved progress."""
        times: list[datetime] = []
        for child_id in snap.busy_children:
            child = await self.store.load_run(child_id)
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
        if decision is None or not (decision.action in ("decline", "expire") or entry.idempotent):
            return None
        chain = await self._chain(top, entry.tool_call_id)
        owner = chain[-1].find_pending(entry.tool_call_id)
        if owner is None or owner.child_run_id is not None:
            return None  # the outcome was recorded below; what came after is unknown
        value = decision.data
        if decision.action == "resume":
            value = self._validate_resume(chain[-1], entry, decision.data)
        fresh = decision.model_copy(update={"decided_at": utcnow()})
        for snap in chain:
            call = snap.find_pending(entry.tool_call_id)
            assert call is not None
            call.decision = fresh
        return chain, fresh, value


def _approved_args(tool: Tool, call: PendingCall) -> BaseModel | str:
    """The arguments an approval was given, validated again, or why they cannot run."""
    try:
        args = tool.validate_args(call.args)
    except ValidationError as exc:
        return APPROVED_ARGS_INVALID_TEXT.format(
            tool=call.tool_name, errors="; ".join(validation_messages(exc))
        )
    if tool.dump_args(args) != call.args:
        return APPROVED_ARGS_CHANGED_TEXT.format(tool=call.tool_name)
    return args


def _unannounced(snap: RunSnapshot) -> list[PendingCall]:
    """Waiting calls no stream has announced yet."""
    return [p for p in snap.pending if p.state == "pending" and not p.announced]


def _record(snap: RunSnapshot, tool_call_id: str, outcome: _Outcome) -> None:
    """Put one call's outcome into the run that owns it."""
    snap.pending = [p for p in snap.pending if p.tool_call_id != tool_call_id]
    if outcome.result is not None:
        snap.results[tool_call_id] = outcome.result
    snap.pending.extend(outcome.pending or [])


def _batch_complete(snap: RunSnapshot) -> bool:
    """A paused run whose every call of the current batch has its result."""
    return (
        snap.status == "paused"
        and not snap.pending
        and all(c.tool_call_id in snap.results for c in snap.batch)
    )
