"""A person's approvals list (``bot.inbox_document``) as Block Kit.

Shown two ways: as the answer to ``/approvals``, which only the person who asked
sees (an ephemeral message through ``response_url``), and as their App Home tab
(``views.publish``). The waiting calls have the card's own Approve, Decline and
Edit buttons, so a click there goes the way a click on the card goes. Lists are
capped so each stays within Slack's limits (50 blocks a message, 100 a Home tab,
3000 characters a section), saying how many more there are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from bot import Document, Inbox, Rich, ThreadKey, inbox_document, rich_plain

from . import texts
from .blocks import ITEMS_SHOWN, SlackMessage, draw
from .mrkdwn import Places, clip, plain, section
from .wire import APPROVALS_COMMAND

HEADER_LIMIT = 150
"""Characters of a header block."""

Links = Mapping[tuple[str, str], str]
"""Permalinks of threads, by ``(channel, root)``."""
Permalink = Callable[[str, str, str], Awaitable[str | None]]
"""The permalink of a message (channel, ts, workspace), or ``None`` when Slack gives none."""


@dataclass(frozen=True, kw_only=True)
class Layout:
    """How much of an approvals list one surface shows."""

    waiting_shown: int
    """Waiting calls shown with buttons (two blocks each)."""


COMMAND = Layout(waiting_shown=10)  # 20 blocks and a few more: well within a message's 50
"""``/approvals``: one message."""
HOME = Layout(waiting_shown=20)  # 40 blocks and a few more: well within a Home tab's 100
"""The Home tab."""


def inbox_message(inbox: Inbox, *, links: Links, note: Rich = ()) -> SlackMessage:
    """The list as ``/approvals`` answers; ``note`` first, when a click from it was just
    carried out."""
    document = inbox_document(inbox, command=APPROVALS_COMMAND, note=note)
    return _drawn(document, links, COMMAND)


def home_view(
    inbox: Inbox, *, links: Links, note: Rich = (), now: datetime | None = None
) -> dict[str, Any]:
    """The list as a Home tab (a ``views.publish`` view), its title as the tab's header;
    ``note`` first: what the person's last click there did, or why not."""
    document = inbox_document(
        inbox, command=APPROVALS_COMMAND, note=note, kept_current=now or datetime.now(UTC)
    )
    header = {"type": "header", "text": plain(clip(rich_plain(document.title), HEADER_LIMIT))}
    message = _drawn(replace(document, title=()), links, HOME)
    return {"type": "home", "blocks": [header, *message.blocks]}


def home_unavailable_view() -> dict[str, Any]:
    """The Home tab when the list cannot be read (the store is down)."""
    return {"type": "home", "blocks": [section(texts.INBOX_UNAVAILABLE)]}


def links_wanted(inbox: Inbox, layout: Layout = COMMAND) -> list[ThreadKey]:
    """The threads whose permalinks the list shows (each once)."""
    shown = [*inbox.waiting[: layout.waiting_shown], *inbox.requested[:ITEMS_SHOWN]]
    threads = [card.requested_in for card in shown if card.requested_in is not None]
    return list(dict.fromkeys(threads))


async def inbox_links(inbox: Inbox, permalink: Permalink, layout: Layout = COMMAND) -> Links:
    """The permalinks the list shows, asked for together (those Slack gives)."""
    threads = links_wanted(inbox, layout)
    found = await asyncio.gather(
        *(permalink(thread.channel, thread.root, thread.workspace) for thread in threads)
    )
    return {
        (thread.channel, thread.root): link
        for thread, link in zip(threads, found, strict=True)
        if link
    }


def _drawn(document: Document, links: Links, layout: Layout) -> SlackMessage:
    (message,) = draw(document, places=_places(links), decidable_shown=layout.waiting_shown)
    return message


def _places(links: Links) -> Places:
    return lambda thread: links.get((thread.channel, thread.root))
