"""Building the chat-neutral views from the runtime's pending calls.

Also the run metadata the core keeps with each run: the thread it was asked in.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Any

from agents import PendingInfo

from . import messages
from .types import ApprovalCard, CardStatus, Person, Prompt, ThreadKey


def approval_card(
    info: PendingInfo,
    *,
    expires_at: datetime,
    status: CardStatus = "pending",
    requester: Person | None = None,
    decided_by: tuple[Person, ...] = (),
    reason: str | None = None,
    approvals: tuple[Person, ...] = (),
    quorum: int = 1,
) -> ApprovalCard:
    """The card for a call waiting for approval (or already decided).

    ``requester``, ``decided_by`` and ``approvals`` are how the card names those
    people; ``quorum`` is how many approvals the call needs.
    """
    return ApprovalCard(
        run_id=info.run_id,
        tool_call_id=info.tool_call_id,
        tool_name=info.tool_name,
        args=shown_args(info),
        agent_path=info.agent_path,
        requester=requester,
        expires_at=expires_at,
        status=status,
        decided_by=decided_by,
        reason=reason,
        approvals=approvals,
        quorum=quorum,
    )


def shown_args(info: PendingInfo) -> dict[str, Any]:
    """What a card shows runs: the arguments, and the fields of an earlier answer
    that the tool receives beside them (those naming an argument are in it)."""
    shown = dict(info.args)
    if isinstance(info.answer, dict):
        shown.update({k: v for k, v in info.answer.items() if k not in shown})
    elif info.answer is not None:  # a reply taken as it is (the tool has no resume schema)
        shown.setdefault(messages.ANSWER_FIELD, info.answer)
    return shown


def prompt(info: PendingInfo, *, error: str | None = None) -> Prompt:
    """The question of a suspended tool; ``fields`` are its ``resume_schema`` properties."""
    properties = (info.resume_schema or {}).get("properties", {})
    return Prompt(
        run_id=info.run_id,
        tool_call_id=info.tool_call_id,
        tool_name=info.tool_name,
        agent_path=info.agent_path,
        question=question_text(info),
        fields=tuple(properties),
        error=error,
    )


def question_text(info: PendingInfo) -> str:
    """A suspended tool's question: its payload's ``message``, else a readable rendering."""
    payload = info.suspend_payload
    fallback = messages.QUESTION_FALLBACK.format(tool=info.tool_name)
    if isinstance(payload, dict):
        message = payload.get("message")
        if isinstance(message, str) and message.strip():
            return message.strip()
        if payload:
            return "\n".join([fallback, *(f"• {k}: {_plain(v)}" for k, v in payload.items())])
    elif isinstance(payload, str) and payload.strip():
        return payload.strip()
    elif payload is not None:
        return f"{fallback}\n{_plain(payload)}"
    return fallback


def run_metadata(thread: ThreadKey) -> dict[str, Any]:
    """What the core keeps with a run: the thread it was asked in."""
    return {"thread": asdict(thread)}


def thread_of(metadata: dict[str, Any]) -> ThreadKey | None:
    """The thread a run's metadata names, if any."""
    data = metadata.get("thread")
    try:
        return ThreadKey(**data) if isinstance(data, dict) else None
    except TypeError:
        return None


class ReplyBuffer:
    """The top agent's text of one stream, with a paragraph break between model steps.

    Without the break, "Let me check." and "It is up." from two model turns
    would run together as "Let me check.It is up.".
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._new_step = False

    def add(self, text: str) -> None:
        """Append a text delta."""
        if self._new_step and self._parts:
            self._parts.append("\n\n")
        self._new_step = False
        self._parts.append(text)

    def step_ended(self) -> None:
        """Note that something other than text happened (a tool call, a result)."""
        self._new_step = True

    def take(self) -> str:
        """The text so far (stripped), emptying the buffer."""
        text = "".join(self._parts).strip()
        self._parts.clear()
        self._new_step = False
        return text


def _plain(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(str(v) for v in value)
    return json.dumps(value, ensure_ascii=False, default=str)
