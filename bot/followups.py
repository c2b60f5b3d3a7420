"""The conversation goes on while a card waits: what a follow-up's turn is told of the
calls still waiting in its thread, and which answers then say what they answer.

A message in a thread where a call waits is a new turn of the conversation
(``Replies.stream_for``). Its model is told what waits (``notes``: the request, the
call, who asked), since a paused run is not in the thread's history until it ends.
Each run it talked over is noted (``talked_over``), so that run's answer, which comes
later and below other answers, starts by naming its request (``about``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Final, Protocol

from agents import Agent, PendingInfo, RunNotFoundError, RunSnapshot

from . import texts
from .chat_state import NoteState, RecordState
from .compose import args_line
from .outcome import clipped

log = logging.getLogger(__name__)

TALKED_OVER_FOR: Final = timedelta(days=1)
"""How long after its last call's expiry a talked-over run is remembered as one (its
answer comes when that call is decided, so before the call expires, or right after)."""
NOTE_TIME: Final = "%Y-%m-%d %H:%M UTC"
"""How a waiting note dates itself."""
NOTE_ARGS: Final = 300
"""The longest arguments line a waiting note gives the model."""

_NOTES = re.compile(r"\A\s*(?:\[[^\n]*\]\s*\n)+")
"""Bracketed lines the chat layer puts before a request (what the person looks at, what
waits): context for the model, not the person's words."""


class FollowUpState(NoteState, RecordState, Protocol):
    """Where talked-over runs are noted (a note, taken by the answer that names it)."""


def request_text(run: RunSnapshot) -> str:
    """The words that started ``run``: its first own user message, without the context
    lines put before it, on one line."""
    own = run.messages[run.history_len :] if not run.history_pending else run.messages
    first = next((m.text for m in own if m.role == "user" and m.text), "")
    return " ".join(_NOTES.sub("", first).split())


def talked_over_key(run_id: str) -> str:
    """Where the chat state notes that a run's thread went on while it waited."""
    return f"talked-over:{run_id}"


class FollowUps:
    """Follow-ups while calls wait in a thread.

    Args:
        agent: The root agent, whose waiting runs a follow-up is told of.
        chat: Where talked-over runs are noted.
    """

    def __init__(self, agent: Agent, chat: FollowUpState) -> None:
        self._agent = agent
        self._chat = chat

    async def notes(self, waiting: Sequence[PendingInfo]) -> list[str]:
        """What a new turn is told of the calls waiting in its thread (one line each),
        and, in the same step, the runs they belong to noted as talked over."""
        requests: dict[str, str] = {}
        lines: list[str] = []
        now = datetime.now(UTC)
        stamp = now.strftime(NOTE_TIME)
        for call in waiting:
            if call.run_id not in requests:
                requests[call.run_id] = await self._request(call.run_id)
                until = max(c.expires_at for c in waiting if c.run_id == call.run_id)
                ttl = (until - now + TALKED_OVER_FOR).total_seconds()
                await self._chat.set_note(
                    talked_over_key(call.run_id), requests[call.run_id], ttl=ttl
                )
            request = clipped(requests[call.run_id], texts.REQUEST_SHOWN)
            requester = call.requester or texts.SOMEONE
            if call.kind == "approval":
                args = clipped(args_line(call.args), NOTE_ARGS)
                lines.append(
                    texts.WAITING_NOTE.format(
                        now=stamp,
                        tool=call.tool_name,
                        args=args,
                        requester=requester,
                        request=request,
                    )
                )
            else:
                lines.append(
                    texts.WAITING_QUESTION_NOTE.format(
                        now=stamp, tool=call.tool_name, requester=requester, request=request
                    )
                )
        return lines

    async def about(self, run_id: str) -> str | None:
        """The request a run's answer names first: the run's words, when its thread went
        on while it waited (once: the note is taken); ``None`` when it did not (its answer
        follows its request), or when the chat state cannot say (the answer goes on)."""
        try:
            request = await self._chat.take_note(talked_over_key(run_id))
        except Exception as exc:
            log.warning("could not read whether run %s was talked over: %s", run_id, exc)
            return None
        return clipped(request, texts.REQUEST_SHOWN) if request else None

    async def _request(self, run_id: str) -> str:
        try:
            return request_text(await self._agent.get_run(run_id))
        except RunNotFoundError:
            return ""
