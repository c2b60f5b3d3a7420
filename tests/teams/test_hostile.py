"""Hostile input at /api/messages: every answer is 2xx or 4xx, nothing is posted unasked."""

from __future__ import annotations

import json

import pytest

from . import activities as act
from .conftest import MakeBot
from .fake_connector import FakeConnector


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
