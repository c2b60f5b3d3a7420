"""Universal Actions ``refresh`` on approval cards: each viewer sees the card as it is
now, with the buttons only for the people who may decide it.

A pending card's message (the "base card", what everyone sees) carries a
``refresh`` whose ``Action.Execute`` (verb ``refresh``) names the card; Teams
sends it as an ``adaptiveCard/action`` invoke (``trigger: automatic``) for each
person in ``refresh.userIds`` (at most 60 Teams user ids, the ``29:`` ones) when
their client shows the card, and the bot answers with that person's view
(``view_for``): pending with Approve / Decline / Edit and the reason box for an
approver, the status only for anyone else, how it ended once decided or expired.
Without ``userIds`` every member refreshes, in a conversation of at most 60.

Who sees what in the message itself (``Audience``): in a 1:1 chat, the one person
there, by whether they may decide; elsewhere the status only, when every approver
there gets a refresh; when one might not (their id could not be looked up, there
are more than 60, anyone may decide), the buttons stay on the base card, as
before, and the core still refuses anyone else's click.

A decided card has no ``refresh``: it changes no more, and the core replaces the
message for everyone when it is decided.

Plain JSON, like ``cards``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from bot import ApprovalCard, compose

from . import cards, texts
from .convert import REFRESH_VERB

MAX_USER_IDS: Final = 60
"""Teams refreshes a card automatically for at most 60 listed people."""


@dataclass(frozen=True, kw_only=True)
class Audience:
    """How a pending card's message is drawn for everyone: with buttons or not, and who
    gets their own view (``user_ids``; ``None``: every member, where Teams does that)."""

    actionable: bool
    user_ids: tuple[str, ...] | None = None


EVERYONE: Final = Audience(actionable=True)
"""Anyone may decide (or who may is unknown): the buttons for all, a refresh for all."""


def personal(card: ApprovalCard, person: Iterable[str]) -> Audience:
    """The audience in a 1:1 chat: its one person (by any of their ids)."""
    return Audience(actionable=may_decide(card, person))


def among(
    card: ApprovalCard, found: dict[str, str | None], *, unknown: Iterable[str] = ()
) -> Audience:
    """The audience in a group chat or channel, given the Teams id of each decider (and
    the requester) found there (``None``: not a member) and those that could not be
    looked up (``unknown``)."""
    if not card.deciders:
        return EVERYONE
    deciders = [teams_id for name in card.deciders if (teams_id := found.get(name))]
    requester = found.get(card.requester.id) if card.requester is not None else None
    ids = tuple(dict.fromkeys([*deciders, *([requester] if requester else [])]))
    missed = not set(unknown).isdisjoint(card.deciders)
    return Audience(actionable=missed or len(deciders) > MAX_USER_IDS, user_ids=ids[:MAX_USER_IDS])


def may_decide(card: ApprovalCard, ids: Iterable[str]) -> bool:
    """Whether someone (by any of their ids) may decide ``card`` by the policy: anyone
    may when it names nobody. Display only: the core decides every click."""
    return not card.deciders or not set(card.deciders).isdisjoint(ids)


def view_for(card: ApprovalCard, viewer: Iterable[str], teams_id: str | None) -> dict[str, Any]:
    """The card as one viewer (by any of their ids) sees it now: the answer to their
    refresh, or to their click. It keeps a refresh for them (``teams_id``)."""
    if card.status != "pending":
        return cards.draw(compose(card))
    ids = (teams_id,) if teams_id else ()
    document = compose(card, actionable=may_decide(card, viewer))
    return cards.draw(document, refresh=block(card, ids))


def block(card: ApprovalCard, user_ids: tuple[str, ...] | None) -> dict[str, Any]:
    """The ``refresh`` of a pending card (``userIds`` left out when ``None``)."""
    data = {
        "kind": cards.KIND,
        "action": REFRESH_VERB,
        "run_id": card.run_id,
        "tool_call_id": card.tool_call_id,
    }
    if card.ask:
        data[cards.ASK] = card.ask
    refresh: dict[str, Any] = {
        "action": {
            "type": "Action.Execute",
            "title": texts.CARD_REFRESH,
            "verb": REFRESH_VERB,
            "data": data,
        }
    }
    if user_ids is not None:
        refresh["userIds"] = list(user_ids)
    return refresh
