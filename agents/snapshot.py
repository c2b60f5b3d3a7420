"""The persisted state of a run: everything needed to continue it in a fresh process.

A snapshot is JSON with a version field, read and written through one
``TypeAdapter``; never pickle. It is saved *before* an approval or suspension is
announced, so whoever sees the announcement can act on it from anywhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from .messages import Message, ToolCallPart, ToolResultPart
from .usage import Usage

SNAPSHOT_VERSION: Final = 1
"""Bumped when the snapshot shape changes; an unknown version fails to load."""

PendingKind = Literal["approval", "suspension"]
RunStatus = Literal["running", "paused", "finished", "failed", "interrupted", "stopped"]
FinishReason = Literal[
    "stop", "suspended", "max_steps", "length", "refusal", "error", "interrupted", "stopped"
]
DecisionAction = Literal["approve", "decline", "resume", "expire", "respond"]
AuditEvent = Literal[
    "requested",
    "edited",
    "approved",
    "declined",
    "responded",
    "cancelled",
    "resumed",
    "expired",
    "interrupted",
    "superseded",
    "executed",
    "failed",
    "granted",
    "stopped",
    "checkpoint",
]
"""What the runtime writes to the audit log, each with the save that makes it true.
``cancelled``: a question the person called off (``declined``: refused to answer).
``responded``: a person answered for the tool instead of letting it run.
``checkpoint``: a signature of the chain so far (``agents.chain``), no call's.
``superseded`` (the decision logged just before did not take effect) is only in logs
written before decisions were audited in their claim's save; readers still honour it."""


def utcnow() -> datetime:
    """Now, timezone-aware (UTC)."""
    return datetime.now(UTC)


_DECIDED: dict[DecisionAction, AuditEvent] = {
    "approve": "approved",
    "decline": "declined",
    "resume": "resumed",
    "expire": "expired",
    "respond": "responded",
}
"""The audit event each kind of decision writes (``Decision.event``)."""


class Decision(BaseModel):
    """Who resolved a pending call, how and when."""

    model_config = ConfigDict(frozen=True)

    action: DecisionAction
    decided_by: str | None = None
    decided_at: AwareDatetime = Field(default_factory=utcnow)
    reason: str | None = None
    data: Any = None
    """The resume data as given (JSON), kept so an idempotent tool can be retried."""
    cancelled: bool = False
    """On a declined question: the person called it off (MCP's ``cancel``) rather
    than refused to answer (``decline``)."""
    args: dict[str, Any] | None = None
    """On an approval of edited arguments: the arguments as edited (validated, JSON);
    the call runs with them instead of those it asked with."""
    response: str | None = None
    """On ``respond``: what the person answered for the tool, which the model gets as
    the call's result (the tool never runs)."""

    @property
    def event(self) -> AuditEvent:
        """The audit event this decision writes when it is claimed: a question called
        off is ``cancelled``, not ``declined``."""
        if self.action == "decline" and self.cancelled:
            return "cancelled"
        return _DECIDED[self.action]


class StopRequest(BaseModel):
    """Someone stopped a run (``Agent.stop_run``): who, and when."""

    model_config = ConfigDict(frozen=True)

    by: str | None = None
    at: AwareDatetime = Field(default_factory=utcnow)


