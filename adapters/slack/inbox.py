"""A person's inbox as Block Kit: what waits for them, their requests, their decisions.

Shown two ways: as the answer to ``/approvals``, which only the person who asked
sees (an ephemeral message through ``response_url``), and as their App Home tab
(``views.publish``). The waiting calls have the card's own Approve, Decline and
Edit buttons, so a click there goes the way a click on the card goes. Lists are
capped so each stays within Slack's limits (50 blocks a message, 100 a Home tab,
3000 characters a section), saying how many more there are.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot import RECENT, ApprovalCard, Inbox, InboxDecision, ThreadKey, tool_label

from . import texts
from .blocks import (
    SlackMessage,
    approvals_text,
    decision_buttons,
    edit_button,
    outcome_text,
    requested_in_text,
)
from .mrkdwn import (
    ELLIPSIS,
    SECTION_LIMIT,
    Block,
    clip,
    context,
    escape,
    mention,
    plain,
    section,
    slack_date,
)

ITEMS_SHOWN = 10
"""Requests and decisions listed at most, each list in one section."""
ARGS_SUMMARY_LIMIT = 500
"""Characters kept of one call's arguments on one line, before an ellipsis: the
request's link shows them whole."""

Links = Mapping[tuple[str, str], str]
"""Permalinks of threads, by ``(channel, root)``."""
Permalink = Callable[[str, str], Awaitable[str | None]]
"""The permalink of a message (channel, ts), or ``None`` when Slack gives none."""


@dataclass(frozen=True, kw_only=True)
class Layout:
    """How much of an inbox one surface shows, and what it says of the rest."""

    waiting_shown: int
    """Waiting calls shown with buttons (two blocks each)."""
    more_waiting: str
    """What is said of the waiting calls not shown (``{count}``)."""
    nothing_waiting: str
    """What is said when nothing waits."""


COMMAND = Layout(
    waiting_shown=10,  # 20 blocks and a few more: well within a message's 50
    more_waiting=texts.INBOX_MORE_WAITING,
    nothing_waiting=texts.INBOX_NOTHING_WAITING,
)
"""``/approvals``: one message."""
HOME = Layout(
    waiting_shown=20,  # 40 blocks and a few more: well within a Home tab's 100
    more_waiting=texts.HOME_MORE_WAITING,
    nothing_waiting=texts.HOME_NOTHING_WAITING,
)
"""The Home tab."""


def inbox_message(inbox: Inbox, *, links: Links, lead: str | None = None) -> SlackMessage:
    """The inbox as ``/approvals`` answers; ``lead`` (mrkdwn) first, when a click from it
    was just carried out."""
    blocks = inbox_blocks(inbox, links=links, lead=lead, layout=COMMAND)
    fallback = texts.INBOX_FALLBACK.format(
        waiting=len(inbox.waiting), requested=len(inbox.requested)
    )
    return SlackMessage(text=fallback, blocks=blocks)


def home_view(
    inbox: Inbox, *, links: Links, lead: str | None = None, now: datetime | None = None
) -> dict[str, Any]:
    """The inbox as a Home tab (a ``views.publish`` view); ``lead`` (mrkdwn) first: what
    the person's last click there did, or why not."""
    updated = texts.HOME_UPDATED.format(when=slack_date(now or datetime.now(UTC)))
    blocks: list[Block] = [
        {"type": "header", "text": plain(texts.HOME_TITLE)},
        context(texts.HOME_INTRO),
        *inbox_blocks(inbox, links=links, lead=lead, layout=HOME),
        context(updated),
    ]
    return {"type": "home", "blocks": blocks}


def home_unavailable_view() -> dict[str, Any]:
    """The Home tab when the inbox cannot be read (the store is down)."""
    return {
        "type": "home",
        "blocks": [
            {"type": "header", "text": plain(texts.HOME_TITLE)},
            section(texts.INBOX_UNAVAILABLE),
        ],
    }


