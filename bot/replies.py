"""The reply path: what a person's message in a thread becomes.

A message answers the question waiting in its thread (the one it names, by run and
call), leaves it (``cancel``), ends the thread's grants (``revoke``), or starts a new
turn of the thread's conversation, even while a card waits there (its model is told
what waits: ``FollowUps``). Text never decides a card: a message that only says
"approve" is told to use the card. ``ChatBot`` calls it under the thread's lock.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from datetime import UTC, datetime

from agents import (
    Agent,
    AgentStream,
    AlreadyDecidedError,
    CallExpiredError,
    PendingInfo,
    ResumeDataInvalidError,
    RunChangedError,
    RunNotFoundError,
    RunNotPausedError,
    ToolCallNotPendingError,
)

from . import texts
from .followups import FollowUps
from .grants import Grants
from .metrics import Metrics
from .policy import ApprovalPolicy
from .presenter import Presenter
from .traces import waited
from .types import IncomingMessage, Messenger, Notice, Reply, ThreadKey, tool_label
from .views import answer_mark, error_mark, failure_notice, notice_mark, prompt, run_metadata

log = logging.getLogger(__name__)

_GONE = (
    AlreadyDecidedError,
    CallExpiredError,
    ToolCallNotPendingError,
    RunNotPausedError,
    RunNotFoundError,
)
"""What answering or leaving a question raises once it no longer waits (decided, expired,
its request stopped or gone)."""


class Replies:
    """Turns messages into runs, answers and notices.

    Args:
        agent: The root agent, whose runs a message starts or resumes.
        policy: Who may answer or leave a question.
        presenter: How answers and notices reach people.
        grants: The thread's grants (``revoke``).
        followups: What a new turn is told of what waits in its thread.
        metrics: Runs started and questions cancelled are counted here.
    """

    def __init__(
        self,
        *,
        agent: Agent,
        policy: ApprovalPolicy,
        presenter: Presenter,
        grants: Grants,
        followups: FollowUps,
        metrics: Metrics,
    ) -> None:
        self._agent = agent
        self._followups = followups
        self._policy = policy
        self._presenter = presenter
        self._grants = grants
        self._metrics = metrics

    async def stream_for(
        self, message: IncomingMessage, messenger: Messenger, run_id: str, *, retry: bool = False
    ) -> AgentStream | None:
        """Resume the thread's question, point at its card, or start a new run.

        ``retry``: this message may have been worked on before, so a question
        found answered may have been answered by it: nothing is said then; and a notice
        it was told is looked for first (``_say_about``), so it is not told twice.
        """
        thread = message.thread
        pending = await self.pending(thread.id)
        if " ".join(message.text.lower().split()) in texts.REVOKE_WORDS:
            await self._grants.end_in_thread(thread, messenger, message.user_id)
            return None
        questions = [p for p in pending if p.kind == "suspension"]
        live = [q for q in questions if q.expires_at > datetime.now(UTC)]
        if live and not _new_request(message, live[-1]):
            return await self._answer(message, messenger, live[-1], run_id=run_id, retry=retry)
        if not message.addressed:
            return None
        approvals = [p for p in pending if p.kind == "approval"]
        if approvals and _said(message.text) in texts.APPROVAL_WORDS:
            # Someone deciding by text: only the card decides, and they are told so.
            notice = texts.APPROVAL_PENDING.format(tool=approvals[-1].tool_name)
            await self._say_about(
                messenger, thread, notice, approvals[-1], cause=run_id, retry=retry
            )
            return None
        # A new turn, while anything else here waits: its model is told what waits.
        notes = await self._followups.notes(pending) if pending else []
        self._metrics.runs_started.inc()
        return await self._agent.stream(
            _run_input(message, notes),
            thread_id=thread.id,
            resource_id=message.user_id,
            auto_resume_suspended_tools=False,
            metadata=run_metadata(thread),
            run_id=run_id,
        )

    async def _answer(
        self,
        message: IncomingMessage,
        messenger: Messenger,
        question: PendingInfo,
        *,
        run_id: str,
        retry: bool,
    ) -> AgentStream | None:
        """Take a reply as the answer to the thread's newest question (or, on a cancel
        word, leave it); a reply that is clearly no answer is told so."""
        thread = message.thread
        waiting = _not_an_answer(message, question)
        if waiting is not None:
            # A new request, by all signs: never taken as the answer without asking.
            await self._say_about(messenger, thread, waiting, question, cause=run_id, retry=retry)
            return None
        if _cancels(message.text, question):
            return await self._cancel_question(
                message, messenger, question, run_id=run_id, retry=retry
            )
        refused = self._policy.question_refusal(
            question,
            message.user_id,
            reply=True,
            allowed=await self._presenter.people.deciders(thread, question),
        )
        if refused is not None:
            await self._presenter.tell(thread, message.user_id, (refused,))
            return None
        answering = self._agent.answer_question(
            message.text,
            thread_id=thread.id,
            resource_id=message.user_id,
            run_id=question.run_id,
            tool_call_id=question.tool_call_id,
        )
        try:
            answered = await self._taken(
                answering, messenger, thread, question, run_id=run_id, retry=retry
            )
        except ResumeDataInvalidError as exc:
            # Asked again below the reply: that message is the question's card now.
            # Its mark names this message's work, which a retry looks for first.
            error = "; ".join(exc.errors)
            await self._presenter.show_pending(
                messenger, thread, question, error, look_first=retry, cause=run_id
            )
            return None
        if answered is not None:
            # Counted and traced as an answer given in the question's form is.
            waited(question, tier=None, outcome="answered", decided_by=message.user_id)
            self._metrics.decided("answered")
            await self._presenter.show_settled(
                messenger, thread, question, "answered", message.user_id
            )
        return answered

    async def _taken(
        self,
        deciding: Awaitable[AgentStream | None],
        messenger: Messenger,
        thread: ThreadKey,
        question: PendingInfo,
        *,
        run_id: str,
        retry: bool,
    ) -> AgentStream | None:
        """The run's stream once a reply answered (or left) ``question``; ``None`` once
        the thread is told why not: it no longer waits (another replica took an answer
        first, it expired, or its request was stopped, meanwhile), or someone changed the
        request at the same moment."""
        try:
            stream = await deciding
        except _GONE:
            stream = None
        except RunChangedError:
            raced = texts.ANSWER_RACED
            await self._say_about(messenger, thread, raced, question, cause=run_id, retry=retry)
            return None
        if stream is None and not retry:
            await self._presenter.say(messenger, thread, Notice(text=texts.QUESTION_GONE))
        return stream

    async def _cancel_question(
        self,
        message: IncomingMessage,
        messenger: Messenger,
        question: PendingInfo,
        *,
        run_id: str,
        retry: bool,
    ) -> AgentStream | None:
        """Leave a question on the words ``cancel``/``stop``: the tool hears it was cancelled."""
        thread = message.thread
        allowed = await self._presenter.people.deciders(thread, question)
        refused = self._policy.question_refusal(
            question, message.user_id, declining=True, allowed=allowed
        )
        if refused is not None:
            await self._presenter.tell(thread, message.user_id, (refused,))
            return None
        leaving = self._agent.decline_tool_call(
            run_id=question.run_id,
            tool_call_id=question.tool_call_id,
            decided_by=message.user_id,
            cancel=True,
        )
        stream = await self._taken(leaving, messenger, thread, question, run_id=run_id, retry=retry)
        if stream is None:
            return None
        waited(question, tier=None, outcome="cancelled", decided_by=message.user_id)
        self._metrics.decided("cancelled")
        await self._presenter.show_settled(
            messenger, thread, question, "cancelled", message.user_id
        )
        return stream

    async def _say_about(
        self,
        messenger: Messenger,
        thread: ThreadKey,
        text: str,
        about: PendingInfo,
        *,
        cause: str,
        retry: bool,
    ) -> None:
        """Say a notice about a waiting call in reply to the message whose work is
        ``cause``. On a ``retry`` it is looked for first: the process that died may have
        said it before the message's work was recorded done (it came after the call
        was asked, so it is looked for from then)."""
        mark = notice_mark(about, cause=cause)
        since = about.created_at if retry else None
        if await self._presenter.find(messenger, thread, mark, since=since) is None:
            await self._presenter.say(messenger, thread, Notice(text=text), mark=mark)

    async def catch_up(self, thread: ThreadKey, messenger: Messenger, run_id: str) -> None:
        """Show what a run started by a process that died may not have shown yet.

        That process may have died between a post and recording it: a card or question
        not recorded as posted is looked for first (by its mark) and posted only when
        missing; found, its place is recorded, so it is updated as ever. A finished
        run's answer likewise: found, nothing is said again (the note after it, if any,
        went out right after it); and a failed run's error (its text, if any, went out
        before it). Where the platform cannot tell, it is posted again: better twice
        than never. A run still in flight is crash recovery's, once its heartbeat lapsed.
        """
        log.info("the run of %s was started by a process that stopped; catching up", run_id)
        run = await self._agent.get_run(run_id)
        if run.status == "paused":
            for info in await self.pending(thread.id):
                if info.run_id == run_id and await self._presenter.card_place(info) is None:
                    await self._presenter.show_pending(messenger, thread, info, look_first=True)
        elif run.status in ("finished", "failed"):
            failed = run.status == "failed"
            answered = not failed and bool(run.text)
            if answered or failed:
                # The run's last post: found, everything before it went out too.
                mark = error_mark(run_id) if failed else answer_mark(run_id)
                found = await self._presenter.find(messenger, thread, mark, since=run.created_at)
                if found is not None:
                    return
            if run.text:
                # A finished run's answer as the run itself ends it: rated, and marked;
                # into the live message it was being written into, where one was cut.
                answer = Reply(text=run.text, feedback=run_id if answered else None)
                since = run.created_at
                if not await self._presenter.finish_cut(messenger, thread, answer, since=since):
                    await self._presenter.say(messenger, thread, answer)
            if failed:
                error = failure_notice(run.error or texts.INTERNAL_ERROR)
                await self._presenter.say(messenger, thread, error, mark=error_mark(run_id))
            elif (why := texts.FINISH_NOTES.get(run.finish_reason or "")) is not None:
                await self._presenter.say(messenger, thread, Notice(text=why))

    async def pending(self, thread_id: str) -> list[PendingInfo]:
        """The calls waiting in a thread that have not expired, oldest first."""
        now = datetime.now(UTC)
        pending = await self._agent.list_suspended_runs(thread_id=thread_id)
        return [p for p in pending if p.expires_at > now]


NEW_REQUEST_WORDS = 3
"""A reply to a choice question with at least this many words, none of them a choice,
is a new request (``_not_an_answer``)."""


def _new_request(message: IncomingMessage, question: PendingInfo) -> bool:
    """Whether a message is clearly a new request to the bot rather than the answer to
    the question waiting in its thread: it mentions the bot (where a plain reply would
    do) and is not one of the question's choices. It starts a new turn; the question
    stays open."""
    if not message.mentioned:
        return False
    return _said(message.text) not in _choices(question)


def _not_an_answer(message: IncomingMessage, question: PendingInfo) -> str | None:
    """What to say when a reply is clearly not the question's answer: the question says
    what its answers are (a choice of a few) and the reply is a sentence that is none of
    them."""
    asked = prompt(question)
    if len(asked.fields) != 1 or asked.fields[0].kind != "choice":
        return None
    choices = asked.fields[0].choices
    said = _said(message.text)
    if said in {c.lower() for c in choices} or len(said.split()) < NEW_REQUEST_WORDS:
        return None  # an answer, or a short slip: asked again as usual if it does not fit
    if said in texts.CANCEL_WORDS:
        return None
    tool = tool_label(asked)
    return texts.QUESTION_WAITS_CHOICE.format(tool=tool, choices=", ".join(choices))


def _said(text: str) -> str:
    """A message's words as compared with fixed words (lower case, single spaces, no
    closing punctuation)."""
    return " ".join(text.lower().strip(" .!").split())


def _cancels(text: str, question: PendingInfo) -> bool:
    """Whether a reply only says to leave the question (and is not one of its choices)."""
    said = _said(text)
    if said not in texts.CANCEL_WORDS:
        return False
    return said not in _choices(question)


def _choices(question: PendingInfo) -> set[str]:
    """The answers a question offers as choices, as compared with what people say."""
    return {c.lower() for f in prompt(question).fields for c in f.choices}


def _run_input(message: IncomingMessage, notes: list[str]) -> str:
    """What a new run is given: the message's text, after what the person is looking at
    and what waits in the thread (``notes``)."""
    context = list(notes)
    if message.context:
        context.insert(0, texts.LOOKING_AT.format(context=message.context))
    if not context:
        return message.text
    return "\n".join(context) + f"\n\n{message.text}"
