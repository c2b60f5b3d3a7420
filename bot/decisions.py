"""Decisions on cards: clicks, the approval policy, quorum votes, and what follows.

A click is checked against the pending call and the policy, then decided in
the runtime (an atomic claim: exactly one decision wins across replicas). A
quorum card collects votes in the chat state under the card's lock; the vote
that reaches the quorum decides. The card is updated for everyone and the run
continues in the background, in the thread's order. Locks: ``CONCURRENCY.md``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic import TypeAdapter

from agents import (
    Agent,
    AgentStream,
    AlreadyDecidedError,
    ArgsInvalidError,
    AuditEntry,
    CallExpiredError,
    Decision,
    PendingInfo,
    ResumeDataInvalidError,
    RunChangedError,
    RunNotFoundError,
    RunNotPausedError,
    ToolCallNotPendingError,
)

from . import messages
from .chat_state import CardPlace, ChatState, ask_of, grant_key
from .metrics import DecisionOutcome, Metrics
from .outcome import SETTLED, card_outcome, changes_text, same_args
from .policy import ApprovalPolicy, parse_duration
from .presenter import Presenter, scope_of
from .tasks import KeyedLocks, TaskTracker
from .types import (
    ApprovalCard,
    CardStatus,
    Click,
    ClickResult,
    InboxDecision,
    Messenger,
    Notice,
    Person,
    Prompt,
    PromptField,
    RecentOutcome,
    Text,
    ThreadKey,
    naming,
    tool_label,
)
from .views import edit_fields, edit_form, form_answer, prompt, thread_of
from .votes import VOTED, audit_vote

log = logging.getLogger(__name__)

RECENT_DECISIONS: Final = 10
"""How many of a person's latest decisions their inbox lists (kept per person)."""
RECENT_DECISION = TypeAdapter(InboxDecision)
"""JSON of one kept decision (the chat state's ``push_recent``)."""


def recent_key(scope: str, user_id: str) -> str:
    """Where a person's latest decisions in a workspace are kept."""
    return f"decided:{scope}{user_id}"


_QUESTION_STATUS: dict[str, Literal["answered", "declined", "cancelled"]] = {
    "answer": "answered",
    "decline": "declined",
    "cancel": "cancelled",
}


