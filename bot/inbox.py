"""A person's approvals list: what waits for their decision across a workspace, their
own requests still waiting, and what they decided lately (Slack ``/approvals`` and the
Home tab, Teams ``approvals``, the console's ``/approvals``).

What waits is read from the chat state's index of waiting runs (``waiting_for``), never
from a scan of the deployment; each person's latest decisions are kept as they make
them (``keep``), so the list never reads the whole audit log.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import Final

from pydantic import TypeAdapter

from agents import Agent, PendingInfo, RunNotFoundError, RunSnapshot

from . import texts
from .chat_state import InboxState, ask_of
from .compose import agent_path, approvals_rich, args_line, decision_buttons, joined, rich
from .document import (
    Block,
    Code,
    Document,
    Item,
    Paragraph,
    Place,
    Rich,
    Section,
    Strong,
    When,
)
from .outcome import RECENT, card_outcome
from .people import scope_of
from .policy import ApprovalPolicy
from .presenter import Presenter
from .tasks import TaskTracker
from .types import (
    ApprovalCard,
    Inbox,
    InboxDecision,
    RecentOutcome,
    ThreadKey,
    tool_label,
)
from .views import thread_of

log = logging.getLogger(__name__)

RECENT_DECISIONS: Final = 10
"""How many of a person's latest decisions their inbox lists (kept per person)."""
RECENT_DECISION = TypeAdapter(InboxDecision)
"""JSON of one kept decision (the chat state's ``push_recent``)."""


def recent_key(scope: str, user_id: str) -> str:
    """Where a person's latest decisions in a workspace are kept."""
    return f"decided:{scope}{user_id}"


