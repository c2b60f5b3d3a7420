"""Hostile input at /api/messages: every answer is 2xx or 4xx, nothing is posted unasked."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from botframework.connector.auth import MicrosoftAppCredentials

from adapters.teams import cards

from . import activities as act
from .conftest import MakeBot, TeamsBot
from .fake_connector import ConnectorCall, FakeConnector
from .signed import Posted, SignedBot, signed_settings, token_for


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("levels", [10_000, 100_000])
async def test_json_nested_too_deep_is_refused_with_400(
    make_bot: MakeBot, connector: FakeConnector, levels: int
) -> None:
    teams = await make_bot()
    assert (await teams.post_raw(deep(levels).encode())).status == 400
    activity = act.message(connector.url, "hi", conversation=act.chat_conversation(), mention=True)
    inside = json.dumps(activity)[:-1] + ', "channelData": ' + deep(levels) + "}"
    assert (await teams.post_raw(inside.encode())).status == 400
    await teams.bot.drain()
    assert connector.calls == []


async def test_lone_surrogates_are_refused_with_400(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    activity = act.message(
        connector.url, "deploy api\ud800", conversation=act.chat_conversation(), mention=True
    )
    assert (await teams.post_raw(json.dumps(activity).encode())).status == 400
    await teams.bot.drain()
    assert connector.calls == []


async def test_the_bot_never_answers_its_own_messages(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    own = act.message(connector.url, "deploy api", conversation=act.chat_conversation())
    own["from"], own["recipient"] = own["recipient"], own["from"]
    answer = await teams.post(own)
    assert answer.status in (200, 202)
    await teams.bot.drain()
    assert connector.calls == []


async def test_without_authentication_only_a_local_service_url_is_answered(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    remote = act.message(
        "https://smba.trafficmanager.net/emea/",
        "deploy api",
        conversation=act.chat_conversation(),
        mention=True,
    )
    answer = await teams.post(remote)
    assert answer.status == 401
    await teams.bot.drain()
    assert connector.calls == []


async def test_an_unreachable_service_url_is_logged_once_and_answered(
    make_bot: MakeBot, caplog: pytest.LogCaptureFixture
) -> None:
    teams = await make_bot()
    closed = act.message(
        "http://127.0.0.1:9/", "deploy api", conversation=act.chat_conversation(), mention=True
    )
    answer = await teams.post(closed)
    assert answer.status in (200, 202)
    await teams.bot.drain()
    said = [r for r in caplog.records if r.name == "bot.presenter"]
    assert [r.getMessage().split(" failed:")[0] for r in said] == [
        "setting the status in teams:tenant-1:a:personal-chat-with-alice:chat",
        "posting a ApprovalCard to teams:tenant-1:a:personal-chat-with-alice:chat",
    ]  # once per failed call ...
    assert not [r for r in said if r.exc_info]  # ... in one line, with no traceback


# -- a service the bot cannot reach, or a token it cannot get ---------------------------

CLOSED = "http://127.0.0.1:9/"
"""A service URL nothing listens on (the discard port)."""


def complaints(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """What the bot logged at WARNING or above since the last ``caplog.clear()``."""
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def assert_one_line_each(records: list[logging.LogRecord]) -> None:
    """Each failed call is one line from the code that made it: no traceback, no
    second line for the same failure from a library (urllib3's retries) or the token."""
    assert records
    assert not [r for r in records if r.exc_info], [r.getMessage() for r in records]
    assert {r.name for r in records} <= {"bot.presenter", "adapters.teams.turns"}, [
        (r.name, r.getMessage()) for r in records
    ]


@pytest.fixture
async def card(make_bot: MakeBot, connector: FakeConnector) -> Card:
    teams = await make_bot()
    root = act.next_id()
    await teams.post(act.channel_post(connector.url, "deploy api", activity_id=root, mention=True))
    await teams.bot.drain()
    (posted,) = connector.cards()
    return Card(teams, posted, root)


@dataclass
class Card:
    """An approval card the bot posted through the fake connector, and its bot."""

    teams: TeamsBot
    posted: ConnectorCall
    root: str

    def click(self, kind: Any, verb: str, *, service_url: str, user: dict[str, Any]) -> Any:
        assert self.posted.card is not None
        return kind(
            service_url,
            self.posted.card,
            verb,
            conversation=act.channel_conversation(self.root),
            card_id=self.posted.response_id,
            user=user,
        )


async def test_a_submit_from_an_unreachable_service_is_decided_and_answered(
    card: Card, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.clear()
    answer = await card.teams.post(
        card.click(act.submit, "approve", service_url=CLOSED, user=act.BOB)
    )
    await card.teams.bot.drain()

    assert answer.status == 200
    assert card.teams.deployed == ["api"]  # the decision stands; only its card update failed
    assert_one_line_each(complaints(caplog))


async def test_a_refused_submit_from_an_unreachable_service_gets_200_and_one_line(
    card: Card, caplog: pytest.LogCaptureFixture
) -> None:
    await card.teams.post(card.click(act.submit, "approve", service_url=CLOSED, user=act.BOB))
    await card.teams.bot.drain()
    caplog.clear()

    # Already approved: the bot would say so in a reply, which cannot go out.
    answer = await card.teams.post(
        card.click(act.submit, "decline", service_url=CLOSED, user=act.CAROL)
    )
    await card.teams.bot.drain()

    assert answer.status == 200
    assert card.teams.deployed == ["api"]
    said = complaints(caplog)
    assert_one_line_each(said)
    assert len(said) == 1, [r.getMessage() for r in said]


async def test_an_execute_from_an_unreachable_service_is_decided_and_answered(
    card: Card, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.clear()
    answer = await card.teams.post(
        card.click(act.execute, "approve", service_url=CLOSED, user=act.BOB)
    )
    await card.teams.bot.drain()

    assert answer.status == 200
    assert answer.body["type"] == cards.CONTENT_TYPE  # the clicker sees the decided card
    assert card.teams.deployed == ["api"]
    assert_one_line_each(complaints(caplog))


@pytest.fixture
async def locked_out(
    make_bot: MakeBot, connector: FakeConnector, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[SignedBot, Posted]]:
    """A bot whose app password stopped working after it posted a card: Entra refuses
    every token it asks for from then on."""
    async with token_for(connector, monkeypatch) as token:
        bot = SignedBot(await make_bot(settings=signed_settings()), connector, token)
        posted = await bot.ask("deploy api")

        def refused(self: MicrosoftAppCredentials, force_refresh: bool = False) -> str:
            raise PermissionError(
                "Failed to get access token with error: invalid_client, "
                "error_description: AADSTS7000215: Invalid client secret provided."
            )

        monkeypatch.setattr(MicrosoftAppCredentials, "get_access_token", refused)
        yield bot, posted


async def test_with_a_wrong_app_password_a_message_gets_200_and_one_line(
    locked_out: tuple[SignedBot, Posted], caplog: pytest.LogCaptureFixture
) -> None:
    bot, _ = locked_out
    sent = len(bot.connector.calls)
    caplog.clear()

    root = act.next_id()
    await bot.post(act.channel_post(bot.connector.url, "deploy db", activity_id=root, mention=True))
    await bot.teams.bot.drain()

    assert len(bot.connector.calls) == sent  # nothing went out half-way
    said = complaints(caplog)
    assert_one_line_each(said)
    assert len(said) == 1, [r.getMessage() for r in said]  # the card that could not be posted


async def test_with_a_wrong_app_password_clicks_are_decided_and_answered(
    locked_out: tuple[SignedBot, Posted], caplog: pytest.LogCaptureFixture
) -> None:
    bot, posted = locked_out
    caplog.clear()

    approved = await posted.seen_by(act.BOB)
    answer = await approved.submit("approve", user=act.BOB)
    assert answer.status == 200
    assert bot.teams.deployed == ["api"]
    assert_one_line_each(complaints(caplog))
    caplog.clear()

    stale = await posted.as_posted().submit("decline", user=act.CAROL)  # a reply is due
    assert stale.status == 200
    said = complaints(caplog)
    assert_one_line_each(said)
    assert len(said) == 1, [r.getMessage() for r in said]
    caplog.clear()

    again = await posted.as_posted().press("decline", user=act.CAROL)
    assert again.status == 200
    assert again.body["type"] == "application/vnd.microsoft.activity.message"
    assert bot.teams.deployed == ["api"]
    assert complaints(caplog) == []  # the answer is the HTTP body: nothing had to go out