class Decisions:
    """Takes clicks on approval cards and carries out what they decide.

    Args:
        agent: The root agent, whose runtime decides.
        policy: Who may decide what, and how many must approve.
        chat: Votes and card locks.
        presenter: How cards and answers reach people.
        tasks: Where the work a decision unlocks runs.
        threads: The per-thread locks that keep a thread's replies in order.
        metrics: Click outcomes are counted here.
    """

    def __init__(
        self,
        *,
        agent: Agent,
        policy: ApprovalPolicy,
        chat: ChatState,
        presenter: Presenter,
        tasks: TaskTracker,
        threads: KeyedLocks,
        metrics: Metrics,
    ) -> None:
        self._agent = agent
        self._policy = policy
        self._chat = chat
        self._presenter = presenter
        self._tasks = tasks
        self._threads = threads
        self._metrics = metrics

    async def on_click(self, click: Click) -> ClickResult:
        """Decide on a card now; a failure is logged and the clicker told to try again."""
        try:
            return await self.decide(click)
        except Exception:
            log.exception("click on %s/%s failed", click.run_id, click.tool_call_id)
            return ClickResult(accepted=False, said=(messages.CLICK_UNAVAILABLE,))

    async def decide(self, click: Click) -> ClickResult:
        """Decide on a card now; update it and continue the run in the background.

        Raises whatever the store raises (an outage): the caller retries.
        """
        self._metrics.clicks.inc()
        self._presenter.remember_name(click.thread, click.user_id, click.user_name)
        if click.action == "revoke":
            return await self._revoke(click)
        return await self._decide(click)

    async def _located(self, click: Click) -> Click | None:
        """A click on a card away from its run's thread (an approvers' channel, a direct
        message, an inbox), as a click in that thread (``Click.where`` says where it was);
        ``None`` when the run is not one of that workspace's, or is unknown.

        Only within one workspace of one platform: people's ids mean nothing elsewhere.
        Whether the clicker may decide is the policy's to say, as for any click.
        """
        if click.where is not None:
            return None
        try:
            snap = await self._agent.get_run(click.run_id)
        except RunNotFoundError:
            return None
        origin = thread_of(snap.metadata)
        if origin is None or origin.id != snap.thread_id or origin == click.thread:
            return None
        if (origin.platform, origin.workspace) != (click.thread.platform, click.thread.workspace):
            return None
        return replace(click, thread=origin, where=click.thread)

    async def check(self, click: Click) -> Text | None:
        """Why this click would be refused, or ``None``; changes nothing.

        For adapters that ask for more before deciding (a reason dialog):
        a refusal is better said before someone types a reason.
        """
        _, _, refusal = await self._check(click)
        return refusal[0] if refusal else None

    async def edit_form(self, click: Click) -> Prompt | Text:
        """The form to edit a card's arguments, or why editing is refused."""
        _, call, refusal = await self._check(click)
        if call is None:
            assert refusal is not None
            return refusal[0]
        fields = self._edit_fields(call, self._policy.quorum(call.tool_name))
        if not fields:
            return (messages.EDIT_NOT_OFFERED,)
        return edit_form(call, fields)

    def _edit_fields(self, call: PendingInfo, quorum: int) -> tuple[PromptField, ...]:
        """The fields an edit of ``call`` changes: none with a quorum (the votes were
        for the arguments shown), an earlier answer, or arguments a form cannot hold."""
        schema = self._agent.input_schema(call)
        if schema is None or quorum > 1 or call.answer is not None:
            return ()
        return edit_fields(call, schema)

    async def question_form(self, click: Click) -> Prompt | Text:
        """The question (as it reads now) a form answers, or why answering is refused."""
        _, call, refusal = await self._check(click)
        if call is None:
            assert refusal is not None
            return refusal[0]
        return prompt(call)

    async def card_now(self, click: Click) -> ApprovalCard | None:
        """The card ``click`` names as it reads now, whoever looks: pending (buttons
        for those the policy lets decide: ``ApprovalCard.deciders``), or how it was
        decided, or that it expired; ``None`` for a call unknown in that workspace."""
        click = await self._located(click) or click
        call = await self._waiting(click)
        card: ApprovalCard | None
        if call is not None:
            if call.kind != "approval":
                return None
            expired = call.expires_at <= datetime.now(UTC)
            status: CardStatus = "expired" if expired else "pending"
            card = self._presenter.card(click.thread, call, status=status)
        else:
            try:
                snap = await self._agent.get_run(click.run_id)
            except RunNotFoundError:
                return None
            if snap.thread_id != click.thread.id:
                return None
            card = await self._card_from_audit(click)
        if card is not None and click.where is not None:
            card = replace(card, requested_in=click.thread)
        return card

    async def _card_from_audit(self, click: Click) -> ApprovalCard | None:
        """A decided (or expired) call's card, from the audit log (it left the run)."""
        entries = await self._audit_of(click.run_id, click.tool_call_id)
        asked = next((e for e in reversed(entries) if e.event == "requested"), None)
        if asked is None or asked.kind != "approval":
            return None
        after = entries[entries.index(asked) + 1 :]
        ended = next((e for e in reversed(after) if _card_ending(e.event)), None)
        if ended is None:
            return None  # decided a moment ago, not on record yet: nothing to redraw
        status = _card_ending(ended.event)
        assert status is not None
        edited = next((e for e in after if e.event == "edited"), None)
        deciders = (ended.actor or "").split(",") if status != "expired" and ended.actor else []
        return ApprovalCard(
            run_id=click.run_id,
            tool_call_id=click.tool_call_id,
            tool_name=asked.tool_name,
            args=edited.args if edited is not None else asked.args,
            agent_path=(),
            requester=self._presenter.who(click.thread, asked.requester)
            if asked.requester
            else None,
            expires_at=ended.at,
            status=status,
            decided_by=tuple(self._presenter.who(click.thread, user) for user in deciders),
            reason=ended.reason,
            previous_args=edited.previous_args if edited is not None else None,
            edited_by=self._presenter.who(click.thread, edited.actor)
            if edited is not None and edited.actor
            else None,
        )

    async def _waiting(self, click: Click) -> PendingInfo | None:
        """The call a click names, while it waits in the click's thread (one run read)."""
        return await self._agent.waiting_call(
            click.run_id, click.tool_call_id, thread_id=click.thread.id
        )

    async def _check(
        self, click: Click
    ) -> tuple[Click, PendingInfo | None, tuple[Text, DecisionOutcome] | None]:
        """The pending call a click is about, or why it is refused (and how to count it).

        Also the click itself, as one in the run's own thread when it came from a card
        shown elsewhere (``_located``): what follows is done in that thread.
        """
        call = await self._waiting(click)
        if call is None and (located := await self._located(click)) is not None:
            return await self._check(located)
        if call is None:
            return click, None, (await self._why_not_pending(click), "stale")
        if call.kind != "approval" and click.action in ("approve", "edit", "grant"):
            return click, None, ((messages.CLICK_NOT_AN_APPROVAL,), "stale")
        if call.kind == "approval" and click.action in ("answer", "cancel"):
            return click, None, ((messages.CLICK_NOT_A_QUESTION,), "stale")
        if call.expires_at <= datetime.now(UTC):
            return click, None, ((messages.CLICK_EXPIRED,), "stale")
        outdated = await self._outdated(click, call)
        if outdated is not None:
            # The call may have been asked again (its arguments changed after an
            # approval): only its newest card decides, never one showing old ones.
            return click, None, ((outdated,), "stale")
        allowed = await self._presenter.deciders(click.thread, call)
        if call.kind == "suspension":
            declining = click.action != "answer"
            refusal = self._policy.question_refusal(
                call, click.user_id, declining=declining, allowed=allowed
            )
        else:
            action: Literal["approve", "decline"] = (
                "decline" if click.action == "decline" else "approve"
            )
            refusal = self._policy.check(
                call.tool_name,
                call.requester,
                click.user_id,
                action=action,
                allowed=allowed,
            )
        if refusal is not None:
            return click, None, ((refusal,), "refused")
        return click, call, None

    async def _outdated(self, click: Click, call: PendingInfo) -> str | None:
        """Why the clicked card does not show the call as it is asked now, or ``None``.

        The card's ask says, when its buttons carry it; else its message: one of the
        call's cards (a click away from the thread must be on a copy, or carry the
        ask, as an inbox's buttons do)."""
        if click.ask is not None:
            return None if click.ask == ask_of(call) else messages.CLICK_OUTDATED
        place = await self._presenter.card_place(call)
        ref = click.message_ref
        if click.where is not None:
            held = ref is not None and place is not None and place.holds(ref)
            return None if held else messages.CLICK_OTHER_THREAD
        if ref is None or place is None or place.holds(ref):
            return None
        return messages.CLICK_OUTDATED

    async def _decide(self, click: Click) -> ClickResult:
        click, call, refusal = await self._check(click)
        if call is None:
            assert refusal is not None
            return self._refuse(refusal[0], outcome=refusal[1])
        if call.kind == "suspension":
            return await self._settle_question(click, call)
        quorum = self._policy.quorum(call.tool_name)
        if click.action == "edit":
            if not self._edit_fields(call, quorum):
                return self._refuse(messages.EDIT_NOT_OFFERED, outcome="refused")
            return await self._carry_out(click, call)
        if click.action == "grant":
            offered = self._policy.rule(call.tool_name).grant_for if call.answer is None else ()
            if click.grant_for not in offered:
                return self._refuse(messages.GRANT_NOT_OFFERED, outcome="refused")
            return await self._carry_out(click, call)
        if quorum == 1:
            return await self._carry_out(click, call)
        # Votes and declines on a quorum card are serialized by a store lock, across
        # replicas: a vote's count and card update finish before the next click on
        # the card is looked at, so the last card shown is the latest state.
        async with self._chat.card_lock(call.run_id, ask_of(call)):
            # Look again under the lock: the vote that reached the quorum, or a
            # decline, may have decided the call since.
            click, call, refusal = await self._check(click)
            if call is None:
                assert refusal is not None
                return self._refuse(refusal[0], outcome=refusal[1])
            if click.action == "decline":
                return await self._carry_out(click, call)
            return await self._vote(click, call, quorum)

    async def _vote(self, click: Click, call: PendingInfo, quorum: int) -> ClickResult:
        """Count an allowed Approve towards the quorum (under the card's vote lock)."""
        votes = await self._chat.votes(call.run_id, ask_of(call))
        for person in votes:  # another replica may have heard the names
            self._presenter.remember_name(click.thread, person.id, person.name)
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
                await audit_vote(self._agent, click, call)
            result = await self._carry_out(click, call, voters=voters)
            if result.accepted and not voted:
                # Only a vote that decided is kept: a click that lost the decision
                # (it expired meanwhile) leaves the list as it was. By now the call
                # is decided, so the list is only a record: a failure is logged.
                try:
                    await self._chat.add_vote(call.run_id, ask_of(call), me)
                except Exception:
                    log.exception("could not record the deciding vote on %s", call.tool_call_id)
            return result
        await self._chat.add_vote(call.run_id, ask_of(call), me)
        await audit_vote(self._agent, click, call)
        self._metrics.decided("voted")
        self._keep_decided(click.thread, call, "voted", (click.user_id,))
        card = self._presenter.card(click.thread, call, approvals=voters)
        # Updated before the lock is released, so no later decision's card can be
        # overwritten by this one.
        await self._show(click, call, card)
        return _decided(click, card)

    def _keep_decided(
        self,
        thread: ThreadKey,
        call: PendingInfo,
        outcome: RecentOutcome,
        people: tuple[str, ...],
    ) -> None:
        """Add a decision to each decider's recent decisions (their inbox lists them), in
        the background: the decision stands by now, and the click need not wait for a
        record of it (a failure is logged)."""
        item = RECENT_DECISION.dump_json(
            InboxDecision(
                tool_name=call.tool_name, outcome=outcome, at=datetime.now(UTC), args=call.args
            )
        ).decode()
        scope = scope_of(thread)

        async def keep(person: str) -> None:
            await self._chat.push_recent(recent_key(scope, person), item, keep=RECENT_DECISIONS)

        for person in people:
            try:
                self._tasks.spawn(keep(person), name=f"recent-decision:{person}")
            except RuntimeError:  # shutting down: the decision stands, its record is lost
                log.warning("%s's decision on %s was not kept", person, call.tool_call_id)

    async def _show(self, click: Click, call: PendingInfo, card: ApprovalCard | Prompt) -> None:
        """Show a card's new state wherever it is (the clicked message, if it was never
        recorded)."""
        messenger = self._presenter.messenger(click.thread.platform)
        place = await self._presenter.card_place(call)
        if place is None and click.message_ref is not None:
            place = CardPlace(thread=click.place, ref=click.message_ref)
        if place is not None:
            await self._presenter.show_card(messenger, place, card)

    async def _carry_out(
        self, click: Click, call: PendingInfo, *, voters: tuple[str, ...] = ()
    ) -> ClickResult:
        """Approve or decline ``call`` in the runtime; the card and the run follow.

        ``voters`` are the user ids whose votes approve it, when a quorum does.
        """
        reason = (click.reason or "").strip() or None
        deciders = voters or (click.user_id,)
        # The runtime keeps one label per decision (the audit's actor); the people
        # themselves travel as values, and a quorum's voters are in the chat state.
        decided_by = ",".join(deciders)
        edited: dict[str, Any] | None = None
        if click.action == "edit":
            edited = form_answer(self._edit_fields(call, 1), click.values or {})
        if click.action in ("approve", "edit", "grant"):
            deciding = self._agent.approve_tool_call(
                run_id=call.run_id,
                tool_call_id=call.tool_call_id,
                decided_by=decided_by,
                args=edited,
            )
        else:
            deciding = self._agent.decline_tool_call(
                run_id=call.run_id,
                tool_call_id=call.tool_call_id,
                reason=reason,
                decided_by=decided_by,
            )
        stream = await self._decided(click, call, deciding)
        if isinstance(stream, ClickResult):
            return stream
        status: Literal["approved", "declined"] = (
            "declined" if click.action == "decline" else "approved"
        )
        self._metrics.decided(status)
        shown, before = call, None
        if edited is not None:
            # What runs is what the runtime validated (its types, its defaults); an edit
            # that changed nothing is an approval like any other.
            ran = await self._approved_args(call)
            if ran is not None and not same_args(call.args, ran):
                shown, before = replace(call, args=ran), call.args
        self._keep_decided(
            click.thread, shown, "edited" if before is not None else status, deciders
        )
        card = self._presenter.card(
            click.thread,
            shown,
            status=status,
            decided_by=deciders,
            reason=reason,
            approvals=voters,
            previous_args=before,
            edited_by=click.user_id if before is not None else None,
            granted_for=click.grant_for if click.action == "grant" else None,
        )
        if click.action == "grant" and click.grant_for is not None:
            await self._grant(click, call, click.grant_for)
        await self._follow(click, call, card, stream)
        return _decided(click, card)

    async def _settle_question(self, click: Click, call: PendingInfo) -> ClickResult:
        """Answer a question with its form, or decline or cancel it; the run follows."""
        if click.action == "answer":
            deciding = self._agent.resume_stream(
                form_answer(prompt(call).fields, click.values or {}),
                run_id=call.run_id,
                tool_call_id=call.tool_call_id,
                decided_by=click.user_id,
            )
        else:
            deciding = self._agent.decline_tool_call(
                run_id=call.run_id,
                tool_call_id=call.tool_call_id,
                decided_by=click.user_id,
                cancel=click.action == "cancel",
            )
        stream = await self._decided(click, call, deciding)
        if isinstance(stream, ClickResult):
            return stream
        status = _QUESTION_STATUS[click.action]
        self._metrics.decided(status)
        shown = self._presenter.settled(click.thread, call, status, click.user_id)
        await self._follow(click, call, shown, stream)
        return _decided(click, shown)

    async def _grant(self, click: Click, call: PendingInfo, duration: str) -> None:
        """Keep the standing approval a grant gives: later calls of this tool in this
        thread, by the same requester, run without a card until it lapses. The call
        itself is approved by now, so a failure to keep it is logged, not raised."""
        until = datetime.now(UTC) + parse_duration(duration)
        key = grant_key(call.requester, call.tool_name)
        try:
            await self._chat.set_grant(click.thread.id, key, until.timestamp(), click.user_id)
        except Exception:
            log.exception("could not keep the grant on %s in %s", call.tool_name, click.thread.id)

    async def _revoke(self, click: Click) -> ClickResult:
        """End the grant a call ran under (the End grant button on its notice): for its
        requester, whoever granted it, or anyone who may approve the tool."""
        entries = await self._audit_of(click.run_id, click.tool_call_id)
        granted = next((e for e in reversed(entries) if e.event == "granted"), None)
        if granted is None or granted.thread_id != click.thread.id:
            return self._refuse(messages.GRANT_UNKNOWN, outcome="stale")
        tool = granted.tool_name
        names = self._policy.deciders(tool, escalated=False)
        messenger = self._presenter.messenger_of(click.thread)
        allowed = await self._presenter.groups.expand(click.thread.platform, messenger, names)
        if allowed and click.user_id not in allowed | {granted.requester, granted.actor}:
            return self._refuse(messages.GRANT_NOT_YOURS.format(tool=tool), outcome="refused")
        key = grant_key(granted.requester, tool)
        if not await self._chat.revoke_grant(click.thread.id, key):
            return self._refuse(messages.GRANT_GONE.format(tool=tool), outcome="stale")
        notice = Notice(
            text=messages.GRANT_ENDED.format(tool=tool),
            to=self._presenter.who(click.thread, click.user_id),
        )
        messenger = self._presenter.messenger(click.thread.platform)
        await self._presenter.say(messenger, click.thread, notice)
        return ClickResult(accepted=True)

    async def _approved_args(self, call: PendingInfo) -> dict[str, Any] | None:
        """The arguments an approval of ``call`` runs with, as its decision keeps them."""
        try:
            decision = (await self._agent.get_run(call.run_id)).decisions.get(call.tool_call_id)
        except RunNotFoundError:
            return None
        return decision.args if decision is not None else None

    async def _decided(
        self, click: Click, call: PendingInfo, deciding: Awaitable[AgentStream]
    ) -> AgentStream | ClickResult:
        """The runtime's stream once it took the decision, or the refusal that says why not."""
        try:
            return await deciding
        except (ResumeDataInvalidError, ArgsInvalidError) as exc:
            template = (
                messages.EDIT_INVALID
                if isinstance(exc, ArgsInvalidError)
                else messages.FORM_INVALID
            )
            self._metrics.decided("refused")
            invalid = template.format(errors="; ".join(exc.errors))
            return ClickResult(accepted=False, said=(invalid,), retry=True)
        except AlreadyDecidedError as exc:
            decision = exc.decision
            decided = await self._already(click.thread, call.run_id, call.tool_call_id, decision)
            return self._refuse(decided, outcome="stale")
        except CallExpiredError:
            return self._refuse(messages.CLICK_EXPIRED, outcome="stale")
        except RunNotPausedError as exc:
            said = messages.CLICK_STOPPED if exc.status == "stopped" else messages.CLICK_UNKNOWN
            return self._refuse(said, outcome="stale")
        except (ToolCallNotPendingError, RunNotFoundError):
            return self._refuse(messages.CLICK_UNKNOWN, outcome="stale")
        except RunChangedError:
            return self._refuse(messages.CLICK_RACED, outcome="stale")

    async def _follow(
        self, click: Click, call: PendingInfo, shown: ApprovalCard | Prompt, stream: AgentStream
    ) -> None:
        """Update the clicked card (or question) and continue the run, in the background."""
        messenger = self._presenter.messenger(click.thread.platform)
        try:
            self._tasks.spawn(
                self._after_decision(click, call, messenger, shown, stream),
                name=f"decision:{call.run_id}",
            )
        except RuntimeError:
            # The decision stands; only this process is going away before carrying it out.
            log.error("run %s: decided during shutdown, not continued here", call.run_id)

    def _refuse(self, message: Text | str, *, outcome: DecisionOutcome) -> ClickResult:
        self._metrics.decided(outcome)
        return ClickResult(accepted=False, said=(message,) if isinstance(message, str) else message)

    async def _why_not_pending(self, click: Click) -> Text:
        """Explain a click on a call that no longer waits, naming who decided when known."""
        try:
            snap = await self._agent.get_run(click.run_id)
        except RunNotFoundError:
            return (messages.CLICK_UNKNOWN,)
        if snap.thread_id != click.thread.id:
            return (messages.CLICK_OTHER_THREAD,)
        call = snap.find_pending(click.tool_call_id)
        if call is not None and call.decision is not None:
            return await self._already(
                click.thread, click.run_id, click.tool_call_id, call.decision
            )
        # Once its outcome is recorded a call leaves the snapshot; the audit log remembers.
        entries = await self._audit_of(click.run_id, click.tool_call_id)
        # Decisions that did not take effect: each "superseded" cancels the latest
        # earlier decision by the same person.
        lost: Counter[str | None] = Counter()
        for i in range(len(entries) - 1, -1, -1):
            entry = entries[i]
            if entry.event == "superseded":
                lost[entry.actor] += 1
            elif entry.event == "expired":
                return (messages.CLICK_EXPIRED,)
            elif entry.event == "interrupted":
                return (messages.CLICK_INTERRUPTED,)
            elif entry.event == "stopped":
                return (messages.CLICK_STOPPED,)
            elif _by_person(entry.event) and lost[entry.actor]:
                lost[entry.actor] -= 1
            elif _by_person(entry.event):
                return self._decided_by(click.thread, entry.event, entry.actor, entries[:i])
        return (messages.CLICK_UNKNOWN,)

    async def _already(
        self, thread: ThreadKey, run_id: str, tool_call_id: str, decision: Decision
    ) -> Text:
        """ "Already approved by ..." for a click on a call decided just now."""
        entries = await self._audit_of(run_id, tool_call_id)
        return self._decided_by(thread, decision.event, decision.decided_by, entries)

    async def _audit_of(self, run_id: str, tool_call_id: str) -> list[AuditEntry]:
        entries = await self._agent.audit(run_id=run_id)
        return [e for e in entries if e.tool_call_id == tool_call_id]

    def _decided_by(
        self, thread: ThreadKey, event: str, decided_by: str | None, before: list[AuditEntry]
    ) -> Text:
        """Who decided (``event``: how), named: a quorum's voters are the votes logged
        since the call was (last) asked; anyone else decided alone."""
        if event == "expired":
            return (messages.CLICK_EXPIRED,)
        if decided_by is None:
            return (messages.CLICK_ALREADY_DECIDED_UNKNOWN,)
        voters: list[str] = []
        for entry in reversed(before):
            if entry.event == "requested":
                break
            if entry.event == VOTED and entry.actor and entry.actor not in voters:
                voters.insert(0, entry.actor)
        ids = voters if event == "approved" and voters else [decided_by]
        people = tuple(self._presenter.who(thread, user) for user in ids)
        settled = SETTLED.get(event)
        past = settled.past if settled is not None else messages.DECIDED
        return naming(messages.CLICK_ALREADY_DECIDED, people, action=past)

    async def _after_decision(
        self,
        click: Click,
        call: PendingInfo,
        messenger: Messenger,
        card: ApprovalCard | Prompt,
        stream: AgentStream,
    ) -> None:
        await self._show(click, call, card)
        async with self._threads.hold(click.thread.id):
            told = _decision_notice(click, call, card)
            if told is not None:
                # Above what the run does next, so the requester hears it first.
                requester, text = told
                to = self._presenter.who(click.thread, requester)
                await self._presenter.say(messenger, click.thread, Notice(text=text, to=to))
            await self._presenter.consume(click.thread, messenger, stream, requester=call.requester)