class Inboxes:
    """Every person's approvals list, and the record of their decisions it shows.

    Args:
        agent: The root agent, whose runs hold the waiting calls.
        policy: Who may decide what (what waits for whom).
        chat: The index of waiting runs, votes, grants and kept decisions.
        presenter: How cards and people are shown.
        tasks: Where decisions are kept in the background.
    """

    def __init__(
        self,
        *,
        agent: Agent,
        policy: ApprovalPolicy,
        chat: InboxState,
        presenter: Presenter,
        tasks: TaskTracker,
    ) -> None:
        self._agent = agent
        self._policy = policy
        self._chat = chat
        self._presenter = presenter
        self._tasks = tasks

    async def inbox(self, thread: ThreadKey, user_id: str, user_name: str | None = None) -> Inbox:
        """What waits for ``user_id`` in ``thread``'s workspace, and what they decided lately.

        Reads only the runs indexed for them (``CardState.waiting_for``: theirs, anyone's,
        their groups', their own requests), pruning those decided since; their decisions
        are the ones kept for them as they made them (``keep``).
        """
        self._presenter.people.remember_name(thread, user_id, user_name)
        scope = scope_of(thread)
        now = datetime.now(UTC)
        waiting: list[ApprovalCard] = []
        requested: list[ApprovalCard] = []
        names = await self._presenter.people.inbox_names(thread, user_id)
        for run_id in sorted(await self._chat.waiting_for(scope, names)):
            snap = await self._run(run_id)
            origin = thread_of(snap.metadata) if snap is not None else None
            if snap is None or origin is None or not origin.id.startswith(scope):
                continue
            if not any(c.state == "pending" and c.kind == "approval" for c in snap.pending):
                await self._chat.unindex_waiting(scope, names, run_id)  # decided since
                continue
            for call in snap.pending:
                info = PendingInfo.of(run_id, call)
                if call.state != "pending" or call.kind != "approval" or info.expires_at <= now:
                    continue
                card = replace(self._presenter.card(origin, info), requested_in=origin)
                allowed = await self._presenter.people.deciders(origin, info)
                refusal = self._policy.check(
                    info.tool_name, info.requester, user_id, allowed=allowed, call=info
                )
                if refusal is None and not await self._voted(info, user_id):
                    waiting.append(card)
                elif info.requester == user_id:
                    requested.append(card)
        decided = await self._recent_decisions(scope, user_id)
        grants = await self._chat.grants_given(user_id, scope, now.timestamp())
        return Inbox(
            person=self._presenter.people.who(thread, user_id),
            waiting=tuple(sorted(waiting, key=lambda c: c.expires_at)),
            requested=tuple(sorted(requested, key=lambda c: c.expires_at)),
            decided=decided,
            grants=len(grants),
        )

    async def _run(self, run_id: str) -> RunSnapshot | None:
        try:
            return await self._agent.get_run(run_id)
        except RunNotFoundError:
            return None

    async def _voted(self, call: PendingInfo, user_id: str) -> bool:
        """Whether ``user_id`` already approved a call that needs several approvals (it
        waits for others, not for them)."""
        if self._policy.quorum(call.tool_name, call) == 1:
            return False
        return any(
            person.id == user_id for person in await self._chat.votes(call.run_id, ask_of(call))
        )

    async def _recent_decisions(self, scope: str, user_id: str) -> tuple[InboxDecision, ...]:
        """``user_id``'s latest decisions in a workspace, newest first (a sensitive
        tool's arguments left out, as the policy says now)."""
        found: list[InboxDecision] = []
        for item in await self._chat.recent(recent_key(scope, user_id)):
            try:
                decision = RECENT_DECISION.validate_json(item)
            except ValueError:
                log.warning("a kept decision of %s is not readable; skipped", user_id)
                continue
            if self._policy.rule(decision.tool_name).sensitive:
                decision = replace(decision, args={})
            found.append(decision)
        return tuple(found)

    def keep(
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


# -- the list as people see it ------------------------------------------------------


def inbox_document(
    inbox: Inbox,
    *,
    command: str,
    note: Rich = (),
    kept_current: datetime | None = None,
) -> Document:
    """A person's approvals list: ``note`` first (what their last click there did),
    then what waits for them (with the card's buttons), their requests, their recent
    decisions and their grants. ``command`` is how the platform names the approvals
    command (``/approvals``); ``kept_current``: when a list the platform keeps current
    (Slack's Home tab) was drawn.
    """
    body: list[Block] = []
    if kept_current is not None:
        body.append(Paragraph(text=(texts.INBOX_INTRO,), small=True))
    if note:
        body.append(Paragraph(text=note, emphasis="attention"))
    body.append(
        Section(
            title=(texts.INBOX_WAITING.format(count=len(inbox.waiting)),),
            items=tuple(_waiting_item(card) for card in inbox.waiting),
            empty=(texts.INBOX_NONE_WAITING_KEPT if kept_current else texts.INBOX_NONE_WAITING,),
            more=texts.INBOX_MORE_WAITING_KEPT if kept_current else texts.INBOX_MORE_WAITING,
        )
    )
    body.append(
        Section(
            title=(texts.INBOX_REQUESTED.format(count=len(inbox.requested)),),
            items=tuple(_requested_item(card) for card in inbox.requested),
            empty=(texts.INBOX_NONE_REQUESTED,),
            more=texts.MORE,
        )
    )
    body.append(
        Section(
            title=(texts.INBOX_DECIDED,),
            items=tuple(_decided_item(decision) for decision in inbox.decided),
            empty=(texts.INBOX_NONE_DECIDED,),
            more=texts.MORE,
        )
    )
    revoke = Code(text=f"{command} {texts.REVOKE_COMMAND}")
    grants = (
        rich(texts.INBOX_GRANTS, count=str(inbox.grants), revoke=revoke)
        if inbox.grants
        else (texts.INBOX_NO_GRANTS,)
    )
    body.append(Paragraph(text=grants, small=True))
    if kept_current is not None:
        updated = rich(texts.INBOX_UPDATED, when=When(at=kept_current))
        body.append(Paragraph(text=updated, small=True, emphasis="subtle"))
    summary = texts.INBOX_SUMMARY.format(waiting=len(inbox.waiting), requested=len(inbox.requested))
    return Document(
        kind="inbox", summary=(summary,), title=(Strong(text=texts.INBOX_TITLE),), body=tuple(body)
    )


def inbox_note(card: ApprovalCard) -> Rich:
    """What tops the list once one of its buttons decided ``card``: "`deploy`: ✅ Approved
    by @x", or the approvals so far of one that needs more."""
    tool = Code(text=tool_label(card))
    outcome = card_outcome(card)
    if outcome is None:  # a vote of a quorum, counted
        return rich(
            texts.INBOX_VOTED,
            tool=tool,
            count=str(len(card.approvals)),
            quorum=str(card.quorum),
        )
    return rich(texts.INBOX_DONE, tool=tool, outcome=(f"{outcome.mark} ", *outcome.line))


def _waiting_item(card: ApprovalCard) -> Item:
    details: list[Rich] = [
        rich(texts.INBOX_ASKED_BY, who=(card.requester,) if card.requester else texts.SOMEONE)
    ]
    if len(card.agent_path) > 1:
        details.append((texts.INBOX_VIA.format(agent=agent_path(card.agent_path)),))
    details += _where_and_until(card)
    if card.quorum > 1:
        details.append((f"{texts.FACT_APPROVALS}: ", *approvals_rich(card)))
    return Item(
        text=_call(card),
        details=joined(details, texts.INBOX_SEPARATOR),
        actions=decision_buttons(card),
    )


def _requested_item(card: ApprovalCard) -> Item:
    return Item(text=_call(card), details=joined(_where_and_until(card), texts.INBOX_SEPARATOR))


def _decided_item(decision: InboxDecision) -> Item:
    return Item(
        text=rich(
            texts.INBOX_DECISION,
            outcome=RECENT[decision.outcome],
            tool=Code(text=decision.tool_name),
            args=f" ({args_line(decision.args)})" if decision.args else "",
        ),
        details=(When(at=decision.at),),
    )


def _where_and_until(card: ApprovalCard) -> list[Rich]:
    lines: list[Rich] = []
    if card.requested_in is not None:
        lines.append(rich(texts.INBOX_IN, where=Place(thread=card.requested_in)))
    lines.append(rich(texts.INBOX_EXPIRES, when=When(at=card.expires_at)))
    return lines


def _call(card: ApprovalCard) -> Rich:
    return rich(texts.INBOX_CALL, tool=Code(text=tool_label(card)), args=args_line(card.args))
