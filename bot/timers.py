"""Jobs due later, kept in the chat state (``TimerState``) and each handed to exactly
one process when due (``Housekeeping.send_reminders``): for a waiting call, a
reminder, an escalation, and posting again its card or question whose post failed;
and any other post or update the platform could not take, kept as its stored view
(``Undelivered``) and made later."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import TypeAdapter

from agents import PendingInfo

from .chat_state import TimerState, ask_of
from .documents import dump_view
from .policy import EffectiveRule
from .types import MessageRef, ThreadKey, View

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

DELIVER = "deliver:"
"""Starts the key of an ``Undelivered`` post or update."""
DELIVER_ATTEMPTS = 12
"""Tries of a kept post or update after the first failed (about 2 h with the backoff):
then it is given up, with an error in the log."""


@dataclass(frozen=True, kw_only=True)
class Undelivered:
    """A post (or, with ``ref``, an update of that message) the platform could not
    take: the view as stored (``bot.documents``), for whichever process is due to make
    it; ``attempt``: the tries that failed so far."""

    thread: ThreadKey
    view: str
    ref: MessageRef | None = None
    attempt: int = 0


UNDELIVERED: TypeAdapter[Undelivered] = TypeAdapter(Undelivered)


def update_key(thread: ThreadKey, ref: MessageRef) -> str:
    """The key of a kept update of one message (one per message: the latest wins)."""
    return f"{DELIVER}{thread.id}:{sorted(ref.items())}"


async def deliver_later(
    chat: TimerState,
    thread: ThreadKey,
    view: View,
    *,
    ref: MessageRef | None = None,
    attempt: int = 0,
    due: float | None = None,
) -> None:
    """Keep a post or update the platform could not take, to make it later (``due``:
    at that time rather than after the backoff). An update replaces one kept for the
    same message: the latest view wins."""
    if attempt >= DELIVER_ATTEMPTS:
        log.error("gave up posting a %s to %s", type(view).__name__, thread.id)
        return
    key = update_key(thread, ref) if ref else f"{DELIVER}{uuid.uuid4().hex}"
    job = Undelivered(thread=thread, view=dump_view(view).decode(), ref=ref, attempt=attempt)
    if due is None:
        due = time.time() + min(REPOST_MOST, REPOST_FIRST * 2**attempt)
    try:
        await chat.set_timer(key, due, UNDELIVERED.dump_json(job).decode())
    except Exception:
        log.exception("could not keep a %s for %s to post later", type(view).__name__, thread.id)


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
