"""The HTTP edge of /api/messages: what is refused, and what never needs an answer."""

from __future__ import annotations

import logging

import pytest

from adapters.teams import TeamsAdapter, TeamsNotConfigured, TeamsSettings, load_teams_settings
from adapters.teams.turns import TeamsBot
from agents import MemoryStore
from bot import Undeliverable
from bot.core import ChatBot

from . import activities as act
from .conftest import MakeBot
from .fake_connector import FakeConnector
from .scripted import build_agent


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"{not json", id="not-json"),
        pytest.param(b"[1, 2]", id="a-list"),
        pytest.param(b'{"text": "no type"}', id="no-type"),
        pytest.param(
            b'{"type": 5, "conversation": {"id": "x"}, "serviceUrl": "http://x"}', id="type-not-str"
        ),
        pytest.param(b'{"type": "message", "serviceUrl": "http://x"}', id="no-conversation"),
        pytest.param(b'{"type": "message", "conversation": {"id": "x"}}', id="no-service-url"),
        pytest.param(
            b'{"type": "message", "conversation": {"id": "x"}, "serviceUrl": "http://x",'
            b' "timestamp": "yesterday"}',
            id="bad-field",
        ),
    ],
)
async def test_a_body_that_is_not_an_activity_is_a_400(make_bot: MakeBot, body: bytes) -> None:
    teams = await make_bot()
    assert (await teams.post_raw(body)).status == 400


async def test_a_body_that_is_not_json_typed_is_a_415(make_bot: MakeBot) -> None:
    teams = await make_bot()
    assert (await teams.post_raw(b"{}", content_type="text/plain")).status == 415


async def test_other_invokes_and_activities_get_an_empty_200(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    invoke = act.message(connector.url, "", conversation=act.chat_conversation())
    invoke.update(type="invoke", name="task/fetch", value={})
    answer = await teams.post(invoke)
    assert (answer.status, answer.body) == (200, None)

    update = act.message(connector.url, "", conversation=act.chat_conversation())
    update.update(type="conversationUpdate", membersAdded=[act.BOT])
    assert (await teams.post(update)).status == 200
    await teams.bot.drain()
    assert connector.calls == []


async def test_an_unknown_card_verb_is_answered_for_the_clicker(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    invoke = act.message(connector.url, "", conversation=act.chat_conversation())
    invoke.update(
        type="invoke",
        name="adaptiveCard/action",
        value={"action": {"type": "Action.Execute", "verb": "refresh", "data": {}}},
    )
    answer = await teams.post(invoke)
    assert answer.status == 200
    assert answer.body["type"] == "application/vnd.microsoft.activity.message"


async def test_the_adapter_refuses_to_start_without_an_app_id_or_the_local_switch() -> None:
    bot = ChatBot(build_agent(MemoryStore(), []))
    with pytest.raises(TeamsNotConfigured):
        TeamsAdapter(bot, TeamsSettings())


async def test_unauthenticated_mode_is_logged_loudly(caplog: pytest.LogCaptureFixture) -> None:
    bot = ChatBot(build_agent(MemoryStore(), []))
    adapter = TeamsAdapter(bot, load_teams_settings(teams_allow_unauthenticated=True))
    with caplog.at_level(logging.WARNING, logger="adapters.teams"):
        await adapter.start()
    assert any(
        r.levelno == logging.WARNING and "UNAUTHENTICATED" in r.getMessage() for r in caplog.records
    )
    await adapter.stop()


async def test_an_activity_the_bot_cannot_keep_gets_503(
    make_bot: MakeBot, connector: FakeConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = await make_bot()

    async def down(*args: object, **kwargs: object) -> str | None:
        raise ConnectionError("store down")

    monkeypatch.setattr("bot.intake.BUFFER_LIMIT", 0)
    monkeypatch.setattr(bot.bot.chat, "enqueue", down)
    activity = act.message(connector.url, "hello", conversation=act.chat_conversation())
    answer = await bot.post(activity)
    assert answer.status == 503  # the Bot Framework sends it again
    await bot.bot.drain()
    assert connector.calls == []


async def test_a_turn_that_cannot_send_is_answered_200_not_500(
    make_bot: MakeBot,
    connector: FakeConnector,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    teams = await make_bot()

    async def cannot_send(self: TeamsBot, context: object) -> None:
        raise Undeliverable("http://127.0.0.1:9/ is unreachable")

    monkeypatch.setattr(TeamsBot, "on_turn", cannot_send)
    activity = act.message(connector.url, "hello", conversation=act.chat_conversation())
    answer = await teams.post(activity)

    assert answer.status == 200  # Teams sending it again would not mend the service
    (said,) = [r for r in caplog.records if r.name == "adapters.teams.handler"]
    assert "unreachable" in said.getMessage()
    assert not said.exc_info


def test_the_msrest_retry_fix_keeps_the_same_retry_policy() -> None:
    from msrest.universal_http.requests import ClientRetryPolicy

    codes = ClientRetryPolicy.safe_codes
    assert isinstance(codes, frozenset)  # applied on import of the adapter
    as_shipped = [i for i in range(500) if i != 408] + [501, 505]
    assert set(codes) == set(as_shipped)
    retry = ClientRetryPolicy().policy
    assert retry.status_forcelist == [i for i in range(999) if i not in as_shipped]