class PendingCall(BaseModel):
    """A tool call waiting for a person: an approval or a suspension.

    In a supervisor's snapshot, a call surfaced from a sub-agent keeps the inner
    tool's id, name and args, plus ``via_call_id`` (the supervisor's own delegation
    call) and ``child_run_id`` (the sub-agent's run, which holds the call itself).
    ``state`` is ``executing`` from the moment a decision is claimed until its
    outcome is recorded: a crash in between leaves that visible.
    """

    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    """The validated arguments the call runs with; an approval is bound to exactly these."""
    answer: Any = None
    """On an approval asked after a person's answer: that answer (validated, JSON),
    shown with the arguments and given to the tool with them once approved."""
    kind: PendingKind
    agent_path: list[str]
    suspend_payload: Any = None
    resume_schema: dict[str, Any] | None = None
    created_at: AwareDatetime = Field(default_factory=utcnow)
    expires_at: AwareDatetime
    via_call_id: str | None = None
    child_run_id: str | None = None
    state: Literal["pending", "executing"] = "pending"
    decision: Decision | None = None
    requester: str | None = None
    requester_name: str | None = None
    """The requester's display name when the run started (its ``resource_name``)."""
    trace: dict[str, str] | None = None
    """The trace its run started in: a decision, whenever and wherever, continues it."""
    thread_id: str | None = None
    """The conversation its run belongs to (a policy may look at where it was asked)."""
    remark: str | None = None
    """What a standing approval said of it without approving it (a reviewer's caution)."""
    edited_by: str | None = None
    """Who asked it again with their edit (``Agent.ask_again``)."""
    idempotent: bool = False
    source: str | None = None
    """The tool source offering the tool (an MCP server's name), if not the agent itself."""
    approved: bool = False
    """A person already approved this call (a suspension after an approval)."""
    announced: bool = False
    """The top run's stream has announced it (each call is announced once)."""


class RunOptions(BaseModel):
    """The per-call options a run keeps across pauses."""

    require_tool_approval: bool | Literal["predicate"] = False
    max_steps: int = 10
    expires_in: timedelta | None = None
    """The longest a call of the run waits for a person, when shorter than its tool's."""


class RunSnapshot(BaseModel):
    """One agent run as persisted. Sub-agent runs have a parent."""

    version: Literal[1] = SNAPSHOT_VERSION
    run_id: str
    agent_path: list[str]
    root_run_id: str
    """The top run of the tree; stored JSON leaves it out for a top run (its own id)."""
    parent_run_id: str | None = None
    parent_call_id: str | None = None
    thread_id: str | None = None
    resource_id: str | None = None
    resource_name: str | None = None
    """The display name of ``resource_id`` (the requester) when the run started, where
    the request said it (``agents.provenance``): the audit log names them by it."""
    trace: dict[str, str] | None = None
    """The trace the run started in (W3C ``traceparent``), continued by whatever it
    does later, on any replica (``agents.tracing``)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """The caller's own JSON (the chat layer keeps where the run was asked)."""
    status: RunStatus = "running"
    stop: StopRequest | None = None
    """Someone stopped the run: whoever drives it ends it at its next step (``stopped``)."""
    remembered: bool = False
    """Its own messages are in its thread's history: the save that ended it added them
    (``Store.save_run``'s ``remember``), once."""
    history_pending: bool = False
    """Its thread's history is not in ``messages`` yet: the first save read it
    (``Store.start_run``) and the process that drives the run puts it first."""
    released: bool = False
    """The process driving it shut down and handed it back as last saved: crash
    recovery takes it at once, without waiting for its lease (``Agent.closing``).
    Any later save clears it."""
    options: RunOptions = Field(default_factory=RunOptions)
    history_len: int = 0
    messages: list[Message] = Field(default_factory=list)
    batch: list[ToolCallPart] = Field(default_factory=list)
    results: dict[str, ToolResultPart] = Field(default_factory=dict)
    started: list[str] = Field(default_factory=list)
    """Calls of ``batch`` whose tools were let run, saved before they ran: after a
    crash, the ones without a result may or may not have run (``Turns.drive``)."""
    pending: list[PendingCall] = Field(default_factory=list)
    decisions: dict[str, Decision] = Field(default_factory=dict)
    busy_children: list[str] = Field(default_factory=list)
    """Sub-agent runs being driven (by some process) that this run waits on."""
    steps: int = 0
    text: str = ""
    tool_calls: list[ToolCallPart] = Field(default_factory=list)
    tool_results: list[ToolResultPart] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    finish_reason: FinishReason | None = None
    error: str | None = None
    created_at: AwareDatetime = Field(default_factory=utcnow)
    updated_at: AwareDatetime = Field(default_factory=utcnow)
    revision: int = 0

    @model_validator(mode="before")
    @classmethod
    def _expand_last_calls(cls, data: Any) -> Any:
        """Fill in what ``dump_snapshot`` wrote as the last message's calls: ``batch``
        and ``tool_calls`` (while a run waits on its calls), and pending calls'
        ``args`` (when they are the model's, unchanged by validation)."""
        if not isinstance(data, dict):
            return data
        if "root_run_id" not in data and "run_id" in data:
            data = {**data, "root_run_id": data["run_id"]}
        pending = data.get("pending") or []
        bare = any(isinstance(p, dict) and "args" not in p for p in pending)
        if not bare and LAST_CALLS not in (data.get("batch"), data.get("tool_calls")):
            return data
        calls = _last_calls(data.get("messages") or [])
        data = {k: calls if v == LAST_CALLS else v for k, v in data.items()}
        if bare:
            args = {c.get("tool_call_id"): c.get("args") for c in calls}
            data["pending"] = [
                {**p, "args": args.get(p.get("tool_call_id"))}
                if isinstance(p, dict) and "args" not in p
                else p
                for p in pending
            ]
        return data

    @property
    def is_root(self) -> bool:
        """Whether this run was started by a caller rather than by a supervisor."""
        return self.parent_run_id is None

    def find_pending(self, tool_call_id: str) -> PendingCall | None:
        """The pending call with this id, if any."""
        return next((p for p in self.pending if p.tool_call_id == tool_call_id), None)

    @property
    def in_flight(self) -> bool:
        """Whether work is under way: a model turn, a tool, a decided call or a sub-agent.

        A crash now leaves the run to be recovered (see ``Agent.recover_interrupted``).
        A paused run with no call left waiting is waiting on a sub-agent's run.
        """
        if self.status == "running":
            return True
        if self.status != "paused":
            return False
        return (
            not self.pending
            or bool(self.busy_children)
            or any(p.state == "executing" for p in self.pending)
        )

    def next_expiry(self) -> datetime | None:
        """The earliest expiry among calls still waiting for a person."""
        due = [p.expires_at for p in self.pending if p.state == "pending"]
        return min(due) if due else None


