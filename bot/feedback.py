"""People's 👍 / 👎 on the bot's answers, kept in the audit log beside what they rate."""

from __future__ import annotations

from typing import Final

from agents import Agent, AuditEntry, RunNotFoundError

from . import texts
from .metrics import Metrics
from .types import Text, ThreadKey

FEEDBACK: Final = "feedback"
"""The audit event of a person's 👍 / 👎 on an answer (``result``: the rating)."""
FEEDBACK_HELPFUL: Final = "helpful"
FEEDBACK_UNHELPFUL: Final = "unhelpful"


class Feedback:
    """Keeps each rating once per person, rating and answer.

    Args:
        agent: The root agent, whose runs are rated and whose audit log keeps the ratings.
        metrics: Where ratings are counted.
    """

    def __init__(self, *, agent: Agent, metrics: Metrics) -> None:
        self._agent = agent
        self._metrics = metrics

    async def rate(self, thread: ThreadKey, user_id: str, run_id: str, *, helpful: bool) -> Text:
        """Keep ``user_id``'s rating of a run's answer in ``thread`` (a run of another
        thread, or none, is unknown); what to tell them."""
        try:
            snap = await self._agent.get_run(run_id)
        except RunNotFoundError:
            return (texts.FEEDBACK_UNKNOWN,)
        if snap.thread_id != thread.id:
            return (texts.FEEDBACK_UNKNOWN,)
        rating = FEEDBACK_HELPFUL if helpful else FEEDBACK_UNHELPFUL
        given = await self._agent.audit(run_id=run_id)
        if any(e.event == FEEDBACK and e.actor == user_id and e.result == rating for e in given):
            return (texts.FEEDBACK_THANKS,)
        await self._agent.record(
            AuditEntry(
                event=FEEDBACK,
                run_id=run_id,
                thread_id=thread.id,
                tool_call_id="",
                tool_name="",
                requester=snap.resource_id,
                actor=user_id,
                result=rating,
            )
        )
        self._metrics.feedback.labels(rating=rating).inc()
        return (texts.FEEDBACK_THANKS,)
