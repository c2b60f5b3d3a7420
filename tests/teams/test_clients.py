"""A client of the approval service whose channel is a Teams channel.

Teams starts a conversation only near one the bot was addressed in: until someone
talks to the bot in the tenant, the client's requests are refused (400, naming the
channel) and the start check only warns; once someone has, a request starts a new post
in the client's channel, its card below, and a click there answers the client.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot import ApprovalPolicy
from bot.clients import Client, Clients

from . import activities as act
from .conftest import MakeBot
from .fake_connector import FakeConnector
from .refunds import refunds_agent
from .signed import signed_settings, token_for
from .test_routing import Router

DEPLOYS = "19:deploys@thread.tacv2"
TOKEN = "ci-token-0123456789abcdef"
CLIENTS = Clients([Client(name="ci", token=TOKEN, channel=DEPLOYS, workspace=act.TENANT)])
DEPLOY = {"tool": "deploy", "args": {"service": "api", "version": "v2"}, "summary": "Ship v2"}


@pytest.fixture
async def router(
    make_bot: MakeBot, connector: FakeConnector, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Router]:
    async with token_for(connector, monkeypatch) as token:
        ran: list[dict[str, Any]] = []
        teams = await make_bot(
            agent=refunds_agent(ran),
            policy=ApprovalPolicy.from_toml('[tools.ci__deploy]\napprovers = ["aad-bob"]\n'),
            settings=signed_settings(),
            clients=CLIENTS,
        )
        yield Router(teams=teams, connector=connector, token=token, ran=ran)


async def api(
    router: Router, method: str, path: str, body: Any = None, key: str | None = None
) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}", **({"Idempotency-Key": key} if key else {})}
    url = f"{router.teams.url}{path}"
    async with router.teams.session.request(method, url, json=body, headers=headers) as response:
        return response.status, await response.json()


async def test_a_teams_channel_is_reached_once_someone_talked_to_the_bot_there(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="bot.service"):
        await router.teams.bot.check_clients()  # a warning at start, not a reason to stop
    assert any("clients.ci.channel" in r.getMessage() for r in caplog.records)
    assert await router.teams.adapter.messenger.channel_place("C0DEPLOYS") is None  # Slack's
    status, refused = await api(router, "POST", "/v1/approvals", DEPLOY, key="k1")
    assert status == 400
    assert refused["field"] == "channel"
    assert "before someone talks to it" in refused["error"]
    assert router.connector.created == []

    await router.ask_refund()  # Alice mentions the bot in a channel of the tenant
    status, asked = await api(router, "POST", "/v1/approvals", DEPLOY, key="k2")
    assert status == 201
    await router.teams.bot.drain()

    # A new post in the client's channel, from the conversation the bot heard from.
    (created,) = [c for c in router.connector.created if c.channel == DEPLOYS]
    assert created.parameters["channelData"]["tenant"] == {"id": act.TENANT}
    root = created.conversation_id.partition(";messageid=")[2]
    assert "ci asks for approval to run deploy: Ship v2" in str(created.parameters["activity"])
    (card,) = router.connector.cards(created.conversation_id)
    assert "deploy (run by ci)" in str(card.card)
    assert asked["links"], "the approver's decision page"

    conversation = act.channel_conversation(root, channel=DEPLOYS)
    answer = await router.press(card, "approve", conversation=conversation, user=act.BOB)
    assert answer.status == 200
    status, decided = await api(router, "GET", f"/v1/approvals/{asked['id']}?wait=10")
    assert (decided["status"], decided["decided_by"]) == ("approved", "aad-bob")
    assert decided["args"] == DEPLOY["args"]
