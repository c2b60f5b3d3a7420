"""``/approvals`` as Block Kit: what waits for a person, their requests, their decisions.

Shown only to the person who asked (an ephemeral answer through ``response_url``).
The waiting calls have the card's own Approve and Decline buttons, so a click
there goes the way a click on the card goes. Lists are capped so the message
stays within Slack's limits (50 blocks, 3000 characters a section), saying how
many more there are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot import ApprovalCard, Inbox, InboxDecision, ThreadKey, tool_label

from . import texts
from .blocks import (
    SlackMessage,
    approvals_text,
    decision_buttons,
    outcome_text,
    requested_in_text,
)
from .mrkdwn import SECTION_LIMIT, Block, context, cut, escape, mention, section, slack_date

WAITING_SHOWN = 10
"""Waiting calls shown with buttons (two blocks each, well within 50 blocks)."""
ITEMS_SHOWN = 10
"""Requests and decisions listed at most, each list in one section."""
ARGS_SUMMARY_LIMIT = 500
"""One call's arguments on one line; the request's link shows them whole."""

Links = Mapping[tuple[str, str], str]
"""Permalinks of threads, by ``(channel, root)``."""


def inbox_message(inbox: Inbox, *, links: Links, lead: str | None = None) -> SlackMessage:
    """The inbox; ``lead`` (mrkdwn) first, when a click from it was just carried out."""
    blocks: list[Block] = []
    if lead:
        blocks += [section(lead), {"type": "divider"}]
    blocks += _waiting(inbox.waiting, links)
    blocks.append({"type": "divider"})
    requested = [_request_line(card, links) for card in inbox.requested]
    blocks.append(_listing(texts.INBOX_REQUESTED, requested, empty=texts.INBOX_NO_REQUESTS))
    decided = [_decision_line(decision) for decision in inbox.decided]
    blocks.append(_listing(texts.INBOX_DECIDED, decided, empty=texts.INBOX_NO_DECISIONS))
    grants = (
        texts.INBOX_GRANTS.format(count=inbox.grants) if inbox.grants else texts.INBOX_NO_GRANTS
    )
    blocks.append(context(grants))
    fallback = texts.INBOX_FALLBACK.format(
        waiting=len(inbox.waiting), requested=len(inbox.requested)
    )
    return SlackMessage(text=fallback, blocks=blocks)


def links_wanted(inbox: Inbox) -> list[ThreadKey]:
    """The threads whose permalinks the inbox shows (each once)."""
    shown = [*inbox.waiting[:WAITING_SHOWN], *inbox.requested[:ITEMS_SHOWN]]
    threads = [card.requested_in for card in shown if card.requested_in is not None]
    return list(dict.fromkeys(threads))


def done_line(card: ApprovalCard) -> str:
    """What a click from the inbox did: "`deploy`: Approved by @x" (or the votes so far)."""
    tool = escape(tool_label(card))
    outcome = outcome_text(card) if card.status != "pending" else approvals_text(card)
    return texts.INBOX_DONE.format(tool=tool, outcome=outcome)


def _waiting(cards: tuple[ApprovalCard, ...], links: Links) -> list[Block]:
    if not cards:
        return [section(f"{texts.INBOX_WAITING}\n{texts.INBOX_NOTHING_WAITING}")]
    blocks: list[Block] = [section(texts.INBOX_WAITING_COUNT.format(count=len(cards)))]
    for card in cards[:WAITING_SHOWN]:
        facts = [texts.INBOX_ASKED_BY.format(who=_requester(card))]
        if card.requested_in is not None:
            where = requested_in_text(card.requested_in, _link(card.requested_in, links))
            facts.append(texts.INBOX_IN.format(where=where))
        facts.append(texts.INBOX_EXPIRES.format(when=slack_date(card.expires_at)))
        if card.quorum > 1:
            facts.append(approvals_text(card))
        line = f"{_call(card)}\n{texts.INBOX_SEPARATOR.join(facts)}"
        blocks += [section(line), {"type": "actions", "elements": decision_buttons(card)}]
    hidden = len(cards) - WAITING_SHOWN
    if hidden > 0:
        blocks.append(context(texts.INBOX_MORE_WAITING.format(count=hidden)))
    return blocks


def _request_line(card: ApprovalCard, links: Links) -> str:
    facts = [texts.INBOX_EXPIRES.format(when=slack_date(card.expires_at))]
    if card.requested_in is not None:
        where = requested_in_text(card.requested_in, _link(card.requested_in, links))
        facts.insert(0, texts.INBOX_IN.format(where=where))
    return f"• {_call(card)} · {texts.INBOX_SEPARATOR.join(facts)}"


def _decision_line(decision: InboxDecision) -> str:
    outcome = texts.INBOX_OUTCOMES.get(decision.outcome, escape(decision.outcome))
    args = f" ({_summary(decision.args)})" if decision.args else ""
    return texts.INBOX_DECISION.format(
        when=slack_date(decision.at),
        outcome=outcome,
        tool=escape(decision.tool_name),
        args=args,
    )


def _listing(title: str, lines: list[str], *, empty: str) -> Block:
    """One section: the title, then as many lines as fit, and how many more there are."""
    if not lines:
        return section(f"{title}\n{empty}")
    shown: list[str] = []
    size = len(title) + 200  # room for the "and N more" line
    for line in lines[:ITEMS_SHOWN]:
        if size + len(line) + 1 > SECTION_LIMIT:
            break
        shown.append(line)
        size += len(line) + 1
    hidden = len(lines) - len(shown)
    if hidden:
        shown.append(texts.INBOX_MORE.format(count=hidden))
    return section("\n".join([title, *shown]))


def _call(card: ApprovalCard) -> str:
    """ "`deploy` service: api, version: 1.4.2" on one line."""
    tool = escape(tool_label(card))
    return texts.INBOX_CALL.format(tool=tool, args=_summary(card.args) or texts.INBOX_NO_ARGS)


def _summary(args: dict[str, Any]) -> str:
    """Arguments on one line, escaped, cut to ``ARGS_SUMMARY_LIMIT`` with an ellipsis."""
    pairs = ", ".join(f"{name}: {_value(value)}" for name, value in args.items())
    kept, dropped = cut(escape(pairs), ARGS_SUMMARY_LIMIT)
    return f"{kept}…" if dropped else kept


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value.replace("\n", " ")
    return json.dumps(value, ensure_ascii=False, default=str)


def _requester(card: ApprovalCard) -> str:
    return mention(card.requester) if card.requester else texts.UNKNOWN_PERSON


def _link(thread: ThreadKey, links: Links) -> str | None:
    return links.get((thread.channel, thread.root))
