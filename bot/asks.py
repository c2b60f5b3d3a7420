"""What clients ask (``bot.service``), as its run says: requests, approvals, questions.

A client's request is a run of its peer agent asking for one call (``bot.clients``):
an approval's call is its tool, a question's is the client's ``ask`` tool, which
waits for a person's answer. What the run's record says (its decisions, its stop)
is what every replica answers.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Annotated, Any, Final, Literal

from jsonschema.exceptions import SchemaError
from pydantic import AnyHttpUrl, BaseModel, BeforeValidator, ConfigDict, Field, StrictStr

from agents import Decision, PendingCall, RunSnapshot, ToolCallPart, ToolResultPart
from agents.tools import schema_model

from .clients import Client, requested_call
from .policy import parse_duration

Status = Literal["pending", "approved", "declined", "expired", "cancelled"]
_NAME = r"^[A-Za-z0-9_-]{1,40}$"
_DECIDED: dict[str, Status] = {
    "approve": "approved",
    "decline": "declined",
    "expire": "expired",
    "resume": "approved",
    # Answered for by a person: the call did not run; their words are the reason.
    "respond": "declined",
}


class ServiceError(Exception):
    """A request the service refuses: ``status`` is the HTTP status it answers with,
    ``field`` the request's field at fault (for a 400)."""

    def __init__(self, status: int, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


def _duration(value: Any) -> timedelta | None:
    return None if value is None else parse_duration(value)


class ApprovalRequest(BaseModel):
    """``POST /v1/approvals``: the call a client asks its team to approve."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: Annotated[StrictStr, Field(pattern=_NAME)]
    args: dict[str, Any] = Field(default_factory=dict)
    summary: Annotated[StrictStr, Field(min_length=1, max_length=2000)] | None = None
    requested_by: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9._:@-]{1,64}$")] | None = None
    """The person the client works for (a platform user id): named on the card, and not
    their own approver unless the policy allows it."""
    channel: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9:@._-]{1,100}$")] | None = None
    thread: Annotated[StrictStr, Field(pattern=r"^[0-9.]{1,40}$")] | None = None
    """A thread of ``channel`` to ask in (Slack: its ``thread_ts``); else a new one."""
    expires_in: Annotated[timedelta | None, BeforeValidator(_duration)] = None
    callback_url: AnyHttpUrl | None = None


class Approval(BaseModel):
    """An approval as its client reads it (``GET /v1/approvals/{id}``)."""

    id: str
    status: Status
    tool: str
    args: dict[str, Any]
    """What was approved (edits included); while pending, what was asked."""
    requested_args: dict[str, Any]
    decided_by: str | None = None
    reason: str | None = None
    decided_at: datetime | None = None
    expires_at: datetime | None = None
    url: str
    links: dict[str, str] = Field(default_factory=dict)
    """While pending: each approver's decision page (user id → link, ``bot.links``)."""


APPROVAL: Final = "appr"
QUESTION_KIND: Final = "ques"
"""The kinds of request, which start their ids (``request_id``)."""


def request_id(client: Client, key: str, kind: str = APPROVAL) -> str:
    """The id of what ``client`` asks under idempotency ``key`` (``kind``: ``APPROVAL``
    or ``QUESTION_KIND``)."""
    digest = hashlib.sha256(f"{client.name}\0{kind}\0{key}".encode()).hexdigest()[:32]
    return f"{kind}_{digest}"


def call_id(request: str) -> str:
    """The id of the one call a request asks about (its run's)."""
    return f"call_{request}"


def pending_approval(approval: str, tool: str, args: dict[str, Any]) -> Approval:
    """An approval as it is asked, before anyone decided."""
    asked = dict(args)
    return Approval(
        id=approval,
        status="pending",
        tool=tool,
        args=asked,
        requested_args=asked,
        url=f"/v1/approvals/{approval}",
    )


def approval_of(snap: RunSnapshot) -> Approval:
    """An approval as its run says: pending until a decision is claimed (or the run
    stopped: cancelled)."""
    call = _call_of(snap)
    found = pending_approval(snap.run_id, call.tool_name if call else "", call.args if call else {})
    pending, decision = _state(snap, call)
    found.expires_at = pending.expires_at if pending is not None else None
    if decision is not None:
        status = _DECIDED[decision.action]
        return found.model_copy(
            update={
                "status": status,
                "args": decision.args if decision.args is not None else found.requested_args,
                "decided_by": decision.decided_by,
                "reason": decision.reason or decision.response,
                "decided_at": decision.decided_at,
            }
        )
    if snap.stop is not None:
        return found.model_copy(
            update={"status": "cancelled", "decided_by": snap.stop.by, "decided_at": snap.stop.at}
        )
    result = _result_of(snap, call.tool_call_id) if call is not None and pending is None else None
    if result is not None and result.is_error:
        # Declined without a card: someone said not to ask again in its thread.
        update = {"status": "declined", "reason": result.content, "decided_at": snap.updated_at}
        return found.model_copy(update=update)
    if result is not None:
        # Approved without a card: a grant standing for calls like it.
        return found.model_copy(update={"status": "approved", "decided_at": snap.updated_at})
    return found


def _state(
    snap: RunSnapshot, call: ToolCallPart | None
) -> tuple[PendingCall | None, Decision | None]:
    """The call's wait (while it waits) and its decision (once claimed), if any."""
    if call is None:
        return None, None
    return snap.find_pending(call.tool_call_id), snap.decisions.get(call.tool_call_id)


def _result_of(snap: RunSnapshot, tool_call_id: str) -> ToolResultPart | None:
    """The result a run has for one of its calls, if any."""
    found = [*snap.tool_results, *snap.results.values()]
    found += [result for message in snap.messages for result in message.tool_results]
    return next((r for r in found if r.tool_call_id == tool_call_id), None)


def _call_of(snap: RunSnapshot) -> ToolCallPart | None:
    """The call a client's run asks about: its request (the last in its messages: the
    thread's history comes first)."""
    for message in reversed(snap.messages):
        if message.role == "user":
            call = requested_call(message)
            if call is not None:
                return call
    return None


def check_answer_schema(schema: dict[str, Any]) -> None:
    """Refuse (400, ``schema``) an answer's schema no form can ask: it must be a JSON
    schema of an object with plain properties."""
    try:
        schema_model(schema)
    except SchemaError as exc:
        raise ServiceError(400, f"not a JSON schema: {exc.message}", field="schema") from None
    properties = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(properties, dict) or not properties:
        raise ServiceError(400, "an object with properties, one per answer field", field="schema")
    for name, spec in properties.items():
        if not isinstance(spec, dict):  # ``true``: anything, which no form can ask for
            raise ServiceError(400, f"{name}: a form field needs a schema", field="schema")
        kind = spec.get("type")
        if kind not in ("string", "number", "integer", "boolean") and "enum" not in spec:
            raise ServiceError(
                400, f"{name}: a form asks for text, numbers, yes/no or choices", field="schema"
            )


QuestionStatus = Literal["pending", "answered", "declined", "expired", "cancelled"]
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "title": "Answer"}},
    "required": ["answer"],
}
"""What a question without a schema of its own asks for: one line of text."""


