"""A Teams bot behind real Bot Framework auth, and the cards it posts, for tests that
press their buttons: every inbound activity carries a signed channel token (checked by
the SDK against a local OpenID endpoint); only the bot's own outbound token is made up,
since it would come from Entra."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import pytest
from botframework.connector.auth import MicrosoftAppCredentials

from adapters.teams import TeamsSettings, cards, load_teams_settings

from . import activities as act
from .conftest import Answer, TeamsBot
from .fake_connector import ConnectorCall, FakeConnector
from .signing import APP_ID, make_token, serve_openid

BOT_TOKEN = "bot-framework-token-for-the-bot"
"""What the bot's outbound calls carry instead of a token from Entra."""


def form(**values: Any) -> dict[str, Any]:
    """Input values by field name, keyed by their inputs' ids."""
    return {cards.FIELD_INPUT_PREFIX + name: value for name, value in values.items()}


def in_thread(root: str) -> str:
    """The conversation id of a channel thread."""
    return f"{act.CHANNEL};messageid={root}"


def signed_settings() -> TeamsSettings:
    """Settings that make the adapter check every inbound token (a single-tenant bot, the
    default app type)."""
    return load_teams_settings(
        microsoft_app_id=APP_ID,
        microsoft_app_password="not-a-real-secret",
        microsoft_app_tenant_id=act.TENANT,
    )


@asynccontextmanager
async def token_for(
    connector: FakeConnector, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[str]:
    """A channel token the bot accepts while this lasts (and its outbound token made up)."""

    def token_from_entra(self: MicrosoftAppCredentials, force_refresh: bool = False) -> str:
        return BOT_TOKEN

    monkeypatch.setattr(MicrosoftAppCredentials, "get_access_token", token_from_entra)
    async with serve_openid(monkeypatch) as openid:
        yield make_token(openid.key, connector.url)


@dataclass
class SignedBot:
    """The bot, and how Teams talks to it: signed activities, one thread per request."""

    teams: TeamsBot
    connector: FakeConnector
    token: str

    async def post(self, activity: dict[str, Any]) -> Answer:
        """Post an activity as Teams does: with a signed channel token."""
        answer = await self.teams.post(activity, headers={"Authorization": f"Bearer {self.token}"})
        assert answer.status == 200, answer
        return answer

    async def ask(self, text: str, *, user: dict[str, Any] = act.ALICE) -> Posted:
        """Start a channel thread with ``text``; the one card the bot posted there."""
        root = act.next_id()
        await self.post(
            act.channel_post(self.connector.url, text, activity_id=root, mention=True, user=user)
        )
        await self.teams.bot.drain()
        (posted,) = self.connector.cards(in_thread(root))
        return Posted(self, root, posted)

    async def seen_by(
        self, posted: ConnectorCall, *, user: dict[str, Any], conversation: dict[str, Any]
    ) -> dict[str, Any]:
        """A posted card as ``user`` sees it: what their refresh answers when Teams
        refreshes it for them (an approver's buttons), else the card as posted."""
        card = posted.card
        assert card is not None
        if not act.refreshes_for(card, user):
            return card
        invoke = act.refresh(
            self.connector.url,
            card,
            conversation=conversation,
            card_id=posted.response_id,
            user=user,
        )
        answer = await self.post(invoke)
        assert answer.body["type"] == cards.CONTENT_TYPE, answer.body
        seen: dict[str, Any] = answer.body["value"]
        return seen


@dataclass
class Posted:
    """A card the bot posted (an approval or a question), and its thread."""

    bot: SignedBot
    root: str
    posted: ConnectorCall
    shown: dict[str, Any] | None = None
    """The card as one person sees it (``seen_by``), when not as posted."""

    @property
    def card(self) -> dict[str, Any]:
        if self.shown is not None:
            return self.shown
        assert self.posted.card is not None
        return self.posted.card

    def as_posted(self) -> Posted:
        """This card as posted, as a client shows it that has not refreshed it (an old
        card pressed after its call was decided)."""
        assert self.posted.card is not None
        return replace(self, shown=self.posted.card)

    async def seen_by(self, user: dict[str, Any]) -> Posted:
        """This card as ``user`` sees it: what their refresh answers when Teams refreshes
        it for them (an approver's buttons), else as posted. Its buttons press as theirs."""
        conversation = act.channel_conversation(self.root)
        seen = await self.bot.seen_by(self.posted, user=user, conversation=conversation)
        return replace(self, shown=seen)

    async def press(
        self, verb: str, *, user: dict[str, Any] = act.BOB, values: dict[str, Any] | None = None
    ) -> Answer:
        """Press a button (Action.Execute) on the card as ``user`` sees it (unless this is
        someone's view already), with the form's values; settle the work after."""
        seen = self if self.shown is not None else await self.seen_by(user)
        return await self.send(seen._click(act.execute, verb, user, values))

    async def submit(
        self, verb: str, *, user: dict[str, Any] = act.BOB, values: dict[str, Any] | None = None
    ) -> Answer:
        """The same through the Action.Submit fallback (a message activity)."""
        seen = self if self.shown is not None else await self.seen_by(user)
        return await self.send(seen._click(act.submit, verb, user, values))

    def _click(
        self, kind: Any, verb: str, user: dict[str, Any], values: dict[str, Any] | None
    ) -> dict[str, Any]:
        click: dict[str, Any] = kind(
            self.bot.connector.url,
            self.card,
            verb,
            conversation=act.channel_conversation(self.root),
            card_id=self.posted.response_id,
            user=user,
            inputs=form(**values) if values is not None else None,
        )
        return click

    async def send(self, activity: dict[str, Any]) -> Answer:
        """Post an activity about this card, then let the work it caused finish."""
        answer = await self.bot.post(activity)
        await self.bot.teams.bot.drain()
        return answer

    def updates(self) -> list[dict[str, Any]]:
        """The cards this card's message was replaced with, for everyone, in order."""
        return [
            u.body["attachments"][0]["content"]
            for u in self.bot.connector.updates()
            if u.activity_id == self.posted.response_id
        ]

    def texts(self) -> list[str]:
        """What the bot said in this card's thread."""
        return self.bot.connector.texts(in_thread(self.root))
