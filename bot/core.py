"""The chat core: messages and clicks in, agent runs and views out.

Adapters call ``on_message`` and ``on_click``; the core decides what the agent
does and answers through the adapter's ``Messenger``. Acks never wait for the
agent: everything after a message's dedupe, and after a click's decision, runs
in tracked background tasks. Work on one thread is serialized (in this process)
so a thread's replies come out in the order people wrote.
"""

from __future__ import annotations

import logging
from typing import Literal

from agents import (
    AgentStream,
    AlreadyDecidedError,
    ApprovalExpiredError,
    PendingInfo,
    ResumeDataInvalidError,
    RunNotFoundError,
    RunNotPausedError,
    ToolCallNotPendingError,
)

from . import messages
from ._base import _now
from .housekeeping import Housekeeping
from .metrics import DecisionOutcome
from .types import (
    ApprovalCard,
    Click,
    ClickResult,
    IncomingMessage,
    MessageRef,
    Messenger,
    Notice,
    Person,
    Text,
    ThreadKey,
    naming,
)
from .views import prompt, run_metadata
from .votes import audit_vote

log = logging.getLogger(__name__)

_AUDIT_ACTIONS = {"approved": "approve", "declined": "decline", "resumed": "resume"}


class ChatBot(Housekeeping):
    """Routes chat messages and card clicks to an agent and posts what happens.

    Args:
        agent: The root agent; its store holds every paused run.
        policy: Who may decide what; by default anyone may, the requester included.
        dedupe_ttl: How long (seconds) a message's dedupe keys are remembered.
        interrupted_after: How long a decided call may run before a crash is assumed
            (another replica may still be running it until then).
    """

    # -- messages ---------------------------------------------------------------

    async def on_message(self, message: IncomingMessage) -> None:
        """Take a person's message: drop redeliveries, handle the rest in the background."""
        self.metrics.messages_received.inc()
        messenger = self.messenger(message.thread.platform)
        self._remember_name(message.user_id, message.user_name)
        if await self._is_duplicate(message):
            self.metrics.messages_duplicate.inc()
            log.debug("dropping a redelivered message in %s", message.thread.id)
            return
        if message.addressed:
            await self.following.follow(message.thread)
        self.tasks.spawn(
            self._handle_message(message, messenger), name=f"message:{message.thread.id}"
        )

    async def _is_duplicate(self, message: IncomingMessage) -> bool:
        # Record every key, not just up to the first hit: a later redelivery may
        # carry only one of them (one message delivered as two kinds of event).
        seen = False
        for key in message.dedupe_keys:
            try:
                seen |= await self.chat.seen_before(
                    f"dedupe:{message.thread.platform}:{key}", ttl=self.dedupe_ttl
                )
            except Exception:
                # A duplicate answer is better than a lost message.
                log.exception("dedupe check failed; handling the message anyway")
        return seen

    async def _handle_message(self, message: IncomingMessage, messenger: Messenger) -> None:
        thread = message.thread
        async with self._locks.hold(thread.id):
            try:
                stream = await self._stream_for(message, messenger)
            except Exception:
                log.exception("could not start work on a message in %s", thread.id)
                self.metrics.runs_failed.inc()
                await self._say(messenger, thread, Notice(text=messages.INTERNAL_ERROR))
                return
            if stream is not None:
                await self._consume(thread, messenger, stream)

    async def _stream_for(
        self, message: IncomingMessage, messenger: Messenger
    ) -> AgentStream | None:
        """Resume the thread's question, point at its card, or start a new run."""
        thread = message.thread
        waiting = await self._waiting(thread.id)
        questions = [p for p in waiting if p.kind == "suspension"]
        if questions:
            try:
                stream = await self.agent.stream(
                    message.text,
                    thread_id=thread.id,
                    resource_id=message.user_id,
                    auto_resume_suspended_tools=True,
                    metadata=run_metadata(thread),
                )
            except ResumeDataInvalidError as exc:
                asked = next((p for p in questions if p.tool_call_id == exc.tool_call_id), None)
                again = prompt(asked or questions[-1], error="; ".join(exc.errors))
                await self._say(messenger, thread, again)
                return None
            except (AlreadyDecidedError, ApprovalExpiredError, ToolCallNotPendingError):
                # Another replica took the answer first, or the question expired meanwhile.
                await self._say(messenger, thread, Notice(text=messages.QUESTION_GONE))
                return None
            if stream.run_id in {q.run_id for q in questions}:
                return stream
            # The question went away between the look and the answer: the runtime
            # would start a new run, which only a message addressed to the bot may do.
            if not message.addressed:
                return None
            self.metrics.runs_started.inc()
            return stream
        if not message.addressed:
            return None
        if waiting:
            notice = messages.APPROVAL_PENDING.format(tool=waiting[-1].tool_name)
            await self._say(messenger, thread, Notice(text=notice))
            return None
        self.metrics.runs_started.inc()
        return await self.agent.stream(
            message.text,
            thread_id=thread.id,
            resource_id=message.user_id,
            auto_resume_suspended_tools=False,
            metadata=run_metadata(thread),
        )

    async def _waiting(self, thread_id: str) -> list[PendingInfo]:
        now = _now()
        pending = await self.agent.list_suspended_runs(thread_id=thread_id)
        return [p for p in pending if p.expires_at > now]

    # -- clicks -----------------------------------------------------------------

    async def on_click(self, click: Click) -> ClickResult:
        """Decide on a card now; update it and continue the run in the background."""
        self.metrics.clicks.inc()
        self._remember_name(click.user_id, click.user_name)
        try:
            return await self._decide(click)
        except Exception:
            log.exception("click on %s/%s failed", click.run_id, click.tool_call_id)
            return ClickResult(accepted=False, said=(messages.CLICK_UNAVAILABLE,))

    async def check_click(self, click: Click) -> Text | None:
        """Why this click would be refused, or ``None``; changes nothing.

        For adapters that ask for more before deciding (a reason dialog):
        a refusal is better said before someone types a reason.
        """
        _, refusal = await self._check(click)
        return refusal[0] if refusal else None

    async def _check(
        self, click: Click
    ) -> tuple[PendingInfo | None, tuple[Text, DecisionOutcome] | None]:
        """The waiting call a click is about, or why it is refused (and how to count it)."""
        waiting = await self.agent.list_suspended_runs(thread_id=click.thread.id)
        call = next(
            (
                p
                for p in waiting
                if p.run_id == click.run_id and p.tool_call_id == click.tool_call_id
            ),
            None,
        )
        if call is None:
            return None, (await self._why_not_pending(click), "stale")
        if call.kind != "approval":
            return None, ((messages.CLICK_NOT_AN_APPROVAL,), "stale")
        if call.expires_at <= _now():
            return None, ((messages.CLICK_EXPIRED,), "stale")
        refusal = self.policy.check(
            call.tool_name, call.requester, click.user_id, action=click.action
        )
        if refusal is not None:
            return None, ((refusal,), "refused")
        return call, None

    async def _decide(self, click: Click) -> ClickResult:
        call, refusal = await self._check(click)
        if call is None:
            assert refusal is not None
            return self._refuse(refusal[0], outcome=refusal[1])
        quorum = self.policy.quorum(call.tool_name)
        if quorum == 1:
            return await self._carry_out(click, call)
        # Votes and declines on a quorum card are serialized by a store lock, across
        # replicas: a vote's count and card update finish before the next click on
        # the card is looked at, so the last card shown is the latest state.
        async with self.chat.card_lock(call.run_id, call.tool_call_id):
            # Look again under the lock: the vote that reached the quorum, or a
            # decline, may have decided the call since.
            call, refusal = await self._check(click)
            if call is None:
                assert refusal is not None
                return self._refuse(refusal[0], outcome=refusal[1])
            if click.action == "decline":
                return await self._carry_out(click, call)
            return await self._vote(click, call, quorum)

    async def _vote(self, click: Click, call: PendingInfo, quorum: int) -> ClickResult:
        """Count an allowed Approve towards the quorum (under the card's vote lock)."""
        votes = await self.chat.votes(call.run_id, call.tool_call_id)
        for person in votes:
            self._remember_name(person.id, person.name)  # another replica may have heard it
        voted = any(person.id == click.user_id for person in votes)
        if voted and len(votes) < quorum:
            more = quorum - len(votes)
            return self._refuse(messages.CLICK_ALREADY_VOTED.format(more=more), outcome="refused")
        me = Person(id=click.user_id, name=click.user_name)
        ballot = votes if voted else [*votes, me]
        voters = tuple(person.id for person in ballot)
        if len(ballot) >= quorum:
            if not voted:
                # Logged before the decision, so the audit reads "voted, ..., approved".
                await audit_vote(self.store, click, call)
            result = await self._carry_out(click, call, voters=voters)
            if result.accepted and not voted:
                # Only a vote that decided is kept: a click that lost the decision
                # (it expired meanwhile) leaves the list as it was. By now the call
                # is decided, so the list is only a record: a failure is logged.
                try:
                    await self.chat.add_vote(call.run_id, call.tool_call_id, me)
                except Exception:
                    log.exception("could not record the deciding vote on %s", call.tool_call_id)
            return result
        await self.chat.add_vote(call.run_id, call.tool_call_id, me)
        await audit_vote(self.store, click, call)
        self.metrics.decided("voted")
        card = self._card(call, approvals=voters)
        # Updated before the lock is released, so no later decision's card can be
        # overwritten by this one.
        ref = click.message_ref or await self._card_ref(call)
        if ref is not None:
            await self._update(self.messenger(click.thread.platform), click.thread, ref, card)
        return ClickResult(accepted=True, card=card)

    async def _carry_out(
        self, click: Click, call: PendingInfo, *, voters: tuple[str, ...] = ()
    ) -> ClickResult:
        """Approve or decline ``call`` in the runtime; the card and the run follow.

        ``voters`` are the user ids whose votes approve it, when a quorum does.
        """
        messenger = self.messenger(click.thread.platform)
        reason = (click.reason or "").strip() or None
        deciders = voters or (click.user_id,)
        # The runtime keeps one label per decision (the audit's actor); the people
        # themselves travel as values, and a quorum's voters are in the chat state.
        decided_by = ",".join(deciders)
        try:
            if click.action == "approve":
                stream = await self.agent.approve_tool_call(
                    run_id=call.run_id, tool_call_id=call.tool_call_id, decided_by=decided_by
                )
            else:
                stream = await self.agent.decline_tool_call(
                    run_id=call.run_id,
                    tool_call_id=call.tool_call_id,
                    reason=reason,
                    decided_by=decided_by,
                )
        except AlreadyDecidedError as exc:
            decided = await self._already(
                call.run_id, call.tool_call_id, exc.decision.action, exc.decision.decided_by
            )
            return self._refuse(decided, outcome="stale")
        except ApprovalExpiredError:
            return self._refuse(messages.CLICK_EXPIRED, outcome="stale")
        except (ToolCallNotPendingError, RunNotPausedError, RunNotFoundError):
            return self._refuse(messages.CLICK_UNKNOWN, outcome="stale")
        status: Literal["approved", "declined"] = (
            "approved" if click.action == "approve" else "declined"
        )
        self.metrics.decided(status)
        card = self._card(call, status=status, decided_by=deciders, reason=reason, approvals=voters)
        ref = click.message_ref or await self._card_ref(call)
        try:
            self.tasks.spawn(
                self._after_decision(click.thread, messenger, ref, card, stream),
                name=f"decision:{call.run_id}",
            )
        except RuntimeError:
            # The decision stands; only this process is going away before carrying it out.
            log.error("run %s: decided during shutdown, not continued here", call.run_id)
        return ClickResult(accepted=True, card=card)

    async def _card_ref(self, call: PendingInfo) -> MessageRef | None:
        place = await self._card_place(call.run_id, call.tool_call_id)
        return place.ref if place is not None else None

    def _refuse(self, message: Text | str, *, outcome: DecisionOutcome) -> ClickResult:
        self.metrics.decided(outcome)
        return ClickResult(accepted=False, said=(message,) if isinstance(message, str) else message)

    async def _why_not_pending(self, click: Click) -> Text:
        """Explain a click on a call that no longer waits, naming who decided when known."""
        try:
            snap = await self.agent.get_run(click.run_id)
        except RunNotFoundError:
            return (messages.CLICK_UNKNOWN,)
        if snap.thread_id != click.thread.id:
            return (messages.CLICK_OTHER_THREAD,)
        call = snap.find_pending(click.tool_call_id)
        if call is not None and call.decision is not None:
            decision = call.decision
            return await self._already(
                click.run_id, click.tool_call_id, decision.action, decision.decided_by
            )
        # Once its outcome is recorded a call leaves the snapshot; the audit log remembers.
        for entry in reversed(await self.store.list_audit(run_id=click.run_id)):
            if entry.tool_call_id != click.tool_call_id:
                continue
            if entry.event == "expired":
                return (messages.CLICK_EXPIRED,)
            if entry.event == "interrupted":
                return (messages.CLICK_INTERRUPTED,)
            if entry.event in _AUDIT_ACTIONS:
                action = _AUDIT_ACTIONS[entry.event]
                return await self._already(click.run_id, click.tool_call_id, action, entry.actor)
        return (messages.CLICK_UNKNOWN,)

    async def _already(
        self, run_id: str, tool_call_id: str, action: str, decided_by: str | None
    ) -> Text:
        """ "Already approved by ..." for a click on a decided call."""
        if action == "expire":
            return (messages.CLICK_EXPIRED,)
        if decided_by is None:
            return (messages.CLICK_ALREADY_DECIDED_UNKNOWN,)
        # A quorum's voters are kept as people; anyone else decided alone.
        people = await self.chat.votes(run_id, tool_call_id) if action == "approve" else []
        if not people:
            people = [self._who(decided_by)]
        past = messages.PAST_TENSE.get(action, messages.DECIDED)
        return naming(messages.CLICK_ALREADY_DECIDED, tuple(people), action=past)

    async def _after_decision(
        self,
        thread: ThreadKey,
        messenger: Messenger,
        ref: MessageRef | None,
        card: ApprovalCard,
        stream: AgentStream,
    ) -> None:
        if ref is not None:
            await self._update(messenger, thread, ref, card)
        async with self._locks.hold(thread.id):
            await self._consume(thread, messenger, stream)
