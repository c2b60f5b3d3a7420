"""Run segments as people see them: an agent's stream driven to its end, posting what
it brings (the answer, live where the platform can; cards, questions, errors; each
tool call as a step), with a status while it works.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Final

from agents import (
    AgentStream,
    ErrorChunk,
    FinishChunk,
    PendingInfo,
    TextDeltaChunk,
    ToolCallApprovalChunk,
    ToolCallChunk,
    ToolCallGrantedChunk,
    ToolCallSuspendedChunk,
    ToolErrorChunk,
    ToolResultChunk,
)

from . import texts
from .answer import Answer
from .metrics import Metrics
from .policy import POLICY_ACTOR, ApprovalPolicy
from .reviewer import REVIEWER_ACTOR
from .types import Messenger, Notice, Reply, Text, ThreadKey, naming
from .views import error_mark, failure_notice

if TYPE_CHECKING:
    from .presenter import Presenter

log = logging.getLogger(__name__)

STEP_PEOPLE: Final = 3
"""The most approvers a waiting step names (then "and 2 more")."""
STEP_DETAIL: Final = 300
"""The longest error a failed step shows."""


class Segments:
    """Drives run segments to their end through a presenter.

    Args:
        presenter: How views reach people.
        agent_id: The top agent: only its own words are the answer.
        policy: Whose approval a waiting step names.
        metrics: Runs finished and failed are counted here.
    """

    def __init__(
        self, presenter: Presenter, *, agent_id: str, policy: ApprovalPolicy, metrics: Metrics
    ) -> None:
        self._presenter = presenter
        self._top = (agent_id,)
        self._policy = policy
        self._metrics = metrics

    async def consume(
        self,
        thread: ThreadKey,
        messenger: Messenger,
        stream: AgentStream,
        *,
        requester: str | None = None,
        about: str | None = None,
        cut_since: datetime | None = None,
    ) -> None:
        """Drive a run segment to its end, posting cards, questions, errors and the answer
        (live, with its tool steps, where the platform can: ``Answer``).

        ``requester``: who asked (a live answer in a channel is addressed to them).
        ``about``: the request the answer names first (the run waited for a person while
        its thread went on: ``CardPlace.about``). ``cut_since``: the run is taken over
        from a process that died, perhaps while it wrote the answer live, since then; the
        answer is posted whole, its first part into that unfinished live message where
        it is found (``Presenter.finish_cut``), so it does not show twice.
        """
        to = self._presenter.people.who(thread, requester) if requester else None
        cut = cut_since

        async def post(reply: Reply) -> None:
            nonlocal cut
            since, cut = cut, None  # only the first part can complete a cut message
            if since is None or not await self._presenter.finish_cut(
                messenger, thread, reply, since=since
            ):
                await self._presenter.say(messenger, thread, reply)

        answer = Answer(messenger, thread, to, post, live=cut_since is None)
        failure: Notice | None = None
        held: list[PendingInfo] = []
        """Calls the policy lets share one card, waiting for the rest of their turn's."""
        lead = texts.ANSWER_ABOUT.format(request=about) if about else None
        await self._presenter.status(messenger, thread, texts.THINKING)
        try:
            async for chunk in stream:
                if isinstance(chunk, TextDeltaChunk):
                    if chunk.agent_path == self._top:
                        if lead is not None:
                            await answer.write(lead)
                            lead = None
                        await answer.write(chunk.text)
                    continue
                answer.step_ended()
                info = chunk.payload if isinstance(chunk, ToolCallApprovalChunk) else None
                if info is not None and self._policy.rule(info.tool_name, info).batch:
                    # Shown with the others its turn asks for, once they are all here.
                    await self._waiting(answer, thread, info)
                    await answer.pause(stop=stream.run_id)
                    held.append(info)
                    continue
                await self._show_held(messenger, thread, held)
                if isinstance(chunk, ToolCallChunk | ToolResultChunk | ToolErrorChunk):
                    await self._step(answer, chunk)
                    if isinstance(chunk, ToolErrorChunk) and chunk.declined_by is not None:
                        # Declined without a card: the thread hears why, and from whom.
                        await answer.pause()
                        said = texts.NEVER_RAN.format(tool=chunk.tool_name)
                        who = self._presenter.people.who(thread, chunk.declined_by)
                        await self._presenter.say(messenger, thread, Notice(text=said, also=(who,)))
                elif isinstance(chunk, ToolCallApprovalChunk | ToolCallSuspendedChunk):
                    # The text so far introduces the card: keep it above the card.
                    await self._waiting(answer, thread, chunk.payload)
                    await answer.pause(stop=stream.run_id)
                    await self._presenter.show_pending(messenger, thread, chunk.payload)
                elif isinstance(chunk, ToolCallGrantedChunk):
                    if chunk.granted_by.startswith(POLICY_ACTOR):
                        continue  # a tier that needs no person: it runs like any tool
                    await answer.pause()
                    if chunk.granted_by.startswith(REVIEWER_ACTOR):
                        said = texts.REVIEWED_RUN.format(tool=chunk.tool_name)
                        await self._presenter.say(messenger, thread, Notice(text=said))
                        continue
                    text = texts.GRANTED_RUN.format(tool=chunk.tool_name)
                    granter = self._presenter.people.who(thread, chunk.granted_by)
                    notice = Notice(
                        text=text, also=(granter,), revoke=(stream.run_id, chunk.tool_call_id)
                    )
                    await self._presenter.say(messenger, thread, notice)
                elif isinstance(chunk, ErrorChunk):
                    if chunk.agent_path != self._top:
                        # A sub-agent's failure is its supervisor's tool result to handle.
                        log.info("sub-agent %s failed: %s", chunk.agent_path, chunk.error)
                        continue
                    await answer.pause()
                    self._metrics.runs_failed.inc()
                    # Said at the finish, once the failure is on record: a crash before
                    # leaves the run to crash recovery, which asks the model again; one
                    # after leaves the notice for the message's catch-up to find.
                    failure = failure_notice(chunk.error)
                elif isinstance(chunk, FinishChunk):
                    if len(chunk.agent_path) == 1 and chunk.finish_reason != "suspended":
                        self._presenter.settle(stream.run_id)
                    if chunk.agent_path != self._top:
                        continue
                    # A stopped answer ends where it was cut off: nothing to rate.
                    done = chunk.finish_reason not in ("suspended", "error", "stopped")
                    await answer.close(feedback=stream.run_id if done else None)
                    if done:
                        self._metrics.runs_finished.inc()
                    if chunk.finish_reason != "suspended":
                        self._metrics.used(chunk.usage)  # a run's total, once it is over
                    if failure is not None:
                        mark = error_mark(stream.run_id)
                        await self._presenter.say(messenger, thread, failure, mark=mark)
                    # A model that stops for its own reasons must not leave the thread silent.
                    why = texts.FINISH_NOTES.get(chunk.finish_reason)
                    if why is not None:
                        await self._presenter.say(messenger, thread, Notice(text=why))
            await self._show_held(messenger, thread, held)
        except Exception:
            log.exception("run %s failed while streaming in %s", stream.run_id, thread.id)
            self._metrics.runs_failed.inc()
            await answer.close()
            await self._presenter.say(messenger, thread, Notice(text=texts.INTERNAL_ERROR))
        finally:
            await answer.close()
            await self._presenter.status(messenger, thread, None)

    async def _show_held(
        self, messenger: Messenger, thread: ThreadKey, held: list[PendingInfo]
    ) -> None:
        """Post the calls held for one card: several together, a single one on its own."""
        if len(held) > 1:
            await self._presenter.show_batch(messenger, thread, list(held))
        elif held:
            await self._presenter.show_pending(messenger, thread, held[0])
        held.clear()

    async def _step(
        self, answer: Answer, chunk: ToolCallChunk | ToolResultChunk | ToolErrorChunk
    ) -> None:
        """A tool call's step: in progress once asked for, then complete or failed."""
        title = step_title(chunk.agent_path, chunk.tool_name)
        if isinstance(chunk, ToolCallChunk):
            await answer.step(chunk.tool_call_id, title, "in_progress")
        elif isinstance(chunk, ToolResultChunk):
            await answer.step(chunk.tool_call_id, title, "complete")
        else:
            await answer.step(chunk.tool_call_id, title, "error", (chunk.error[:STEP_DETAIL],))

    async def _waiting(self, answer: Answer, thread: ThreadKey, info: PendingInfo) -> None:
        """A call that waits, as its step says: for whose approval, or for an answer."""
        title = step_title(info.agent_path, info.tool_name)
        if info.kind != "approval":
            await answer.step(info.tool_call_id, title, "pending", (texts.STEP_QUESTION,))
            return
        names = sorted(self._policy.deciders_of(info))
        if not names:
            detail: Text = (texts.STEP_APPROVAL,)
        else:
            shown = tuple(self._presenter.people.who(thread, user) for user in names[:STEP_PEOPLE])
            more = len(names) - len(shown)
            detail = naming(texts.STEP_APPROVAL_FROM, shown)
            if more:
                detail += (texts.STEP_MORE.format(count=more),)
        await answer.step(info.tool_call_id, title, "pending", detail)


def step_title(agent_path: tuple[str, ...], tool_name: str) -> str:
    """A step's title: the tool, after the sub-agents that run it (``deploy › deploy_service``)."""
    return " › ".join((*agent_path[1:], tool_name))