def inbox_blocks(inbox: Inbox, *, links: Links, lead: str | None, layout: Layout) -> list[Block]:
    """The inbox's blocks: the lead, what waits (with buttons), the person's requests,
    their decisions and their grants."""
    blocks: list[Block] = []
    if lead:
        blocks += [section(lead), {"type": "divider"}]
    blocks += _waiting(inbox.waiting, links, layout)
    blocks.append({"type": "divider"})
    requested = [_request_line(card, links) for card in inbox.requested]
    blocks.append(_listing(texts.INBOX_REQUESTED, requested, empty=texts.INBOX_NO_REQUESTS))
    decided = [_decision_line(decision) for decision in inbox.decided]
    blocks.append(_listing(texts.INBOX_DECIDED, decided, empty=texts.INBOX_NO_DECISIONS))
    grants = (
        texts.INBOX_GRANTS.format(count=inbox.grants) if inbox.grants else texts.INBOX_NO_GRANTS
    )
    blocks.append(context(grants))
    return blocks


def links_wanted(inbox: Inbox, layout: Layout = COMMAND) -> list[ThreadKey]:
    """The threads whose permalinks the inbox shows (each once)."""
    shown = [*inbox.waiting[: layout.waiting_shown], *inbox.requested[:ITEMS_SHOWN]]
    threads = [card.requested_in for card in shown if card.requested_in is not None]
    return list(dict.fromkeys(threads))


async def inbox_links(inbox: Inbox, permalink: Permalink, layout: Layout = COMMAND) -> Links:
    """The permalinks the inbox shows, asked for together (those Slack gives)."""
    threads = links_wanted(inbox, layout)
    found = await asyncio.gather(*(permalink(thread.channel, thread.root) for thread in threads))
    return {
        (thread.channel, thread.root): link
        for thread, link in zip(threads, found, strict=True)
        if link
    }


def done_line(card: ApprovalCard) -> str:
    """What a click from the inbox did: "`deploy`: Approved by @x" (or the votes so far)."""
    tool = escape(tool_label(card))
    outcome = outcome_text(card) if card.status != "pending" else approvals_text(card)
    return texts.INBOX_DONE.format(tool=tool, outcome=outcome)


def _waiting(cards: tuple[ApprovalCard, ...], links: Links, layout: Layout) -> list[Block]:
    if not cards:
        return [section(f"{texts.INBOX_WAITING}\n{layout.nothing_waiting}")]
    blocks: list[Block] = [section(texts.INBOX_WAITING_COUNT.format(count=len(cards)))]
    for card in cards[: layout.waiting_shown]:
        facts = [texts.INBOX_ASKED_BY.format(who=_requester(card))]
        if card.requested_in is not None:
            where = requested_in_text(card.requested_in, _link(card.requested_in, links))
            facts.append(texts.INBOX_IN.format(where=where))
        facts.append(texts.INBOX_EXPIRES.format(when=slack_date(card.expires_at)))
        if card.quorum > 1:
            facts.append(approvals_text(card))
        line = f"{_call(card)}\n{texts.INBOX_SEPARATOR.join(facts)}"
        buttons = decision_buttons(card) + edit_button(card)
        blocks += [section(line), {"type": "actions", "elements": buttons}]
    hidden = len(cards) - layout.waiting_shown
    if hidden > 0:
        blocks.append(context(layout.more_waiting.format(count=hidden)))
    return blocks


def _request_line(card: ApprovalCard, links: Links) -> str:
    facts = [texts.INBOX_EXPIRES.format(when=slack_date(card.expires_at))]
    if card.requested_in is not None:
        where = requested_in_text(card.requested_in, _link(card.requested_in, links))
        facts.insert(0, texts.INBOX_IN.format(where=where))
    return f"• {_call(card)} · {texts.INBOX_SEPARATOR.join(facts)}"


def _decision_line(decision: InboxDecision) -> str:
    outcome = escape(RECENT[decision.outcome])
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
    return clip(escape(pairs), ARGS_SUMMARY_LIMIT + len(ELLIPSIS), escaped=True)


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value.replace("\n", " ")
    return json.dumps(value, ensure_ascii=False, default=str)


def _requester(card: ApprovalCard) -> str:
    return mention(card.requester) if card.requester else texts.UNKNOWN_PERSON


def _link(thread: ThreadKey, links: Links) -> str | None:
    return links.get((thread.channel, thread.root))
