"""The ``approvals`` command's answer: one person's inbox as an Adaptive Card.

What waits for them (each call with Approve and Decline, whose data is a card's,
so a click goes the way a click on the card in its thread goes), their own
requests still waiting, their recent decisions and the grants they gave. Lists
are capped ("…and N more") and shortened until the card fits a Teams message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from bot import RECENT, ApprovalCard, Inbox, InboxDecision

from . import blocks, cards, links, texts

MAX_WAITING: Final = 8
MAX_REQUESTED: Final = 5
MAX_DECIDED: Final = 10
_MAX_ARGS: Final = 5
T = TypeVar("T")
_DECISION_ARGS_LIMIT: Final = 80


@dataclass(frozen=True)
class _Limits:
    waiting: int
    requested: int
    decided: int
    value_limit: int


_LIMITS: Final = (
    _Limits(MAX_WAITING, MAX_REQUESTED, MAX_DECIDED, 300),
    _Limits(MAX_WAITING, MAX_REQUESTED, MAX_DECIDED, 80),
    _Limits(4, 3, 5, 40),
    _Limits(2, 1, 3, 20),
)
"""Tried in turn until the card fits: fewer entries, shorter values."""


def inbox_card(inbox: Inbox, *, note: str | None = None) -> dict[str, Any]:
    """The inbox as a card; ``note`` (markdown) tops it, e.g. how the last click went."""
    for limits in _LIMITS:
        rendered = _inbox_card(inbox, note=note, limits=limits)
        if blocks.fits(rendered):
            return rendered
    return _inbox_card(inbox, note=None, limits=_Limits(1, 0, 0, 20))


def summary(inbox: Inbox) -> str:
    """A one-line plain text for notifications."""
    return texts.INBOX_SUMMARY.format(count=len(inbox.waiting))


def clicked_note(card: ApprovalCard) -> str:
    """What the top of the inbox says once a button of it decided ``card``."""
    tool = blocks.tool_name_text(card)
    if card.status == "pending":  # a vote of a quorum, counted
        return texts.INBOX_VOTED.format(tool=tool, count=len(card.approvals), quorum=card.quorum)
    return texts.INBOX_CLICKED.format(title=cards.card_title(card), tool=tool)


# -- internals -------------------------------------------------------------------


def _inbox_card(inbox: Inbox, *, note: str | None, limits: _Limits) -> dict[str, Any]:
    body: list[dict[str, Any]] = [
        blocks.text_block(texts.INBOX_TITLE, weight="Bolder", size="Medium")
    ]
    if note:
        body.append(blocks.text_block(note, color="Accent"))
    body.append(_heading(texts.INBOX_WAITING.format(count=len(inbox.waiting))))
    body += _capped(
        inbox.waiting, limits.waiting, lambda c: _waiting(c, limits), texts.INBOX_NONE_WAITING
    )
    body.append(_heading(texts.INBOX_REQUESTED.format(count=len(inbox.requested))))
    body += _capped(inbox.requested, limits.requested, _requested, texts.INBOX_NONE_REQUESTED)
    body.append(_heading(texts.INBOX_DECIDED))
    body += _capped(inbox.decided, limits.decided, _decision, texts.INBOX_NONE_DECIDED)
    grants = (
        texts.INBOX_GRANTS.format(count=inbox.grants) if inbox.grants else texts.INBOX_NO_GRANTS
    )
    body.append(blocks.text_block(grants, separator=True, spacing="Medium"))
    return {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": blocks.CARD_VERSION,
        "fallbackText": summary(inbox),
        "msteams": {"width": "Full"},
        "body": body,
    }


def _capped(
    items: Sequence[T], limit: int, render: Callable[[T], dict[str, Any]], empty: str
) -> list[dict[str, Any]]:
    if not items:
        return [blocks.text_block(empty, isSubtle=True)]
    shown: list[dict[str, Any]] = [render(item) for item in items[:limit]]
    if len(items) > limit:
        more = texts.INBOX_MORE.format(count=len(items) - limit)
        shown.append(blocks.text_block(more, isSubtle=True))
    return shown


def _heading(text: str) -> dict[str, Any]:
    return blocks.text_block(text, weight="Bolder", separator=True, spacing="Large")


def _waiting(card: ApprovalCard, limits: _Limits) -> dict[str, Any]:
    """A call the person may decide: what, who asks, where, until when; Approve, Decline."""
    tool = blocks.tool_name_text(card)
    requester = blocks.person_text(card.requester) if card.requester else texts.CARD_SOMEONE
    items: list[dict[str, Any]] = [
        blocks.text_block(texts.INBOX_ITEM.format(tool=tool, requester=requester))
    ]
    if card.agent_path:
        agent = blocks.escape(blocks.cut(blocks.agent_name(card.agent_path), blocks.MAX_NAME))
        items.append(
            blocks.text_block(
                texts.INBOX_ITEM_AGENT.format(agent=agent), isSubtle=True, size="Small"
            )
        )
    items.append(blocks.args_facts(card.args, value_limit=limits.value_limit, max_facts=_MAX_ARGS))
    items += _where(card)
    at = blocks.rfc3339(card.expires_at)
    items.append(blocks.text_block(texts.CARD_EXPIRES.format(at=at), size="Small"))
    actions = [
        blocks.execute(
            texts.APPROVE,
            cards.action_data(card, "approve", inbox=True),
            style="positive",
            with_inputs=False,
        ),
        blocks.execute(
            texts.DECLINE,
            cards.action_data(card, "decline", inbox=True),
            style="destructive",
            with_inputs=False,
        ),
    ]
    items.append({"type": "ActionSet", "actions": actions})
    return {"type": "Container", "separator": True, "items": items}


def _requested(card: ApprovalCard) -> dict[str, Any]:
    tool = blocks.tool_name_text(card)
    at = blocks.rfc3339(card.expires_at)
    items = [blocks.text_block(texts.INBOX_REQUEST.format(tool=tool, at=at)), *_where(card)]
    return {"type": "Container", "items": items}


def _where(card: ApprovalCard) -> list[dict[str, Any]]:
    if card.requested_in is None:
        return []
    place = links.place_markdown(card.requested_in)
    return [blocks.text_block(texts.REQUESTED_IN.format(place=place), size="Small")]


def _decision(decision: InboxDecision) -> dict[str, Any]:
    outcome = blocks.escape(RECENT[decision.outcome])
    tool = blocks.escape(blocks.cut(decision.tool_name, blocks.MAX_NAME))
    shown = ", ".join(f"{k}: {blocks.show_value(v)}" for k, v in decision.args.items())
    args = f"({blocks.escape(blocks.cut(shown, _DECISION_ARGS_LIMIT))}) " if shown else ""
    at = blocks.rfc3339(decision.at)
    text = texts.INBOX_DECISION.format(outcome=outcome, tool=tool, args=args, at=at)
    return blocks.text_block(text, size="Small")