def _card_ending(event: str) -> CardStatus | None:
    """How a call's card reads once ``event`` settled it (``None``: it did not)."""
    settled = SETTLED.get(event)
    return settled.card if settled is not None else None


def _by_person(event: str) -> bool:
    """Whether ``event`` is a person's decision (named when someone clicks later)."""
    settled = SETTLED.get(event)
    return settled is not None and settled.by_person


def _decision_notice(
    click: Click, call: PendingInfo, card: ApprovalCard | Prompt
) -> tuple[str, str] | None:
    """Whom to tell that their card was decided, and what: whoever asked, when someone
    else approved or declined it (a question's answer, or one's own decision, needs none)."""
    if not isinstance(card, ApprovalCard) or card.status not in ("approved", "declined"):
        return None
    if call.requester is None or call.requester == click.user_id:
        return None
    tool = tool_label(card)
    outcome = card_outcome(card)
    if outcome is not None and outcome.changes:
        changes = changes_text(outcome.changes)
        text = messages.DECIDED_EDITED.format(tool=tool, changes=changes)
    elif card.status == "declined" and card.reason:
        text = messages.DECIDED_DECLINED_WHY.format(tool=tool, reason=card.reason)
    elif card.status == "declined":
        text = messages.DECIDED_DECLINED.format(tool=tool)
    elif card.granted_for:
        text = messages.DECIDED_GRANTED.format(tool=tool, duration=card.granted_for)
    else:
        text = messages.DECIDED_APPROVED.format(tool=tool)
    return call.requester, text


def _decided(click: Click, card: ApprovalCard | Prompt) -> ClickResult:
    """A click's accepted result: the card as it now reads where it was clicked (away
    from its thread, with a link to it)."""
    if click.where is not None and isinstance(card, ApprovalCard):
        card = replace(card, requested_in=click.thread)
    return ClickResult(accepted=True, card=card)