@dataclass(frozen=True, kw_only=True)
class RunIndex:
    """What the stores index a run by, computed once from its snapshot (``run_index``).

    Stores persist these fields and never decide them: a store's query for the
    runs a thread waits on, the expiry sweep's and crash recovery's all read them.
    """

    thread_id: str | None
    paused: bool
    """A top-level run paused for a person: listed under its thread."""
    expires_at: datetime | None
    """When the first of a paused run's pending calls expires (``None`` unless paused)."""
    in_flight: bool
    """A top-level run with work under way, which a crash would leave to recover."""
    created_at: datetime

    @property
    def live(self) -> bool:
        """A top-level run that waits for a person or works: listed under its thread
        (``Store.thread_runs``)."""
        return self.paused or self.in_flight


def run_index(snap: RunSnapshot) -> RunIndex:
    """How the stores index ``snap``."""
    paused = snap.is_root and snap.status == "paused"
    return RunIndex(
        thread_id=snap.thread_id,
        paused=paused,
        expires_at=snap.next_expiry() if paused else None,
        in_flight=snap.is_root and snap.in_flight,
        created_at=snap.created_at,
    )


class AuditEntry(BaseModel):
    """One line of the append-only audit log."""

    at: AwareDatetime = Field(default_factory=utcnow)
    event: AuditEvent | str
    """One of the runtime's ``AuditEvent``; a caller sharing the log may add its own."""
    run_id: str
    thread_id: str | None = None
    tool_call_id: str
    tool_name: str
    args: dict[str, Any] = Field(default_factory=dict)
    kind: PendingKind | None = None
    requester: str | None = None
    requester_name: str | None = None
    """The requester's display name when the entry was written (``requester`` is the id)."""
    actor: str | None = None
    actor_name: str | None = None
    """The actor's display name when the entry was written (``actor`` is the id, or a
    quorum's ids joined by commas: their names then, likewise)."""
    via: str | None = None
    """The platform or client the event came through (``agents.provenance``)."""
    reason: str | None = None
    previous_args: dict[str, Any] | None = None
    """On ``edited``: the arguments before the edit (``args`` are after)."""
    result: str | None = None
    """On ``executed`` / ``failed``: the start of the tool's result, or its error."""
    digest: str | None = None
    """``sha256:<hex>`` of the whole of what ``result`` starts (a tool's result), or of
    the file loaded (``policy_loaded``, ``config_loaded``)."""
    where: str | None = None
    """On ``shown``: where the card went (a thread, a channel, a person's DMs)."""
    signature: str | None = None
    """On ``checkpoint``: the signature of the chain's head before it (``agents.chain``)."""
    chain: int | None = None
    """Which chain the entry is in, on a store with more than one (a Redis Cluster's
    groups); set by the store (``agents.chain``)."""
    seq: int | None = None
    """The entry's place in its chain, from 1; set by the store."""
    prev: str | None = None
    """The hash of the entry before it in its chain; set by the store."""
    hash: str | None = None
    """SHA-256 of the entry's canonical JSON without it; set by the store."""


