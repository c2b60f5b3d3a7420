"""Deciding a paused run: claiming a pending call, carrying the decision out.

A decision is claimed by a compare-and-set on the revisions of the runs it
changes, written together (``Store.save_runs``), so exactly one decision wins per
pending call across every process; a lost write is read again and tried again.
The work it unlocks (the tool) runs outside any lock; its outcome is then
recorded in passes that bring every run above it up to date, each one write of
the runs it read. The pass that completes a run's batch sets it running, so
exactly one process continues it. The protocol, every lock and their order:
``bot/CONCURRENCY.md``.

Why a supervisor's run keeps a copy of each pending call of its sub-agents
(any depth) in its own ``pending``: the store's indexes (a thread's waiting
runs, the earliest expiry) are computed from root snapshots alone, in one
write, and a decision names the top run; with the calls only in the owners'
runs, each index update and each lookup would need the whole tree. The run
that owns the tool holds the call itself; every copy is derived from it by
``_sync`` (which keeps only the top's ``announced`` flag), in the write that
changes the call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ValidationError

from . import texts
from ._calls import Granted, Outcome, error_chunk, error_outcome
from ._turns import Turns, audit_entry
from .chunks import Chunk, ToolResultChunk
from .errors import (
    AlreadyDecidedError,
    ArgsInvalidError,
    CallExpiredError,
    ResumeDataInvalidError,
    RunChangedError,
    RunNotFoundError,
    RunNotPausedError,
    ToolCallNotPendingError,
    validation_messages,
)
from .messages import ToolResultPart
from .snapshot import AuditEntry, AuditEvent, Decision, PendingCall, RunSnapshot, utcnow
from .stores.base import StoreConflict
from .tools import Tool

CLAIM_TRIES = 8
"""Reads and compare-and-sets one claim makes before it says the run kept changing."""


class Decider:
    """Claims decisions on pending calls and carries them out, over one ``Turns``."""

    def __init__(self, turns: Turns) -> None:
        self._turns = turns

    async def claim(
        self,
        run_id: str,
        tool_call_id: str | None,
        decision: Decision,
        resume_data: Any = None,
    ) -> tuple[list[RunSnapshot], PendingCall, Any]:
        """Atomically claim a pending call for a decision.

        Returns the chain of snapshots from the top run to the run owning the
        call, the call and the validated resume data. Raises a typed error,
        changing nothing, when the decision cannot be taken.
        """
        # Claimed by compare-and-set alone: the one write of the runs it changes (a
        # tree's together, ``Store.save_runs``) either wins or finds one of them
        # changed, and the run is read again (``CONCURRENCY.md``).
        loaded = await self._turns.store.load_run(run_id)
        for _ in range(CLAIM_TRIES):
            try:
                return await self._claim(run_id, loaded, tool_call_id, decision, resume_data)
            except RunChangedError:
                loaded = await self._turns.store.load_run(run_id)
        raise RunChangedError(run_id, tool_call_id or "")

    async def _claim(
        self,
        run_id: str,
        loaded: RunSnapshot | None,
        tool_call_id: str | None,
        decision: Decision,
        resume_data: Any,
    ) -> tuple[list[RunSnapshot], PendingCall, Any]:
        """One try of ``claim`` on the run as ``loaded``: ``RunChangedError`` when
        another write got there first (nothing of this claim is kept)."""
        top, entry = select_pending(run_id, loaded, tool_call_id, decision)
        chain = await self.chain(top, entry.tool_call_id)
        if any(snap.find_pending(entry.tool_call_id) is None for snap in chain):
            # The top run was read before a write of its tree that the sub-agent's run
            # was read after (two reads, one write between): read it all again.
            raise RunChangedError(run_id, entry.tool_call_id)
        value, answered = resume_data, None
        if decision.action == "resume":
            value, answered = self.answer(chain[-1], entry, resume_data)
        audit = []
        if decision.cancelled and entry.kind != "suspension":
            # Only a question is called off; an approval is declined, as it says.
            decision = decision.model_copy(update={"cancelled": False})
        if decision.action == "approve" and decision.args is not None:
            decision, edited = await self._edit(chain, entry, decision)
            if edited is not None:
                audit.append(edited)
        for snap in chain:
            call = snap.find_pending(entry.tool_call_id)
            assert call is not None  # checked above
            call.state, call.decision = "executing", decision
        top.decisions[entry.tool_call_id] = decision
        event = decision.event
        # Every run of the chain in one write, with the decision's audit entry: until
        # it succeeds, the claim has not happened and nothing says it did.
        decided = audit_entry(top, entry, event, decision)
        if answered is not None:  # an answer is on record, with what it runs with
            decided = decided.model_copy(update={"args": {**_as_args(value), **answered}})
        audit.append(decided)
        try:
            await self._turns.save_together(chain, audit)
        except StoreConflict as exc:
            # Someone wrote the run since it was read: this try lost, and nothing
            # of it counts (the top's write is the claim).
            raise RunChangedError(run_id, entry.tool_call_id) from exc
        return chain, entry, value

    async def _edit(
        self, chain: list[RunSnapshot], entry: PendingCall, decision: Decision
    ) -> tuple[Decision, AuditEntry | None]:
        """Put an approval's edited arguments in place of the asked ones, in every run
        of ``chain`` (changing nothing if they are invalid or the tool's check refuses
        them): the decision with them as validated, and the ``edited`` audit entry; an
        edit that leaves them as they were is no edit (no ``args``, no entry)."""
        owner, top = chain[-1], chain[0]
        tool = self._turns.agent_at(owner.agent_path).tool(entry.tool_name)
        call = next((c for c in owner.batch if c.tool_call_id == entry.tool_call_id), None)
        if tool is None or call is None:
            raise ToolCallNotPendingError(top.run_id, entry.tool_call_id, "its tool is gone")
        try:
            args = tool.validate_args(decision.args or {})
        except ValidationError as exc:
            raise ArgsInvalidError(
                top.run_id, entry.tool_call_id, validation_messages(exc)
            ) from exc
        refusal = await tool.refusal(args, self._turns.context(owner, call))
        if refusal is not None:
            raise ArgsInvalidError(top.run_id, entry.tool_call_id, [refusal])
        edited = tool.dump_args(args)
        before = entry.args
        if _sortable(edited) == _sortable(before):
            # An edit that changed nothing is an approval like any other.
            return decision.model_copy(update={"args": None}), None
        for snap in chain:
            pending = snap.find_pending(entry.tool_call_id)
            assert pending is not None
            pending.args = edited
        decision = decision.model_copy(update={"args": edited})
        record = audit_entry(top, entry, "edited", decision)
        return decision, record.model_copy(update={"previous_args": before})

    async def ask_again(
        self,
        run_id: str,
        tool_call_id: str,
        args: dict[str, Any],
        *,
        edited_by: str | None,
        expires_in: timedelta | None = None,
    ) -> PendingCall:
        """Put ``args`` (validated, and the tool's check) in place of a waiting
        approval's, undecided: the call is asked anew (a new ``created_at``, so a new
        asking; no remark), for ``expires_in`` (else as long as before), audited
        ``edited``. A compare-and-set write, read again while the run keeps changing.

        Raises:
            ArgsInvalidError: The arguments do not fit (nothing changes).
            ToolCallNotPendingError: The call is no approval waiting, or its tool is gone.
        """
        probe = Decision(action="approve", decided_by=edited_by, args=args)
        loaded = await self._turns.store.load_run(run_id)
        for _ in range(CLAIM_TRIES):
            top, entry = select_pending(run_id, loaded, tool_call_id, probe)
            chain = await self.chain(top, entry.tool_call_id)
            if any(snap.find_pending(entry.tool_call_id) is None for snap in chain):
                loaded = await self._turns.store.load_run(run_id)
                continue
            lasted = entry.expires_at - entry.created_at
            _, record = await self._edit(chain, entry, probe)
            if record is None:
                return entry  # the same arguments: asked as it is
            now = utcnow()
            for snap in chain:
                pending = snap.find_pending(entry.tool_call_id)
                assert pending is not None  # checked above
                pending.created_at, pending.expires_at = now, now + (expires_in or lasted)
                pending.remark, pending.edited_by = None, edited_by
            try:
                await self._turns.save_together(chain, [record])
            except StoreConflict:  # written since it was read: read it again
                loaded = await self._turns.store.load_run(run_id)
                continue
            asked = top.find_pending(entry.tool_call_id)
            assert asked is not None
            return asked
        raise RunChangedError(run_id, tool_call_id)

    async def chain(self, top: RunSnapshot, tool_call_id: str) -> list[RunSnapshot]:
        """The runs from the top down to the one that owns a pending call."""
        chain = [top]
        link = top.find_pending(tool_call_id)
        while link is not None and link.child_run_id:
            chain.append(await self._turns.load(link.child_run_id))
            link = chain[-1].find_pending(tool_call_id)
        return chain

    def answer(
        self, owner: RunSnapshot, entry: PendingCall, data: Any
    ) -> tuple[Any, dict[str, Any]]:
        """A question's answer, validated, and the arguments its call runs with once the
        answer fills them (as JSON: what the audit log records); the answer must leave
        them valid."""
        tool = self._turns.agent_at(owner.agent_path).tool(entry.tool_name)
        owned = owner.find_pending(entry.tool_call_id) or entry
        if tool is None:
            return data, owned.args
        try:
            answer = tool.validate_resume(data, owned.resume_schema)
            args = tool.answered_args(owned.args, answer)
        except ValidationError as exc:
            raise ResumeDataInvalidError(
                owner.root_run_id, entry.tool_call_id, validation_messages(exc)
            ) from exc
        return answer, tool.dump_args(args)

    async def carry_out(
        self,
        chain: list[RunSnapshot],
        entry: PendingCall,
        decision: Decision,
        resume_data: Any,
        shown: list[PendingCall] | None = None,
    ) -> AsyncIterator[Chunk]:
        leaf = chain[-1]
        outcomes: dict[str, Outcome] = {}
        call = next(c for c in leaf.batch if c.tool_call_id == entry.tool_call_id)
        owned = leaf.find_pending(entry.tool_call_id)
        assert owned is not None
        agent = self._turns.agent_at(leaf.agent_path)
        tool = agent.tool(call.tool_name)
        ran_with = owned.args
        heard = (
            decision.action == "decline"
            and entry.kind == "suspension"
            and tool is not None
            and tool.hears_declines
        )
        if decision.action in ("decline", "expire") and not heard:
            text = _refused_text(entry, decision)
            outcomes[call.tool_call_id] = error_outcome(call, text)
            yield error_chunk(leaf, call, text)
        elif decision.action == "respond":
            # A person answered for the tool: their words are its result; it never runs.
            given = ToolResultPart(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                content=decision.response or "",
                given_by=decision.decided_by or texts.SOMEONE,
            )
            outcomes[call.tool_call_id] = Outcome(result=given)
            yield ToolResultChunk(
                run_id=leaf.run_id,
                agent_path=tuple(leaf.agent_path),
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                result=given.content,
            )
        elif tool is None:
            # The tool went away (a redeploy) while the call waited: nothing can run.
            text = texts.UNKNOWN_TOOL.format(tool=call.tool_name)
            outcomes[call.tool_call_id] = error_outcome(call, text)
            yield error_chunk(leaf, call, text)
        elif decision.action == "approve":
            # Exactly what was approved runs: its arguments and the answer shown with them.
            granted = _approved(tool, owned)
            if isinstance(granted, str):
                outcomes[call.tool_call_id] = error_outcome(call, granted)
                yield error_chunk(leaf, call, granted)
            else:
                args, answer = granted
                async for chunk in self._turns.execute(
                    agent,
                    leaf,
                    call,
                    tool,
                    args,
                    outcomes,
                    approved=True,
                    resume_data=answer,
                    # The edit as validated (the claim put it in the call), not as typed.
                    edited_args=owned.args if decision.args is not None else None,
                ):
                    yield chunk
        elif heard:
            # The tool hears that its question was declined (an MCP server decides what
            # that means); it runs with the arguments it asked with.
            async for chunk in self._turns.execute(
                agent,
                leaf,
                call,
                tool,
                tool.validate_args(owned.args),
                outcomes,
                approved=owned.approved,
                suspended=owned.suspend_payload,
                declined="cancel" if decision.cancelled else "decline",
            ):
                yield chunk
        else:
            # The answer fills the arguments it names (validated when it was claimed).
            args = tool.answered_args(owned.args, resume_data)
            ran_with = tool.dump_args(args)
            # An approval holds for the arguments it was given; changed ones are
            # gated again, as a new call would be.
            approved = owned.approved and args == tool.validate_args(owned.args)
            gated = None
            if not approved:
                gated = await self._turns.gate(leaf, tool, call, args, resume_data=resume_data)
            if isinstance(gated, Granted):
                yield await self._turns.granted(leaf, tool, call, args, gated)
                approved, gated = True, None
            if gated is not None:
                outcomes[call.tool_call_id] = gated
                if gated.result is not None:
                    yield error_chunk(leaf, call, gated.result.content)
            else:
                async for chunk in self._turns.execute(
                    agent,
                    leaf,
                    call,
                    tool,
                    args,
                    outcomes,
                    approved=approved,
                    resume_data=resume_data,
                    suspended=owned.suspend_payload,
                ):
                    yield chunk
        outcome = outcomes[call.tool_call_id]
        ran = _ran(
            chain[0],
            owned,
            decision,
            outcome,
            heard or decision.action not in ("decline", "respond"),
            ran_with,
        )
        async for chunk in self._settle(chain, call.tool_call_id, outcome, shown, ran):
            yield chunk

    async def _settle(
        self,
        chain: list[RunSnapshot],
        tool_call_id: str,
        outcome: Outcome,
        shown: list[PendingCall] | None,
        audit: Sequence[AuditEntry] = (),
    ) -> AsyncIterator[Chunk]:
        """Record a call's outcome where it belongs, then continue what it completed.

        ``audit``: what recording the outcome puts on record (written with the top).

        Each pass brings every run above the changed one up to date; a run
        whose batch is complete is set running (by this process only) and
        driven, after which the next pass carries its answer
        up. Runs in between never continue: while a child is paused or running,
        its parent lacks that child's result.
        """
        chain_ids = [snap.run_id for snap in chain]
        low = len(chain_ids) - 1
        record: Outcome | None = outcome
        # The runs as this process last saved them (the claim): only when another
        # process wrote one since are they read, and the pass done again.
        held = {snap.run_id: snap for snap in chain}
        while low >= 0:
            ids = chain_ids[: low + 1]
            target = await self._settling_pass(ids, tool_call_id, record, held, audit)
            record, audit = None, ()
            if target is None:
                return
            async for chunk in self._turns.drive(target, shown):
                yield chunk
            low = chain_ids.index(target.run_id)
            if low == 0:
                return

    async def _settling_pass(
        self,
        ids: list[str],
        tool_call_id: str,
        record: Outcome | None,
        held: dict[str, RunSnapshot],
        audit: Sequence[AuditEntry],
    ) -> RunSnapshot | None:
        """``_pass`` by compare-and-set, read again and redone while other writes (a
        sibling's claim, a stop) get there first."""
        for _ in range(CLAIM_TRIES):
            try:
                return await self._pass(ids, tool_call_id, record, held, audit)
            except StoreConflict:
                # Read again, but for a run this process just drove: its state waits
                # for this write (``Turns.defer``), and nobody else writes a run
                # being driven.
                for run_id in list(held):
                    if not self._turns.deferred(run_id, held[run_id].root_run_id):
                        del held[run_id]
        raise RunChangedError(ids[0], tool_call_id)

    async def _pass(
        self,
        ids: list[str],
        tool_call_id: str,
        record: Outcome | None,
        held: dict[str, RunSnapshot],
        audit: Sequence[AuditEntry] = (),
    ) -> RunSnapshot | None:
        """One pass of ``_settle`` over the runs ``ids`` (the top first): record the
        outcome in the last, bring those above up to date, set running the lowest whose
        batch is complete (returned). ``held``: runs as last saved here (the others are
        read, and kept there)."""
        for run_id in ids:
            if run_id not in held:
                held[run_id] = await self._turns.load(run_id)
        snaps = [held[run_id] for run_id in ids]
        changed = {snaps[-1].run_id} if record is not None else set()
        if record is not None:
            _record(snaps[-1], tool_call_id, record)
        if snaps[0].stop is not None:
            await self._stopped_pass(snaps, tool_call_id, changed, audit)
            return None
        for parent, child in zip(reversed(snaps[:-1]), reversed(snaps[1:]), strict=True):
            if self._sync(parent, child):
                changed.add(parent.run_id)
        target = next((s for s in reversed(snaps) if _batch_complete(s)), None)
        if target is not None:
            target.status = "running"
            changed.add(target.run_id)
            # The runs above now wait on a busy child: say so all the way up.
            for parent, child in zip(reversed(snaps[:-1]), reversed(snaps[1:]), strict=True):
                if self._sync(parent, child):
                    changed.add(parent.run_id)
        await self._write(snaps, changed, audit)
        return target

    async def _write(
        self, snaps: list[RunSnapshot], changed: set[str], audit: Sequence[AuditEntry]
    ) -> None:
        """Write a pass that changed something: every run it read, in one write, so
        that one changed by another process since (a sibling's claim, a stop of the
        top) fails it and it is read again. None of them is driven elsewhere meanwhile:
        a run is driven only once every call below it is settled, by the pass that
        settled the last one."""
        top = snaps[0]
        if changed or audit or top.root_run_id in self._turns.unsaved:
            await self._turns.save_together(snaps, audit)

    async def _stopped_pass(
        self,
        snaps: list[RunSnapshot],
        tool_call_id: str,
        changed: set[str],
        audit: Sequence[AuditEntry],
    ) -> None:
        """A pass over a run someone stopped while its call ran: the outcome is kept
        where the call ran and nothing continues; the top ends once no decided call
        of it is still running."""
        top = snaps[0]
        kept = [p for p in top.pending if p.tool_call_id != tool_call_id]
        if kept != top.pending:
            top.pending = kept
            changed.add(top.run_id)
        if not any(p.state == "executing" for p in top.pending):
            self._turns.end_stopped(top)
            changed.add(top.run_id)
        await self._write(snaps, changed, audit)

    def _sync(self, parent: RunSnapshot, child: RunSnapshot) -> bool:
        """Make a parent's view of a child run current: its pending calls or its answer.

        A call the parent already shows keeps whether it was announced. Returns
        whether the parent changed.
        """
        was = (list(parent.pending), dict(parent.results), list(parent.busy_children))
        shown = {(p.tool_call_id, p.created_at): p for p in parent.pending}
        others = [p for p in parent.pending if p.child_run_id != child.run_id]
        seen = self._turns.child_outcome(child, child.parent_call_id or "")
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


def select_pending(
    run_id: str, top: RunSnapshot | None, tool_call_id: str | None, decision: Decision
) -> tuple[RunSnapshot, PendingCall]:
    """The top run ``run_id`` (``top`` as loaded, ``None`` if unknown) and its pending
    call a decision is about, or the typed error saying why not (changing nothing)."""
    if top is None:
        raise RunNotFoundError(run_id, tool_call_id)
    if not top.is_root:
        raise ToolCallNotPendingError(
            run_id, tool_call_id or "", "belongs to a sub-agent; use the top run id"
        )
    entry = top.find_pending(tool_call_id) if tool_call_id else None
    if entry is None and tool_call_id in top.decisions:
        raise AlreadyDecidedError(top.run_id, tool_call_id, top.decisions[tool_call_id])
    if top.status != "paused" or top.stop is not None:
        status = "stopped" if top.stop is not None else top.status
        raise RunNotPausedError(top.run_id, status, tool_call_id)
    if tool_call_id is None:
        waiting = [p for p in top.pending if p.state == "pending"]
        if not waiting:
            raise ToolCallNotPendingError(top.run_id, "", "(no call is pending)")
        entry = max(waiting, key=lambda p: p.created_at)
    if entry is None:
        raise ToolCallNotPendingError(top.run_id, tool_call_id or "")
    if entry.decision is not None:
        raise AlreadyDecidedError(top.run_id, entry.tool_call_id, entry.decision)
    # A question can be answered or declined; an approval approved or declined.
    wants = {"resume": "suspension", "approve": "approval", "respond": "approval"}.get(
        decision.action
    )
    if wants is not None and entry.kind != wants:
        detail = (
            "waits for resume data, not for approval"
            if entry.kind == "suspension"
            else "waits for approval, not for resume data"
        )
        raise ToolCallNotPendingError(top.run_id, entry.tool_call_id, detail)
    if decision.action != "expire" and entry.expires_at <= utcnow():
        raise CallExpiredError(top.run_id, entry.tool_call_id)
    return top, entry


def _ran(
    top: RunSnapshot,
    call: PendingCall,
    decision: Decision,
    outcome: Outcome,
    ran: bool,
    args: dict[str, Any],
) -> list[AuditEntry]:
    """What a decided call came to, for the audit log: ``executed`` or ``failed`` once its
    tool ran with ``args`` (not when it asked again, nor for a decline or an expiry)."""
    if not ran or decision.action == "expire" or outcome.result is None:
        return []
    event: AuditEvent = "failed" if outcome.result.is_error else "executed"
    entry = audit_entry(top, call, event, decision)
    content = outcome.result.content
    digest = "sha256:" + hashlib.sha256(content.encode()).hexdigest()
    update = {"result": content[:_RESULT_KEPT], "digest": digest, "args": args}
    return [entry.model_copy(update=update)]


def _as_args(answer: Any) -> dict[str, Any]:
    """A question's answer as arguments, for the audit log (its fields; else ``answer``)."""
    if answer is None:
        return {}
    if isinstance(answer, BaseModel):  # what the person gave, as the tool reads it
        return dict(answer.model_dump(mode="json", exclude_unset=True, by_alias=True))
    if isinstance(answer, dict):
        return {str(key): value for key, value in answer.items()}
    return {"answer": answer}


_RESULT_KEPT = 500
"""Characters of a tool's result (or error) the audit log keeps."""


def _refused_text(entry: PendingCall, decision: Decision) -> str:
    """What the model is told about a call that was declined or expired."""
    if decision.action == "expire":
        return texts.EXPIRED
    if entry.kind == "suspension":
        text = texts.QUESTION_CANCELLED if decision.cancelled else texts.QUESTION_DECLINED
    else:
        text = texts.DECLINED
    if decision.reason:
        text += texts.DECLINED_REASON.format(reason=decision.reason)
    return text


def _approved(tool: Tool, call: PendingCall) -> tuple[BaseModel, Any] | str:
    """What an approval was given (the arguments and the answer), validated again;
    or why it cannot run."""
    try:
        args = tool.validate_args(call.args)
        answer = (
            tool.validate_resume(call.answer, call.resume_schema)
            if call.answer is not None
            else None
        )
    except ValidationError as exc:
        return texts.APPROVED_ARGS_INVALID.format(
            tool=call.tool_name, errors="; ".join(validation_messages(exc))
        )
    # What runs must be what was shown: a default the tool gained since (a
    # redeploy), or a validator that changes its own output, would run something else.
    if not _shows_the_same(args, tool.dump_args(args), call.args):
        return texts.APPROVED_ARGS_CHANGED.format(tool=call.tool_name)
    return args, answer


def _shows_the_same(args: BaseModel, dumped: dict[str, Any], shown: dict[str, Any]) -> bool:
    """Whether ``dumped`` (of ``args``) is what ``shown`` said; a set field may come
    back in another order."""
    if dumped.keys() != shown.keys():
        return False
    names = {(f.alias or name): name for name, f in type(args).model_fields.items()}
    for key, value in dumped.items():
        if value == shown[key]:
            continue
        as_set = isinstance(getattr(args, names.get(key, key), None), set | frozenset)
        if not (as_set and isinstance(value, list) and isinstance(shown[key], list)):
            return False
        if sorted(map(_sortable, value)) != sorted(map(_sortable, shown[key])):
            return False
    return True


def _sortable(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _record(snap: RunSnapshot, tool_call_id: str, outcome: Outcome) -> None:
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