class QuestionRequest(BaseModel):
    """``POST /v1/questions``: what a client asks its team, and the answer's shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question: Annotated[StrictStr, Field(min_length=1, max_length=3000)]
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    """The JSON schema of the answer: an object whose properties the form asks for
    (default: one text ``answer``); a reply in the thread answers a single text one."""
    requested_by: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9._:@-]{1,64}$")] | None = None
    channel: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9:@._-]{1,100}$")] | None = None
    thread: Annotated[StrictStr, Field(pattern=r"^[0-9.]{1,40}$")] | None = None
    expires_in: Annotated[timedelta | None, BeforeValidator(_duration)] = None


class Question(BaseModel):
    """A question as its client reads it (``GET /v1/questions/{id}``)."""

    id: str
    status: QuestionStatus
    question: str
    answer: Any = None
    """The answer, valid against the question's schema, once ``answered``."""
    answered_by: str | None = None
    reason: str | None = None
    answered_at: datetime | None = None
    expires_at: datetime | None = None
    url: str


_ANSWERED: dict[str, QuestionStatus] = {
    "resume": "answered",
    "decline": "declined",
    "expire": "expired",
    "approve": "answered",
}


def pending_question(question: str, text: str) -> Question:
    """A question as it is asked, before anyone answered."""
    return Question(id=question, status="pending", question=text, url=f"/v1/questions/{question}")


def question_of(snap: RunSnapshot) -> Question:
    """A question as its run says: pending until answered (or declined, expired,
    withdrawn)."""
    call = _call_of(snap)
    found = pending_question(snap.run_id, str(call.args.get("question", "")) if call else "")
    pending, decision = _state(snap, call)
    found.expires_at = pending.expires_at if pending is not None else None
    if decision is not None:
        status = "cancelled" if decision.cancelled else _ANSWERED[decision.action]
        return found.model_copy(
            update={
                "status": status,
                "answer": decision.data if status == "answered" else None,
                "answered_by": decision.decided_by,
                "reason": decision.reason,
                "answered_at": decision.decided_at,
            }
        )
    if snap.stop is not None:
        return found.model_copy(
            update={"status": "cancelled", "answered_by": snap.stop.by, "answered_at": snap.stop.at}
        )
    return found
