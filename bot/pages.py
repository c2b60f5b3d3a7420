"""Decision pages: a card decided in a browser, through the link of one approver.

``GET /approve/<token>`` shows the card as the core composes it (``card_document``),
with Approve, Decline (and its reason), Edit and the grants the card offers while the
link may decide; ``POST`` decides through the same claim as a click in the chat
(``ChatBot.on_click``), as the link's person. What the page says is decided here, as a
``DecisionPage``; an adapter (``adapters.web``) draws it as HTML.

The form carries back the asking of the card it showed (``Click.ask``): a call asked
again since (other arguments) is refused as outdated, never approved unseen. A link is
spent by its first decision that counts (``Links.spend``); a used, expired, unknown or
forged link says so and decides nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Final

from agents import Agent, RunNotFoundError

from . import texts
from .compose import card_document, rich
from .document import Document, Rich
from .intake import Overloaded
from .links import LinkFor, Links
from .people import People
from .types import ApprovalCard, Click, ClickAction, ClickResult, Person, Text
from .views import thread_of

WEB: Final = "web"
"""What a decision page's clicks came through, in the audit log (``Click.via``)."""

GRANT: Final = "grant:"
"""A form's ``action`` of a grant: ``grant:<duration>`` (``grant:1h``)."""
NEVER: Final = "never:"
"""A form's ``action`` of a standing decline: ``never:<duration>``."""
_ACTIONS: Final[dict[str, ClickAction]] = {
    "approve": "approve",
    "decline": "decline",
    "edit": "edit",
    "respond": "respond",
}


@dataclass(frozen=True, kw_only=True)
class PageForm:
    """What a decision page's form sends: the button pressed (``approve``, ``decline``,
    ``edit``, ``grant:<duration>``), the asking of the card it showed, the decline's
    reason and the edit's fields (as text)."""

    action: str
    ask: str
    reason: str | None = None
    values: Mapping[str, str] | None = None


@dataclass(frozen=True, kw_only=True)
class DecisionPage:
    """A decision page as it reads: its HTTP status, what it says to the approver, the
    card (``document``), and whether its buttons decide (``decides``, with the ``ask``
    the form carries back)."""

    status: int
    said: Rich = ()
    document: Document | None = None
    decides: bool = False
    ask: str = ""


@dataclass(frozen=True, kw_only=True)
class _Opened:
    """A link opened: what it names, its person's click as a look at the card, the card
    as it reads now, whether the link was used, and who its person is."""

    link: LinkFor
    click: Click
    card: ApprovalCard
    spent: bool
    who: Person


