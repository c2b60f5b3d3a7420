"""Jobs due later for one waiting call, kept in the chat state (``TimerState``) and
each handed to exactly one process when due: a reminder, an escalation, and posting
again a card or question whose post failed (``Housekeeping.send_reminders``)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import TypeAdapter

from agents import PendingInfo

from .chat_state import TimerState, ask_of
from .policy import EffectiveRule

log = logging.getLogger(__name__)

REPOST_FIRST = 30.0
REPOST_MOST = 900.0
"""A card or question whose post failed is posted again after 30 s, 1 min, 2 min...
at most 15 min apart, for as long as its call waits."""


@dataclass(frozen=True, kw_only=True)
class Timer:
    """A job due for one waiting call: a reminder, an escalation, or posting again a
    card or question whose post failed (``attempt``: how many posts failed so far)."""

    kind: Literal["remind", "escalate", "repost"]
    run_id: str
    tool_call_id: str
    attempt: int = 0

    def key(self, ask: str) -> str:
        return f"{self.kind}:{self.run_id}:{ask}"


TIMER: TypeAdapter[Timer] = TypeAdapter(Timer)


async def set_timers(chat: TimerState, rule: EffectiveRule, info: PendingInfo) -> None:
    """The reminder and the escalation ``rule`` asks for, if still ahead (a card shown
    again keeps what already went out)."""
    now = datetime.now(UTC)
    timers: tuple[tuple[Literal["remind", "escalate"], timedelta | None], ...] = (
        ("remind", rule.remind_after),
        ("escalate", rule.escalate_after),
    )
    for kind, after in timers:
        if after is None or info.created_at + after <= now:
            continue
        job = Timer(kind=kind, run_id=info.run_id, tool_call_id=info.tool_call_id)
        due = (info.created_at + after).timestamp()
        await chat.set_timer(job.key(ask_of(info)), due, TIMER.dump_json(job).decode())


async def post_later(chat: TimerState, info: PendingInfo, attempt: int) -> None:
    """Post a call's card or question again later: it must not wait unseen."""
    job = Timer(kind="repost", run_id=info.run_id, tool_call_id=info.tool_call_id, attempt=attempt)
    due = time.time() + min(REPOST_MOST, REPOST_FIRST * 2**attempt)
    try:
        await chat.set_timer(job.key(ask_of(info)), due, TIMER.dump_json(job).decode())
    except Exception:
        log.exception("could not keep %s/%s to post later", info.run_id, info.tool_call_id)
