"""The ``approvals`` command's answer: one person's approvals list
(``bot.inbox_document``) as an Adaptive Card.

What waits for them has Approve and Decline, whose data is a card's (marked as shown
in the list), so a click goes the way a click on the card in its thread goes. Lists
are capped ("…and N more") and shortened until the card fits a Teams message.
"""

from __future__ import annotations

from typing import Any, Final

from bot import Inbox, Rich, inbox_document

from . import cards

COMMAND: Final = "approvals"
"""How Teams names the approvals command (a message to the bot in its 1:1 chat)."""

MAX_WAITING: Final = 8
MAX_REQUESTED: Final = 5
MAX_DECIDED: Final = 10

_LIMITS: Final = (
    cards.Limits(value=300, items=(MAX_WAITING, MAX_REQUESTED, MAX_DECIDED)),
    cards.Limits(value=80, items=(MAX_WAITING, MAX_REQUESTED, MAX_DECIDED)),
    cards.Limits(value=40, text=1000, items=(4, 3, 5)),
    cards.Limits(value=20, text=300, items=(2, 1, 3)),
    cards.Limits(value=20, text=300, items=(1, 0, 0)),
)
"""Tried in turn until the card fits: fewer entries (waiting for them, their requests,
their decisions), shorter values."""


def inbox_card(inbox: Inbox, *, note: Rich = ()) -> dict[str, Any]:
    """The list as a card; ``note`` tops it (how the last click in it went)."""
    document = inbox_document(inbox, command=COMMAND, note=note)
    return cards.draw(document, shown_in=cards.INBOX, limits=_LIMITS)


def summary(inbox: Inbox) -> str:
    """A one-line plain text for notifications."""
    return cards.summary(inbox_document(inbox, command=COMMAND))