SNAPSHOT_ADAPTER: TypeAdapter[RunSnapshot] = TypeAdapter(RunSnapshot)
AUDIT_ADAPTER: TypeAdapter[AuditEntry] = TypeAdapter(AuditEntry)


def _constant_defaults(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON of each optional field's default, where the default is a constant."""
    found: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if info.is_required() or info.default_factory is utcnow or name == "version":
            continue  # a time of creation is never "the default"; the version is always said
        default = info.get_default(call_default_factory=True)
        found[name] = default.model_dump(mode="json") if isinstance(default, BaseModel) else default
    return found


_RUN_DEFAULTS = _constant_defaults(RunSnapshot)
_CALL_DEFAULTS = _constant_defaults(PendingCall)


def _pruned(data: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in defaults or defaults[k] != v}


def dump_snapshot(snapshot: RunSnapshot) -> str:
    """Serialize a snapshot to JSON, leaving out fields that hold their default.

    About a third smaller for a paused run (every store keeps one per pause);
    ``load_snapshot`` fills them in again, and the calls a paused run waits on,
    its ``batch`` and ``tool_calls``, point at the last message's instead of
    repeating them, as do its pending calls' arguments where they are the same,
    and a top run leaves out its ``root_run_id`` (its own id). Parts keep their
    ``kind``: it is what tells them apart.
    """
    data = _pruned(SNAPSHOT_ADAPTER.dump_python(snapshot, mode="json"), _RUN_DEFAULTS)
    if data["root_run_id"] == data["run_id"]:
        del data["root_run_id"]
    last = _last_calls(data.get("messages") or [])
    if "pending" in data:
        asked = {c["tool_call_id"]: c["args"] for c in last}
        data["pending"] = [_pending_json(call, asked) for call in data["pending"]]
    for name in ("batch", "tool_calls"):
        if last and data.get(name) == last:
            data[name] = LAST_CALLS  # the same calls once, not three times
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


LAST_CALLS: Final = "last-message"
"""In stored JSON: ``batch`` or ``tool_calls`` equal to the last message's tool calls."""


def _pending_json(call: dict[str, Any], asked: dict[str, Any]) -> dict[str, Any]:
    """A pending call's stored JSON: defaults left out, and its arguments too when they
    are exactly those of the last message's call with its id (the model's, validated)."""
    kept = _pruned(call, _CALL_DEFAULTS)
    if call["tool_call_id"] in asked and asked[call["tool_call_id"]] == call["args"]:
        del kept["args"]
    return kept


def _last_calls(messages: list[Any]) -> list[Any]:
    """The tool-call parts of the last message, as JSON (from a dump or stored JSON)."""
    if not messages or not isinstance(messages[-1], dict):
        return []
    return [p for p in messages[-1].get("parts", []) if p.get("kind") == "tool-call"]


def load_snapshot(data: str | bytes) -> RunSnapshot:
    """Parse a snapshot from JSON (raises on an unknown version)."""
    return SNAPSHOT_ADAPTER.validate_json(data)


def next_revision(snapshot: RunSnapshot) -> tuple[RunSnapshot, str]:
    """What a store's ``save_run`` keeps: the snapshot one revision on, and its JSON.

    The copy is parsed back from that JSON, so it shares nothing with the
    caller's snapshot (which goes on changing); a third of a deep copy's cost.
    """
    data = dump_snapshot(
        snapshot.model_copy(update={"revision": snapshot.revision + 1, "updated_at": utcnow()})
    )
    return load_snapshot(data), data
