"""A tool call's way to a result: gating (its check, approval, a standing approval),
the pending call it becomes when it waits for a person, and what a sub-agent's run
comes to for its parent. ``Turns`` runs calls on top of these (``_turns``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel

from . import provenance, texts
from .chunks import ToolCallGrantedChunk, ToolErrorChunk
from .messages import Message, ToolCallPart, ToolResultPart
from .snapshot import AuditEntry, PendingCall, RunSnapshot, utcnow
from .spec import DELEGATION_PREFIX, AgentSpec
from .stores.base import Store
from .tools import Tool, ToolContext, jsonable

log = logging.getLogger(__name__)

CallPredicate = Callable[[str, dict[str, Any]], Any]
"""Per-call ``require_tool_approval`` predicate: ``(tool_name, args) -> bool``."""


@dataclass(frozen=True, kw_only=True)
class StandingAsk:
    """A call that needs approval, as a standing approval (or its expiry) is asked
    about it."""

    thread_id: str | None
    requester: str | None
    tool_name: str
    args: dict[str, Any]
    agent_path: tuple[str, ...]
    run_id: str | None = None
    """The top run it would wait in (``None`` when asked about a call not in a run)."""
    tool_call_id: str | None = None
    asked_at: datetime | None = None
    """When it is asked (its pending call's ``created_at``); ``None``: now."""
    messages: tuple[Message, ...] = ()
    """The conversation that led to it (its run's messages, the thread's history first),
    for a standing approval that reads it (a reviewer); empty when not asked in a run."""


@dataclass(frozen=True)
class Remark:
    """A standing approval's answer for a call it does not approve, but has something
    to say about (a reviewer's caution): kept with the pending call (``remark``)."""

    text: str


@dataclass(frozen=True)
class Refusal:
    """A standing decline's answer for a call: declined without asking anyone (a person
    said not to ask again here), audited ``declined`` as ``by``; the model is told
    ``reason``."""

    by: str
    reason: str


Expiry = Callable[[StandingAsk], timedelta | None]
"""How long a call that needs approval stays decidable (``None``: the tool's, the
agent's)."""
StandingApproval = Callable[[StandingAsk], Awaitable[str | Remark | Refusal | None]]
"""Who has already approved calls like this one (``None``: nobody, ask as usual; a
``Remark``: nobody, ask, and show it with the call; a ``Refusal``: declined already,
nobody is asked)."""


@dataclass(frozen=True)
class Granted:
    """A call a standing approval covers: it runs at once, approved by ``by``."""

    by: str


@dataclass
class Outcome:
    """What one tool call came to: a result for the model, or calls left waiting."""

    result: ToolResultPart | None = None
    pending: list[PendingCall] | None = None
    declined_by: str | None = None
    """Who said not to ask again, when a standing decline settled it (``Refusal``)."""


class Calls:
    """Gating and pending calls for ``Turns``, over its agent tree, store and options."""

    root: AgentSpec
    store: Store
    expiry: Expiry | None
    standing: StandingApproval | None
    _predicates: dict[str, CallPredicate]

    def agent_at(self, path: Sequence[str]) -> AgentSpec:
        """The agent a snapshot's ``agent_path`` names, from the top."""
        return self.root.at(path)

    async def gate(
        self,
        snap: RunSnapshot,
        tool: Tool,
        call: ToolCallPart,
        args: BaseModel,
        *,
        resume_data: Any = None,
    ) -> Outcome | Granted | None:
        """Before a call runs: refused by its check, waiting for approval, covered by a
        standing approval (``Granted``: it runs, approved), or ``None`` (go)."""
        ctx = self.context(snap, call, resume_data=resume_data)
        refusal = await tool.refusal(args, ctx)
        if refusal is not None:
            return error_outcome(
                call, texts.TOOL_REFUSED.format(tool=call.tool_name, reason=refusal)
            )
        if await self._needs_approval(snap, tool, args, ctx):
            asked_at = utcnow()  # one moment for the hook, the expiry and the pending call
            by = await self._standing_by(snap, tool, call, args, asked_at)
            if isinstance(by, str):
                return Granted(by)
            if isinstance(by, Refusal):
                return await self._refused(snap, tool, call, args, by)
            remark = by.text if by is not None else None
            approval = self.pending(
                snap,
                tool,
                call,
                "approval",
                args,
                answer=resume_data,
                remark=remark,
                asked_at=asked_at,
            )
            return Outcome(pending=[approval])
        return None

    async def _standing_by(
        self,
        snap: RunSnapshot,
        tool: Tool,
        call: ToolCallPart,
        args: BaseModel,
        asked_at: datetime,
    ) -> str | Remark | Refusal | None:
        """Who already approved calls like this one; a lookup that fails asks as usual."""
        if self.standing is None or tool.delegate_to is not None:
            return None
        ask = _asked(snap, tool, call, tool.dump_args(args), asked_at)
        try:
            return await self.standing(ask)
        except Exception:
            log.exception("standing approval lookup for %s failed; asking instead", tool.name)
            return None

    async def _refused(
        self, snap: RunSnapshot, tool: Tool, call: ToolCallPart, args: BaseModel, by: Refusal
    ) -> Outcome:
        """Decline a call a standing decline covers: on record (``declined``, as whoever
        said not to ask again), and the model told why."""
        await self._standing_entry(snap, call, tool.dump_args(args), "declined", by.by, by.reason)
        said = texts.DECLINED + texts.DECLINED_REASON.format(reason=by.reason)
        return replace(error_outcome(call, said), declined_by=by.by)

    async def _standing_entry(
        self,
        snap: RunSnapshot,
        call: ToolCallPart,
        args: dict[str, Any],
        event: Literal["granted", "declined"],
        actor: str,
        reason: str | None = None,
    ) -> None:
        """Audit a call a standing answer settled without asking anyone (``actor``: who
        gave that answer)."""
        entry = AuditEntry(
            event=event,
            run_id=snap.root_run_id,
            thread_id=snap.thread_id,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=args,
            kind="approval",
            requester=snap.resource_id,
            requester_name=snap.resource_name,
            actor=actor,
            reason=reason,
        )
        await self.store.append_audit(provenance.current().stamp(entry))

    async def granted(
        self, snap: RunSnapshot, tool: Tool, call: ToolCallPart, args: BaseModel, grant: Granted
    ) -> ToolCallGrantedChunk:
        """Put a call a standing approval covers on record (``granted``), and say so."""
        dumped = tool.dump_args(args)
        await self._standing_entry(snap, call, dumped, "granted", grant.by)
        return ToolCallGrantedChunk(
            run_id=snap.run_id,
            agent_path=tuple(snap.agent_path),
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=dumped,
            granted_by=grant.by,
        )

    async def _needs_approval(
        self, snap: RunSnapshot, tool: Tool, args: BaseModel, ctx: ToolContext
    ) -> bool:
        if tool.delegate_to is not None:  # the sub-agent's own tools are gated instead
            return False
        if await tool.needs_approval(args, ctx):
            return True
        option = snap.options.require_tool_approval
        if option != "predicate":
            return bool(option)
        predicate = self._predicates.get(snap.root_run_id)
        if predicate is None:  # cold resume: the predicate did not survive; fail closed
            return True
        try:
            verdict = predicate(ctx.tool_name, tool.dump_args(args))
            if inspect.isawaitable(verdict):
                verdict = await verdict
            return bool(verdict)
        except Exception:
            return True

    def context(
        self,
        snap: RunSnapshot,
        call: ToolCallPart,
        *,
        approved: bool = False,
        resume_data: Any = None,
        suspended: Any = None,
        declined: Literal["decline", "cancel"] | None = None,
    ) -> ToolContext:
        return ToolContext(
            run_id=snap.run_id,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            thread_id=snap.thread_id,
            resource_id=snap.resource_id,
            agent_path=tuple(snap.agent_path),
            approved=approved,
            resume_data=resume_data,
            suspended=suspended,
            declined=declined,
        )

    def pending(
        self,
        snap: RunSnapshot,
        tool: Tool,
        call: ToolCallPart,
        kind: str,
        args: BaseModel,
        suspend_payload: Any = None,
        *,
        approved: bool = False,
        answer: Any = None,
        answer_schema: dict[str, Any] | None = None,
        remark: str | None = None,
        asked_at: datetime | None = None,
    ) -> PendingCall:
        """A pending call, holding the validated arguments it runs with.

        An approval is bound to exactly these arguments (and ``answer``, the
        person's answer it follows, if any): they are what the approver is shown,
        and what the tool runs with once approved (see ``_decide``).
        """
        agent = self.agent_at(snap.agent_path)
        now = asked_at or utcnow()
        dumped = tool.dump_args(args)
        ask = _asked(snap, tool, call, dumped, now)
        ttl = (
            (self.expiry(ask) if self.expiry else None)
            or tool.expires_in
            or agent.options.approval_ttl
        )
        if snap.options.expires_in is not None:
            ttl = min(ttl, snap.options.expires_in)
        return PendingCall(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=dumped,
            kind="approval" if kind == "approval" else "suspension",
            agent_path=list(snap.agent_path),
            suspend_payload=suspend_payload,
            resume_schema=(
                tool.resume_schema.model_json_schema() if tool.resume_schema else answer_schema
            ),
            created_at=now,
            expires_at=now + ttl,
            requester=snap.resource_id,
            requester_name=snap.resource_name,
            trace=snap.trace,
            thread_id=snap.thread_id,
            idempotent=tool.idempotent,
            source=tool.source,
            approved=approved,
            answer=_answer_json(answer),
            remark=remark,
        )

    def child_outcome(self, child: RunSnapshot, via_call_id: str) -> Outcome:
        """A child run as seen by its parent: its answer, its pending calls, or (while
        another process drives it) neither."""
        if child.status == "running":
            return Outcome()
        if child.status == "paused":
            return Outcome(
                pending=[
                    call.model_copy(
                        update={"via_call_id": via_call_id, "child_run_id": child.run_id}
                    )
                    for call in child.pending
                ]
            )
        tool_name = f"{DELEGATION_PREFIX}{child.agent_path[-1]}"
        if child.status == "stopped":
            return Outcome(
                result=ToolResultPart(
                    tool_call_id=via_call_id,
                    tool_name=tool_name,
                    content=texts.STOPPED,
                    is_error=True,
                )
            )
        if child.status in ("failed", "interrupted"):
            content = texts.SUB_AGENT_FAILED.format(agent=child.agent_path[-1], error=child.error)
            return Outcome(
                result=ToolResultPart(
                    tool_call_id=via_call_id, tool_name=tool_name, content=content, is_error=True
                )
            )
        return Outcome(
            result=ToolResultPart(
                tool_call_id=via_call_id,
                tool_name=tool_name,
                content=child.text or texts.SUB_AGENT_SILENT,
            )
        )


def _answer_json(answer: Any) -> Any:
    """A person's validated answer as JSON, field names as the schema spells them."""
    if isinstance(answer, BaseModel):
        return answer.model_dump(mode="json", by_alias=True)
    return jsonable(answer)


def _asked(
    snap: RunSnapshot, tool: Tool, call: ToolCallPart, args: dict[str, Any], at: datetime
) -> StandingAsk:
    """A call of ``snap`` about to wait for a person, as its standing approval and its
    expiry are asked about it (``args``: as the tool dumps them)."""
    return StandingAsk(
        thread_id=snap.thread_id,
        requester=snap.resource_id,
        tool_name=tool.name,
        args=args,
        agent_path=tuple(snap.agent_path),
        run_id=snap.root_run_id,
        tool_call_id=call.tool_call_id,
        asked_at=at,
        messages=tuple(snap.messages),
    )


def error_outcome(
    call: ToolCallPart, text: str, *, edited_args: dict[str, Any] | None = None
) -> Outcome:
    return Outcome(
        result=ToolResultPart(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            content=text,
            is_error=True,
            edited_args=edited_args,
        )
    )


def error_chunk(
    snap: RunSnapshot, call: ToolCallPart, text: str, *, declined_by: str | None = None
) -> ToolErrorChunk:
    return ToolErrorChunk(
        run_id=snap.run_id,
        agent_path=tuple(snap.agent_path),
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        error=text,
        declined_by=declined_by,
    )