class DecisionPages:
    """Decision pages over the core's cards and clicks.

    Args:
        agent: Where a link's run is read (its thread).
        links: How links are read and spent.
        people: Who the link's person is (their name, when known).
        card_now: The card a click names, as it reads now.
        check: Why a click would be refused (``None``: it would count).
        click: Decide, as a click in the chat does (the intake's claim).
    """

    def __init__(
        self,
        *,
        agent: Agent,
        links: Links,
        people: People,
        card_now: Callable[[Click], Awaitable[ApprovalCard | None]],
        check: Callable[[Click], Awaitable[Text | None]],
        click: Callable[[Click], Awaitable[ClickResult]],
    ) -> None:
        self._agent = agent
        self._links = links
        self._people = people
        self._card_now = card_now
        self._check = check
        self._click = click

    async def page(self, token: str) -> DecisionPage:
        """The page ``token`` opens."""
        opened = await self._open(token)
        if isinstance(opened, DecisionPage):
            return opened
        return await self._shown(opened)

    async def decide(self, token: str, form: PageForm | None) -> DecisionPage:
        """Decide with ``token``'s link as ``form`` says (``None``: the body was not the
        page's form); the page as it then reads."""
        if form is None:
            return DecisionPage(status=400, said=(texts.PAGE_BAD_FORM,))
        opened = await self._open(token)
        if isinstance(opened, DecisionPage):
            return opened
        if opened.card.status != "pending" or opened.spent:
            return await self._shown(opened)
        pressed = _pressed(form.action)
        if pressed is None:
            return await self._shown(opened, status=400, said=(texts.PAGE_UNKNOWN_ACTION,))
        try:
            result = await self._click(_click(opened, form, *pressed))
        except Overloaded:
            return DecisionPage(status=503, said=(texts.CLICK_UNAVAILABLE,))
        if result.accepted:
            await self._links.spend(opened.link)
            card = result.card if isinstance(result.card, ApprovalCard) else opened.card
            said = result.said or (texts.PAGE_DONE,)
            return DecisionPage(status=200, said=said, document=_card(card, decides=False))
        status = 400 if result.retry else 409  # a retry: an edit that did not fit
        now = await self._open(token)  # as it reads after the refusal
        if isinstance(now, DecisionPage):
            return now
        return await self._shown(now, status=status, said=result.said)

    async def _open(self, token: str) -> _Opened | DecisionPage:
        """The link's call as it reads now, or the page saying why it cannot be opened."""
        link = await self._links.read(token)
        if link is None:
            return DecisionPage(status=401, said=(texts.PAGE_FORGED,))
        try:
            snap = await self._agent.get_run(link.run_id)
        except RunNotFoundError:
            return DecisionPage(status=410, said=(texts.PAGE_UNKNOWN,))
        thread = thread_of(snap.metadata)
        if thread is None:
            return DecisionPage(status=410, said=(texts.PAGE_UNKNOWN,))
        who = self._people.who(thread, link.user_id)
        looking = Click(
            thread=thread,
            user_id=link.user_id,
            run_id=link.run_id,
            tool_call_id=link.tool_call_id,
            action="approve",
            user_name=who.name,
            via=WEB,
        )
        card = await self._card_now(looking)
        if card is None:
            return DecisionPage(status=410, said=(texts.PAGE_UNKNOWN,))
        spent = await self._links.spent(link)
        return _Opened(link=link, click=looking, card=card, spent=spent, who=who)

    async def _shown(
        self, opened: _Opened, *, status: int | None = None, said: Rich = ()
    ) -> DecisionPage:
        """The page of a link opened: its card, with buttons while the link decides."""
        card = opened.card
        if card.status == "expired":
            return _over(card, status or 410, said or (texts.PAGE_EXPIRED,))
        if opened.spent:
            return _over(card, status or 410, said or (texts.PAGE_USED,))
        if card.status != "pending":
            return _over(card, status or 410, said or (texts.PAGE_DECIDED,))
        refusal = await self._check(replace(opened.click, ask=card.ask))
        if refusal is not None:
            return _over(card, status or 403, said or refusal)
        return DecisionPage(
            status=status or 200,
            said=said or rich(texts.PAGE_FOR, who=opened.who),
            document=_card(card, decides=True),
            decides=True,
            ask=card.ask,
        )


def _over(card: ApprovalCard, status: int, said: Rich) -> DecisionPage:
    return DecisionPage(status=status, said=said, document=_card(card, decides=False))


def _card(card: ApprovalCard, *, decides: bool) -> Document:
    """The card as the chat shows it: with its buttons (and reason box) only while the
    page decides; without them, as anyone who may not decide sees it."""
    document = card_document(card)
    if decides or card.status != "pending":
        return document
    body = tuple(b for b in document.body if b.type != "input")
    return replace(document, body=body, actions=())


def _pressed(action: str) -> tuple[ClickAction, str | None] | None:
    """The click a form's ``action`` is (and a grant's duration), or ``None`` for a
    button the page has not."""
    if action.startswith(GRANT):
        return "grant", action.removeprefix(GRANT)
    if action.startswith(NEVER):
        return "never", action.removeprefix(NEVER)
    if action in _ACTIONS:
        return _ACTIONS[action], None
    return None


def _click(opened: _Opened, form: PageForm, action: ClickAction, grant_for: str | None) -> Click:
    """The click ``form`` makes as the link's person, on the card it showed."""
    return replace(
        opened.click,
        action=action,
        reason=form.reason if action == "decline" else None,
        values=dict(form.values or {}) if action in ("edit", "respond") else None,
        grant_for=grant_for,
        ask=form.ask,
    )
