"""What a run emits while it works: chunks, and the final result.

Chunk ``type`` strings are the reference's. Every chunk carries ``agent_path``,
the chain of agents from the top (``("ops",)`` for the supervisor itself,
``("ops", "deploy")`` for its sub-agent), so a consumer can tell who said what.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from .messages import ToolCallPart, ToolResultPart
from .snapshot import FinishReason, PendingCall, PendingKind
from .usage import Usage


@dataclass(frozen=True, kw_only=True)
class PendingInfo:
    """A tool call that waits for a person, as callers see it.

    ``run_id`` is the top-level run to approve, decline or resume with;
    ``tool_call_id`` names the call, however deep the agent that owns it.
    """

    run_id: str
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    kind: PendingKind
    agent_path: tuple[str, ...]
    suspend_payload: Any = None
    resume_schema: dict[str, Any] | None = None
    created_at: datetime
    expires_at: datetime
    requester: str | None = None
    requester_name: str | None = None
    """The requester's display name when the run started, where it was told."""
    trace: Mapping[str, str] | None = None
    """The trace its run started in (``agents.tracing.context_of`` continues it)."""
    thread_id: str | None = None
    """The conversation its run belongs to (``None`` on calls kept by an earlier version)."""
    remark: str | None = None
    """What a standing approval said of it without approving it (a reviewer's caution)."""
    edited_by: str | None = None
    """Who asked it again with their edit (``Agent.ask_again``)."""
    answer: Any = None
    """An approval's answer: what a person said before it, which runs with the arguments."""
    source: str | None = None
    """The tool source offering the tool (an MCP server's name), if not the agent itself."""

    @classmethod
    def of(cls, run_id: str, call: PendingCall) -> PendingInfo:
        """The public view of a stored pending call."""
        return cls(
            run_id=run_id,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=call.args,
            kind=call.kind,
            agent_path=tuple(call.agent_path),
            suspend_payload=call.suspend_payload,
            resume_schema=call.resume_schema,
            created_at=call.created_at,
            expires_at=call.expires_at,
            requester=call.requester,
            requester_name=call.requester_name,
            trace=call.trace,
            thread_id=call.thread_id,
            remark=call.remark,
            edited_by=call.edited_by,
            answer=call.answer,
            source=call.source,
        )


@dataclass(frozen=True, kw_only=True)
class TextDeltaChunk:
    """A piece of an agent's answer."""

    type: Literal["text-delta"] = "text-delta"
    run_id: str
    agent_path: tuple[str, ...]
    text: str


@dataclass(frozen=True, kw_only=True)
class ToolCallChunk:
    """The model asked for a tool call."""

    type: Literal["tool-call"] = "tool-call"
    run_id: str
    agent_path: tuple[str, ...]
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class ToolResultChunk:
    """A tool call finished; ``result`` is its output as JSON data.

    ``edited_args``: the arguments it ran with when a person edited them before
    approving (``None``: it ran with the arguments it asked with)."""

    type: Literal["tool-result"] = "tool-result"
    run_id: str
    agent_path: tuple[str, ...]
    tool_call_id: str
    tool_name: str
    result: Any
    edited_args: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class ToolErrorChunk:
    """A tool call failed (bad arguments, an exception, a decline or an expiry).

    ``declined_by``: a standing decline declined it without asking anyone (a person said
    not to ask again: ``Refusal``); who said so."""

    type: Literal["tool-error"] = "tool-error"
    run_id: str
    agent_path: tuple[str, ...]
    tool_call_id: str
    tool_name: str
    error: str
    declined_by: str | None = None


@dataclass(frozen=True, kw_only=True)
class ToolCallApprovalChunk:
    """A call waits for approval. The snapshot is saved before this is emitted."""

    type: Literal["tool-call-approval"] = "tool-call-approval"
    run_id: str
    agent_path: tuple[str, ...]
    payload: PendingInfo


@dataclass(frozen=True, kw_only=True)
class ToolCallGrantedChunk:
    """A call that needed approval runs without asking: a standing approval covers it
    (``Agent.standing_approval``); ``granted_by`` is who gave that approval."""

    type: Literal["tool-call-granted"] = "tool-call-granted"
    run_id: str
    agent_path: tuple[str, ...]
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    granted_by: str


@dataclass(frozen=True, kw_only=True)
class ToolCallSuspendedChunk:
    """A tool suspended itself to ask for input. Saved before this is emitted."""

    type: Literal["tool-call-suspended"] = "tool-call-suspended"
    run_id: str
    agent_path: tuple[str, ...]
    payload: PendingInfo


@dataclass(frozen=True, kw_only=True)
class FinishChunk:
    """The stream is over; the run finished or paused."""

    type: Literal["finish"] = "finish"
    run_id: str
    agent_path: tuple[str, ...]
    finish_reason: FinishReason
    usage: Usage


@dataclass(frozen=True, kw_only=True)
class ErrorChunk:
    """The run failed; ``error`` is safe to show to people."""

    type: Literal["error"] = "error"
    run_id: str
    agent_path: tuple[str, ...]
    error: str


Chunk = (
    TextDeltaChunk
    | ToolCallChunk
    | ToolResultChunk
    | ToolErrorChunk
    | ToolCallApprovalChunk
    | ToolCallGrantedChunk
    | ToolCallSuspendedChunk
    | FinishChunk
    | ErrorChunk
)


@dataclass(frozen=True, kw_only=True)
class AgentResult:
    """The outcome of ``generate()`` (or of a stream, once consumed).

    ``text`` is the top agent's whole answer in this run, across pauses.
    When ``finish_reason == "suspended"``, ``suspend_payload`` is the most recent
    pending call and ``pending`` lists all of them.
    """

    run_id: str
    text: str
    finish_reason: FinishReason
    suspend_payload: PendingInfo | None = None
    pending: tuple[PendingInfo, ...] = ()
    tool_calls: tuple[ToolCallPart, ...] = ()
    tool_results: tuple[ToolResultPart, ...] = ()
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
