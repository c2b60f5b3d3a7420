"""Decisions on cards: clicks, the approval policy, quorum votes, and what follows.

A click is checked against the pending call and the policy, then decided in
the runtime (an atomic claim: exactly one decision wins across replicas). A
quorum card collects votes in the chat state under the card's lock; the vote
that reaches the quorum decides. The card is updated for everyone and the run
continues in the background, in the thread's order. Locks: ``CONCURRENCY.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeVar

from agents import (
    Agent,
    AgentStream,
    AlreadyDecidedError,
    ArgsInvalidError,
    CallExpiredError,
    PendingInfo,
    ResumeDataInvalidError,
    RunChangedError,
    RunNotFoundError,
    RunNotPausedError,
    ToolCallNotPendingError,
)
from agents.provenance import arriving, current

from . import texts
from .audit import Record
from .chat_state import CardPlace, CardState, ask_of
from .grants import Grants
from .inbox import Inboxes
from .metrics import DecisionOutcome, Metrics
from .outcome import decision_notice
from .policy import ApprovalPolicy
from .presenter import Presenter
from .records import REFUSED, call_entry
from .tasks import KeyedLocks, TaskTracker
from .tiers import allows
from .traces import click_span, waited
from .types import (
    ApprovalCard,
    BatchCard,
    CardStatus,
    Click,
    ClickAction,
    ClickResult,
    Messenger,
    Notice,
    Person,
    Prompt,
    PromptField,
    Text,
    plain_text,
)
from .views import (
    RESPONSE_INPUT,
    edit_fields,
    edit_form,
    form_answer,
    prompt,
    respond_prompt,
    thread_of,
)
from .votes import audit_vote, spanned

log = logging.getLogger(__name__)


Taken = TypeVar("Taken")

_CARD_STATUS: dict[str, Literal["approved", "declined", "responded"]] = {
    "decline": "declined",
    "never": "declined",
    "respond": "responded",
}
"""How a card reads after a click that decided it (any other: approved)."""
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
        inboxes: Where each decider's decision is kept for their approvals list.
        grants: Where grants are given and ended.
        tasks: Where the work a decision unlocks runs.
        threads: The per-thread locks that keep a thread's replies in order.
        metrics: Click outcomes are counted here.
    """

    def __init__(
        self,
        *,
        agent: Agent,
        policy: ApprovalPolicy,
        chat: CardState,
        presenter: Presenter,
        inboxes: Inboxes,
        grants: Grants,
        tasks: TaskTracker,
        threads: KeyedLocks,
        metrics: Metrics,
    ) -> None:
        self._agent = agent
        self._policy = policy
        self._chat = chat
        self._presenter = presenter
        self._inboxes = inboxes
        self._grants = grants
        self._record = Record(agent, presenter.people.who)
        self._tasks = tasks
        self._threads = threads
        self._metrics = metrics

    async def on_click(self, click: Click) -> ClickResult:
        """Decide on a card now; a failure is logged and the clicker told to try again."""
        try:
            return await self.decide(click)
        except Exception:
            log.exception("click on %s/%s failed", click.run_id, click.tool_call_id)
            return ClickResult(accepted=False, said=(texts.CLICK_UNAVAILABLE,))

    async def decide(self, click: Click) -> ClickResult:
        """Decide on a card now; update it and continue the run in the background.

        Raises whatever the store raises (an outage): the caller retries.
        """
        self._metrics.clicks.inc()
        self._presenter.people.remember_name(click.thread, click.user_id, click.user_name)
        if click.action == "revoke":
            refusal = await self._grants.end(click)
            if refusal is None:
                return ClickResult(accepted=True)
            return self._refuse(refusal[0], outcome=refusal[1])
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

    async def check(self, click: Click, *, made: bool = False) -> Text | None:
        """Why this click would be refused, or ``None``; ``made`` (a person made it):
        the policy's no is on record, else this changes nothing (``ChatBot.check_click``).
        """
        if made:
            return (await self._checked(click))[1]
        _, _, refusal = await self._check(click)
        return refusal[0] if refusal else None

    async def edit_form(self, click: Click) -> Prompt | Text:
        """The form to edit a card's arguments, or why editing is refused."""
        call, refusal = await self._checked(click)
        if call is None:
            assert refusal is not None
            return refusal
        fields = self._edit_fields(call, self._policy.quorum(call.tool_name, call))
        if not fields:
            return (texts.EDIT_NOT_OFFERED,)
        return edit_form(call, fields)

    async def respond_form(self, click: Click) -> Prompt | Text:
        """The form to answer in a tool's place, or why responding is refused."""
        call, refusal = await self._checked(replace(click, action="respond"))
        if call is None:
            assert refusal is not None
            return refusal
        if not self._policy.rule(call.tool_name, call).respond:
            return (texts.RESPOND_NOT_OFFERED,)
        return respond_prompt(call)

    def _edit_fields(self, call: PendingInfo, quorum: int) -> tuple[PromptField, ...]:
        """The fields an edit of ``call`` changes: none with a quorum (the votes were
        for the arguments shown), an earlier answer, or arguments a form cannot hold."""
        schema = self._agent.input_schema(call)
        if schema is None or quorum > 1 or call.answer is not None:
            return ()
        return edit_fields(call, schema)

    async def question_form(self, click: Click) -> Prompt | Text:
        """The question (as it reads now) a form answers, or why answering is refused."""
        call, refusal = await self._checked(click)
        if call is None:
            assert refusal is not None
            return refusal
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
            card = await self._record.card(click)
        if card is not None and click.where is not None:
            card = replace(card, requested_in=click.thread)
        return card

    async def _waiting(self, click: Click) -> PendingInfo | None:
        """The call a click names, while it waits in the click's thread (one run read)."""
        return await self._agent.waiting_call(
            click.run_id, click.tool_call_id, thread_id=click.thread.id
        )

    async def _checked(self, click: Click) -> tuple[PendingInfo | None, Text | None]:
        """``_check`` before a form opens: the call, or why the click is refused; the
        policy's no is on record (who, and why) as for a decision it refuses."""
        click, call, refusal = await self._check(click)
        if refusal is None:
            return call, None
        try:
            await self._said_no(click, None, refusal)
        except Exception:  # the person still hears why; only the record is missing
            log.exception("could not put the refusal of %s's click on record", click.user_id)
        return None, refusal[0]

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
            return click, None, (await self._record.why_not_pending(click), "stale")
        if call.kind != "approval" and click.action in _APPROVAL_ONLY:
            return click, None, ((texts.CLICK_NOT_AN_APPROVAL,), "stale")
        if call.kind == "approval" and click.action in ("answer", "cancel"):
            return click, None, ((texts.CLICK_NOT_A_QUESTION,), "stale")
        if call.expires_at <= datetime.now(UTC):
            return click, None, ((texts.CLICK_EXPIRED,), "stale")
        outdated = await self._outdated(click, call)
        if outdated is not None:
            # The call may have been asked again (its arguments changed after an
            # approval): only its newest card decides, never one showing old ones.
            return click, None, ((outdated,), "stale")
        allowed = await self._presenter.people.deciders(click.thread, call)
        if call.kind == "suspension":
            declining = click.action != "answer"
            refusal = self._policy.question_refusal(
                call, click.user_id, declining=declining, allowed=allowed
            )
        else:
            # A never declines others' later calls too: only who may approve may.
            action: Literal["approve", "decline"] = (
                "decline" if click.action == "decline" else "approve"
            )
            refusal = self._policy.check(
                call.tool_name,
                call.requester,
                click.user_id,
                action=action,
                allowed=allowed,
                call=call,
            )
            if refusal is None:
                refusal = await self._by_rule(click, call, action)
        if refusal is not None:
            return click, None, ((refusal,), "refused")
        return click, call, None

    async def _by_rule(
        self, click: Click, call: PendingInfo, action: Literal["approve", "decline"]
    ) -> str | None:
        """Why the rule's ``deciders_when`` refuses the clicker (a requester declining
        their own request is never refused), or ``None``."""
        when = self._policy.rule(call.tool_name, call).deciders_when
        if when is None or (action == "decline" and click.user_id == call.requester):
            return None
        people = self._presenter.people
        try:
            groups = await people.groups_of(click.thread, click.user_id, strict=True)
        except LookupError:  # a rule that cannot be checked refuses (fail closed)
            return texts.POLICY_DECIDERS_UNKNOWN.format(tool=call.tool_name)
        decider = {"id": click.user_id, "platform": click.thread.platform, "groups": groups}
        if allows(when, call, decider):
            return None
        return texts.POLICY_DECIDERS_WHEN.format(tool=call.tool_name)

    async def _outdated(self, click: Click, call: PendingInfo) -> str | None:
        """Why the clicked card does not show the call as it is asked now, or ``None``.

        The card's ask says, when its buttons carry it; else its message: one of the
        call's cards (a click away from the thread must be on a copy, or carry the
        ask, as an inbox's buttons do)."""
        if click.ask is not None:
            return None if click.ask == ask_of(call) else texts.CLICK_OUTDATED
        place = await self._presenter.card_place(call)
        ref = click.message_ref
        if click.where is not None:
            held = ref is not None and place is not None and place.holds(ref)
            return None if held else texts.CLICK_OTHER_THREAD
        if ref is None or place is None or place.holds(ref):
            return None
        return texts.CLICK_OUTDATED

    async def _decide(self, click: Click) -> ClickResult:
        if click.action in ("approve_all", "decline_all"):
            return await self._decide_all(click)
        click, call, refusal = await self._check(click)
        if call is None:
            assert refusal is not None
            return await self._said_no(click, None, refusal)
        with click_span(click, call):
            return await self._decide_call(click, call)

    async def _decide_call(self, click: Click, call: PendingInfo) -> ClickResult:
        """A click ``_check`` let through, on the call it is about."""
        if call.kind == "suspension":
            return await self._settle_question(click, call)
        quorum = self._policy.quorum(call.tool_name, call)
        if click.action == "edit":
            if not self._edit_fields(call, quorum):
                return await self._refused(click, call, texts.EDIT_NOT_OFFERED)
            rule, edited = self._policy.rule(call.tool_name, call), self._edited(call, click)
            moved = self._policy.rule(call.tool_name, edited).tier != rule.tier
            if moved or not rule.editor_may_approve:
                # Another tier's deciders (or someone else) approve it: it is asked again.
                return await self._ask_again(click, call, edited)
            refused = await self._by_rule(click, edited, "approve")
            if refused is not None:  # the edited call must be this decider's to approve too
                return await self._refused(click, call, refused)
            return await self._carry_out(click, call)
        if click.action == "respond":
            if not self._policy.rule(call.tool_name, call).respond:
                return await self._refused(click, call, texts.RESPOND_NOT_OFFERED)
            if not _response(click):
                self._metrics.decided("refused")
                return ClickResult(accepted=False, said=(texts.RESPONSE_REQUIRED,), retry=True)
            return await self._carry_out(click, call)
        if click.action == "never":
            rule = self._policy.rule(call.tool_name, call)
            if click.grant_for not in rule.never_for:
                return await self._refused(click, call, texts.NEVER_NOT_OFFERED)
        if click.action == "grant":
            rule = self._policy.rule(call.tool_name, call)
            offered = rule.grant_for if call.answer is None else ()
            if click.grant_for not in offered:
                return await self._refused(click, call, texts.GRANT_NOT_OFFERED)
            return await self._carry_out(click, call)
        if quorum == 1:
            return await self._carry_out(click, call)
        # Votes and declines on a quorum card are serialized by a store lock, across
        # replicas: a vote's count and card update finish before the next click on
        # the card is looked at, so the last card shown is the latest state.
        async with self._chat.card_lock(call.run_id, ask_of(call)):
            # Look again under the lock: the vote that reached the quorum, or a
            # decline, may have decided the call since.
            click, now, refusal = await self._check(click)
            if now is None:
                assert refusal is not None
                return await self._said_no(click, call, refusal)
            if click.action in ("decline", "never"):
                return await self._carry_out(click, now)
            return await self._vote(click, now, quorum)

    async def _decide_all(self, click: Click) -> ClickResult:
        """Approve all (Decline all) on a card of several calls: each call of it still
        waiting, decided on its own as a click on its line would (so each is checked,
        claimed and audited alone); the card as it then reads."""
        action: ClickAction = "approve" if click.action == "approve_all" else "decline"
        # Found by the card it names, decided or not: someone may have decided that one
        # call a moment ago, and the others still wait. Each is checked on its own below.
        place = await self._chat.card_of(click.run_id, click.ask) if click.ask else None
        batch = await self._presenter.batches.of(place) if place is not None else None
        if place is None or batch is None:
            one, _, refusal = await self._check(replace(click, action=action))
            if refusal is not None:
                return await self._said_no(one, None, refusal)
            return self._refuse(texts.CLICK_UNKNOWN, outcome="stale")
        decided: list[ClickResult] = []
        refused: list[ClickResult] = []
        for card in batch.waiting:
            one = replace(click, action=action, tool_call_id=card.tool_call_id, ask=card.ask)
            result = await self._decide(one)
            (decided if result.accepted else refused).append(result)
        if not decided:
            return (
                refused[0] if refused else self._refuse(texts.BATCH_NONE_WAITING, outcome="stale")
            )
        said: Text = ()
        if refused:
            why = "; ".join(dict.fromkeys(r.message or "" for r in refused))
            said = (texts.BATCH_SOME_REFUSED.format(count=len(refused), why=why),)
        shown = await self._presenter.batches.of(place)
        return ClickResult(accepted=True, card=shown or decided[-1].card, said=said)

    async def _vote(self, click: Click, call: PendingInfo, quorum: int) -> ClickResult:
        """Count an allowed Approve towards the quorum (under the card's vote lock)."""
        votes = await self._chat.votes(call.run_id, ask_of(call))
        for person in votes:  # another replica may have heard the names
            self._presenter.people.remember_name(click.thread, person.id, person.name)
        voted = any(person.id == click.user_id for person in votes)
        if voted and len(votes) < quorum:
            more = quorum - len(votes)
            return await self._refused(click, call, texts.CLICK_ALREADY_VOTED.format(more=more))
        me = Person(id=click.user_id, name=click.user_name)
        ballot = votes if voted else [*votes, me]
        voters = tuple(person.id for person in ballot)
        if not voted:
            short = await self._groups_short(click, call, voters, quorum)
            if short is not None:
                return await self._refused(click, call, short)
        if len(ballot) >= quorum:
            if not voted:
                # Logged before the decision, so the audit reads "voted, ..., approved".
                await audit_vote(self._agent, click, call)
            # The decision is every voter's: on record with each one's name.
            names = {person.id: person.name for person in ballot}
            with arriving(current().via, names):
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
        self._inboxes.keep(click.thread, call, "voted", (click.user_id,))
        card = self._presenter.card(click.thread, call, approvals=voters)
        # Updated before the lock is released, so no later decision's card can be
        # overwritten by this one.
        await self._show(click, call, card)
        return _decided(click, card)

    async def _groups_short(
        self, click: Click, call: PendingInfo, voters: tuple[str, ...], quorum: int
    ) -> str | None:
        """Why the last of ``voters`` may not vote: with the votes still to come, the
        quorum could no longer span the rule's ``distinct_groups`` user groups (each vote
        counts for one group its voter is in); ``None`` when it still can."""
        rule = self._policy.rule(call.tool_name, call)
        if rule.distinct_groups < 2:
            return None
        people = self._presenter.people
        named = self._policy.deciders_of(call)  # escalate_to's groups only once escalated
        groups = [
            frozenset(await people.groups_of(click.thread, voter)) & named for voter in voters
        ]
        if spanned(groups) + (quorum - len(voters)) >= rule.distinct_groups:
            return None
        return texts.VOTE_SAME_GROUP.format(count=rule.distinct_groups, tool=call.tool_name)

    async def _show(
        self,
        click: Click,
        call: PendingInfo,
        card: ApprovalCard | Prompt,
        place: CardPlace | None = None,
    ) -> None:
        """Show a card's new state wherever it is (``place``, looked up when not given;
        the clicked message, if it was never recorded)."""
        messenger = self._presenter.messenger(click.thread.platform)
        place = place or await self._presenter.card_place(call)
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
        if click.action == "respond":
            reason = _response(click)
            deciding = self._agent.respond_tool_call(
                run_id=call.run_id,
                tool_call_id=call.tool_call_id,
                response=reason,
                decided_by=decided_by,
            )
        elif click.action in ("approve", "edit", "grant"):
            deciding = self._agent.approve_tool_call(
                run_id=call.run_id,
                tool_call_id=call.tool_call_id,
                decided_by=decided_by,
                args=edited,
            )
        else:
            told = reason
            if click.action == "never":  # the model reads why; the card says it its way
                said = texts.NEVER_REASON.format(duration=click.grant_for)
                told, reason = (f"{reason}; {said}" if reason else said), None
            deciding = self._agent.decline_tool_call(
                run_id=call.run_id,
                tool_call_id=call.tool_call_id,
                reason=told,
                decided_by=decided_by,
            )
        stream = await self._decided(click, call, deciding)
        if isinstance(stream, ClickResult):
            return stream
        status = _CARD_STATUS.get(click.action, "approved")
        tier = self._policy.rule(call.tool_name, call).tier
        waited(call, tier=tier, outcome=status, decided_by=decided_by)
        self._metrics.decided(status)
        shown, before = call, None
        if edited is not None:
            # What runs is what the runtime validated (its types, its defaults); an edit
            # that changed nothing is an approval like any other.
            ran = await self._approved_args(call)
            if ran is not None:
                shown, before = replace(call, args=ran), call.args
        self._inboxes.keep(
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
            declined_for=click.grant_for if click.action == "never" else None,
        )
        if click.action == "grant" and click.grant_for is not None:
            await self._grants.give(click.thread, call, click.grant_for, click.user_id)
        if click.action == "never" and click.grant_for is not None:
            await self._grants.refuse(click.thread, call, click.grant_for, click.user_id)
        # A card of several calls is redrawn before the click is answered: the clicker
        # sees every line as it now reads (the others may be decided at the same time).
        place = await self._presenter.card_place(call)
        on_batch, batch = await self._batch_shown(click, place, card)
        await self._follow(click, call, card, stream, shown=on_batch, place=place)
        return _decided(click, batch or card)

    async def _batch_shown(
        self, click: Click, place: CardPlace | None, card: ApprovalCard
    ) -> tuple[bool, BatchCard | None]:
        """Show ``card`` as its line of a card of several calls, if it is on one: whether
        it was, and that card as it now reads when the click was on it (a click from an
        approvals list or a decision page shows its own call)."""
        if place is None or place.batch is None:
            return False, None
        messenger = self._presenter.messenger(click.thread.platform)
        try:
            shown = await self._presenter.show_card(messenger, place, card)
        except Exception:  # the decision stands and its run goes on: shown behind, again
            log.exception("could not redraw the card of %s", place.batch)
            return False, None
        on_it = click.message_ref is not None and place.holds(click.message_ref)
        return True, shown if isinstance(shown, BatchCard) and on_it else None

    async def _ask_again(self, click: Click, call: PendingInfo, edited: PendingInfo) -> ClickResult:
        """Ask ``call`` anew as ``edited``, under the tier its arguments put it in: this
        card says so (its votes end with it), a new card asks the tier's deciders, and
        the runtime keeps waiting (audited ``edited``)."""
        if edited.args == call.args:  # nothing changed: the click approves as it is
            return await self._carry_out(click, call)
        expires_in = self._policy.rule(call.tool_name, edited).expires_in
        asking = self._agent.ask_again(
            run_id=call.run_id,
            tool_call_id=call.tool_call_id,
            args=edited.args,
            edited_by=click.user_id,
            expires_in=expires_in,
        )
        asked = await self._decided(click, call, asking)
        if isinstance(asked, ClickResult):
            return asked
        self._metrics.decided("asked_again")
        card = self._presenter.card(
            click.thread, call, status="asked_again", decided_by=(click.user_id,)
        )
        await self._show(click, call, card)
        messenger = self._presenter.messenger(click.thread.platform)
        try:
            self._tasks.spawn(
                self._presenter.show_pending(messenger, click.thread, asked),
                name=f"asked again:{call.run_id}",
            )
        except RuntimeError:  # shutting down: the sweeper's lost-card check posts it later
            log.error("run %s: asked again during shutdown, its card not posted here", call.run_id)
        return _decided(click, card)

    def _edited(self, call: PendingInfo, click: Click) -> PendingInfo:
        """``call`` as an edit click would have it run (its form's values, typed)."""
        edited = {**call.args, **form_answer(self._edit_fields(call, 1), click.values or {})}
        return replace(call, args=edited)

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
        waited(call, tier=None, outcome=status, decided_by=click.user_id)
        self._metrics.decided(status)
        shown = self._presenter.settled(click.thread, call, status, click.user_id)
        await self._follow(click, call, shown, stream)
        return _decided(click, shown)

    async def _approved_args(self, call: PendingInfo) -> dict[str, Any] | None:
        """The arguments an approval of ``call`` runs with, as its decision keeps them."""
        try:
            decision = (await self._agent.get_run(call.run_id)).decisions.get(call.tool_call_id)
        except RunNotFoundError:
            return None
        return decision.args if decision is not None else None

    async def _decided(
        self, click: Click, call: PendingInfo, deciding: Awaitable[Taken]
    ) -> Taken | ClickResult:
        """What the runtime answers once it took the decision (a stream, a call asked
        again), or the refusal that says why not."""
        try:
            return await deciding
        except (ResumeDataInvalidError, ArgsInvalidError) as exc:
            template = (
                texts.EDIT_INVALID if isinstance(exc, ArgsInvalidError) else texts.FORM_INVALID
            )
            self._metrics.decided("refused")
            invalid = template.format(errors="; ".join(exc.errors))
            return ClickResult(accepted=False, said=(invalid,), retry=True)
        except AlreadyDecidedError as exc:
            decision = exc.decision
            decided = await self._record.already(
                click.thread, call.run_id, call.tool_call_id, decision
            )
            return self._refuse(decided, outcome="stale")
        except CallExpiredError:
            return self._refuse(texts.CLICK_EXPIRED, outcome="stale")
        except RunNotPausedError as exc:
            said = texts.CLICK_STOPPED if exc.status == "stopped" else texts.CLICK_UNKNOWN
            return self._refuse(said, outcome="stale")
        except (ToolCallNotPendingError, RunNotFoundError):
            return self._refuse(texts.CLICK_UNKNOWN, outcome="stale")
        except RunChangedError:
            return self._refuse(texts.CLICK_RACED, outcome="stale")

    async def _follow(
        self,
        click: Click,
        call: PendingInfo,
        card: ApprovalCard | Prompt,
        stream: AgentStream,
        *,
        shown: bool = False,
        place: CardPlace | None = None,
    ) -> None:
        """Update the clicked card (or question, at ``place`` when known; unless it was
        ``shown`` already) and continue the run, in the background."""
        self._presenter.settle(call.run_id)  # the decision is on record: a waiter may read it
        messenger = self._presenter.messenger(click.thread.platform)
        try:
            self._tasks.spawn(
                self._after_decision(
                    click, call, messenger, card, stream, shown=shown, place=place
                ),
                name=f"decision:{call.run_id}",
            )
        except RuntimeError:
            # The decision stands; only this process is going away before carrying it out.
            log.error("run %s: decided during shutdown, not continued here", call.run_id)

    async def _said_no(
        self, click: Click, call: PendingInfo | None, refusal: tuple[Text, DecisionOutcome]
    ) -> ClickResult:
        """A refusal ``_check`` found, counted: the policy's no is on record (who, why)
        about ``call`` (else the call the click names, while it waits)."""
        said, outcome = refusal
        if outcome != "refused":
            return self._refuse(said, outcome=outcome)
        return await self._refused(click, call or await self._waiting(click), said)

    async def _refused(
        self, click: Click, call: PendingInfo | None, message: Text | str
    ) -> ClickResult:
        """Refuse a click the policy does not allow, on record: who clicked, and why."""
        said = (message,) if isinstance(message, str) else message
        if call is not None:
            why = plain_text(said)
            entry = call_entry(REFUSED, call, click.thread.id, actor=click.user_id, reason=why)
            await self._agent.record(entry)
        return self._refuse(said, outcome="refused")

    def _refuse(self, message: Text | str, *, outcome: DecisionOutcome) -> ClickResult:
        self._metrics.decided(outcome)
        return ClickResult(accepted=False, said=(message,) if isinstance(message, str) else message)

    async def _after_decision(
        self,
        click: Click,
        call: PendingInfo,
        messenger: Messenger,
        card: ApprovalCard | Prompt,
        stream: AgentStream,
        *,
        shown: bool,
        place: CardPlace | None,
    ) -> None:
        place = place or await self._presenter.card_place(call)
        if not shown:
            await self._show(click, call, card, place)
        async with self._threads.hold(click.thread.id):
            told = decision_notice(card, requester=call.requester, decider=click.user_id)
            if told is not None:
                # Above what the run does next, so the requester hears it first.
                requester, text = told
                to = self._presenter.people.who(click.thread, requester)
                await self._presenter.say(messenger, click.thread, Notice(text=text, to=to))
            about = place.about if place is not None else None
            await self._presenter.consume(
                click.thread, messenger, stream, requester=call.requester, about=about
            )


_APPROVAL_ONLY: Final = frozenset(
    {"approve", "edit", "grant", "never", "respond", "approve_all", "decline_all"}
)
"""What only an approval card has (a question is answered, declined or cancelled)."""


def _response(click: Click) -> str:
    """What a ``respond`` click answers in the tool's place (empty: nothing)."""
    value = (click.values or {}).get(RESPONSE_INPUT)
    return value.strip() if isinstance(value, str) else ""


def _decided(click: Click, card: ApprovalCard | Prompt | BatchCard) -> ClickResult:
    """A click's accepted result: the card as it now reads where it was clicked (away
    from its thread, with a link to it)."""
    if click.where is not None and isinstance(card, ApprovalCard):
        card = replace(card, requested_in=click.thread)
    return ClickResult(accepted=True, card=card)
