"""Snapshots the store tests save: a paused root run with one pending approval."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, Literal

from agents.messages import Message, ToolCallPart
from agents.snapshot import AuditEntry, PendingCall, RunSnapshot, utcnow


def paused_run(
    *,
    run_id: str | None = None,
    thread_id: str | None = "slack:T1:C1:1700000000.000100",
    created_at: datetime | None = None,
    expires_at: datetime | None = None,
    parent_run_id: str | None = None,
    args: dict[str, Any] | None = None,
    state: Literal["pending", "executing"] = "pending",
) -> RunSnapshot:
    """A run paused on one approval of ``refund(order_id, amount)``."""
    run_id = run_id or f"run-{uuid.uuid4().hex}"
    created_at = created_at or utcnow()
    args = args if args is not None else {"order_id": "A-1001", "amount": 250}
    call = ToolCallPart(tool_call_id=f"call-{run_id}", tool_name="refund", args=args)
    return RunSnapshot(
        run_id=run_id,
        agent_path=["support"],
        root_run_id=parent_run_id or run_id,
        parent_run_id=parent_run_id,
        parent_call_id="call-parent" if parent_run_id else None,
        thread_id=thread_id,
        status="paused",
        messages=[
            Message.user("Refund order A-1001, it arrived broken."),
            Message(role="assistant", parts=[call]),
        ],
        batch=[call],
        pending=[
            PendingCall(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                args=args,
                kind="approval",
                agent_path=["support"],
                created_at=created_at,
                expires_at=expires_at or created_at + timedelta(hours=1),
                state=state,
                requester="U123",
            )
        ],
        steps=1,
        created_at=created_at,
        updated_at=created_at,
    )


def unlinked(entries: list[AuditEntry]) -> list[AuditEntry]:
    """Audit entries as read back, without their place in the chain the store gave them
    (to compare with the entries written)."""
    return [e.model_copy(update=dict.fromkeys(("chain", "seq", "prev", "hash"))) for e in entries]
