"""The conversation goes on while a card waits: what a follow-up's turn is told of the
calls still waiting in its thread, and which answers then say what they answer.

A message in a thread where a call waits is a new turn of the conversation
(``Replies.stream_for``). Its model is told what waits (``notes``: the request, the
call, who asked), since a paused run is not in the thread's history until it ends.
Each waiting call's card place is marked with its run's request (``CardPlace.about``),
so the answer that comes once it is decided, below other answers, starts by naming
that request; the decision reads the place anyway, so this costs it nothing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Final

from agents import Agent, PendingInfo, RunNotFoundError, RunSnapshot

from . import texts
from .chat_state import CardState, ask_of
from .compose import args_line
from .outcome import clipped

log = logging.getLogger(__name__)

NOTE_TIME: Final = "%Y-%m-%d %H:%M UTC"
"""How a waiting note dates itself."""
NOTE_ARGS: Final = 300
"""The longest arguments line a waiting note gives the model."""

_NOTES = re.compile(r"\A\s*(?:\[[^\n]*\]\s*\n)+")
"""Bracketed lines the chat layer puts before a request (what the person looks at, what
waits): context for the model, not the person's words."""


def request_text(run: RunSnapshot) -> str:
    """The words that started ``run``: its first own user message, without the context
    lines put before it, on one line."""
    own = run.messages[run.history_len :] if not run.history_pending else run.messages
    first = next((m.text for m in own if m.role == "user" and m.text), "")
    return " ".join(_NOTES.sub("", first).split())


class FollowUps:
    """Follow-ups while calls wait in a thread.

    Args:
        agent: The root agent, whose waiting runs a follow-up is told of.
        chat: Where the waiting calls' cards are (marked with what their answers name).
    """

    def __init__(self, agent: Agent, chat: CardState) -> None:
        self._agent = agent
        self._chat = chat

    async def notes(self, waiting: Sequence[PendingInfo]) -> list[str]:
        """What a new turn is told of the calls waiting in its thread (one line each),
        and, in the same step, each call's card marked with its run's request."""
        requests: dict[str, str] = {}
        lines: list[str] = []
        stamp = datetime.now(UTC).strftime(NOTE_TIME)
        for call in waiting:
            if call.run_id not in requests:
                requests[call.run_id] = await self._request(call.run_id)
            request = clipped(requests[call.run_id], texts.REQUEST_SHOWN)
            await self._mark(call, request)
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

    async def _mark(self, call: PendingInfo, request: str) -> None:
        """Mark a waiting call's card with what its answer names first (a card not
        posted, or a failing store, leaves that answer without: it is said anyway)."""
        try:
            place = await self._chat.card_of(call.run_id, ask_of(call))
            if place is not None and place.about != request:
                await self._chat.set_card(call.run_id, ask_of(call), replace(place, about=request))
        except Exception as exc:
            log.warning("could not mark the card of %s as talked over: %s", call.run_id, exc)

    async def _request(self, run_id: str) -> str:
        try:
            return request_text(await self._agent.get_run(run_id))
        except RunNotFoundError:
            return ""
