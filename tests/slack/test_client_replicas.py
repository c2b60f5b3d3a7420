"""The approval service over replicas and restarts: one durable store (an SQLite file,
the real Redis, the real Redis Cluster), two bots, one fake Slack.

A request sent to both replicas at once is one approval and one card; a long poll or
an MCP wait on one replica answers a click made on the other; a restart while a
client waits loses nothing (the client asks again, anywhere); a callback owed when
a replica stops is delivered by the one that carries on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from adapters.slack.wire import APPROVE_ACTION
from agents import open_store
from bot.callbacks import SIGNATURE, signature
from tests.stores.conftest import DURABLE_KINDS, store_url

from .fake_slack import FakeSlack
from .harness import ALICE, BotServer, replicas_on, start_bot
from .scripted import Ran, build_agent
from .test_approvals import has_buttons
from .test_client_api import CI_CHANNEL, CLIENTS, DEPLOY, TOKEN, Api
from .test_client_mcp import mcp_client, structured


@dataclass
class Replicas:
    a: BotServer
    b: BotServer


@pytest.fixture(params=DURABLE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def replicas(kind: str, slack: FakeSlack, tmp_path: Path) -> AsyncIterator[Replicas]:
    slack.add_channel(CI_CHANNEL, name="deploys")
    ran = Ran()
    async with (
        store_url(kind, tmp_path) as url,
        replicas_on(slack, url, lambda store: build_agent(store, ran), clients=CLIENTS) as (a, b),
    ):
        yield Replicas(a=a, b=b)


def cards(slack: FakeSlack) -> list[object]:
    return [m for m in slack.messages.values() if has_buttons(m)]


async def test_one_key_sent_to_both_replicas_is_one_approval(
    replicas: Replicas, slack: FakeSlack
) -> None:
    a, b = Api(replicas.a), Api(replicas.b)
    (status_a, on_a), (status_b, on_b) = await asyncio.gather(a.ask(key="k"), b.ask(key="k"))
    assert on_a["id"] == on_b["id"]
    assert sorted([status_a, status_b]) == [200, 201]
    await replicas.a.idle()
    await replicas.b.idle()
    await slack.wait_for(lambda: len(cards(slack)) >= 1, what="the card")
    assert len(cards(slack)) == 1


async def test_a_long_poll_and_an_mcp_wait_on_one_replica_answer_a_click_on_the_other(
    replicas: Replicas, slack: FakeSlack
) -> None:
    a, b = Api(replicas.a), Api(replicas.b)
    _, asked = await a.ask()
    await slack.wait_for(lambda: len(cards(slack)) == 1, what="the card")
    (card,) = [m for m in slack.messages.values() if has_buttons(m)]
    async with mcp_client(replicas.b) as client:
        polled = asyncio.create_task(b.get(asked["id"], wait=30))
        waited = asyncio.create_task(
            client.call_tool("get_decision", {"id": asked["id"], "wait_seconds": 30})
        )
        await asyncio.sleep(0.3)
        assert await replicas.a.press(card, APPROVE_ACTION, user=ALICE) == 200
        _, by_poll = await asyncio.wait_for(polled, 15)
        by_mcp = structured(await asyncio.wait_for(waited, 15))
    assert by_poll == by_mcp
    assert (by_poll["status"], by_poll["decided_by"]) == ("approved", ALICE)


async def test_a_restart_while_a_client_waits_loses_nothing(
    kind: str, slack: FakeSlack, tmp_path: Path
) -> None:
    slack.add_channel(CI_CHANNEL, name="deploys")
    hits: list[bytes] = []
    received = asyncio.Event()

    async def hook(request: web.Request) -> web.Response:
        body = await request.read()
        assert request.headers[SIGNATURE] == signature(TOKEN, body)
        hits.append(body)
        received.set()
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/hook", hook)
    receiver = TestServer(app, host="127.0.0.1")
    await receiver.start_server()
    ran = Ran()
    async with store_url(kind, tmp_path) as url:
        store = open_store(url)
        first = await start_bot(slack, build_agent(store, ran), clients=CLIENTS)
        api = Api(first)
        body = {**DEPLOY, "callback_url": str(receiver.make_url("/hook"))}
        _, asked = await api.ask(body, key="restart")
        await slack.wait_for(lambda: len(cards(slack)) == 1, what="the card")
        (card,) = [m for m in slack.messages.values() if has_buttons(m)]

        async def wait_on_first() -> None:
            async with mcp_client(first) as client:
                await client.call_tool("get_decision", {"id": asked["id"], "wait_seconds": 30})

        waiting = asyncio.create_task(wait_on_first())
        await asyncio.sleep(0.5)
        # The replica stops without waiting for a decision: its client's wait is
        # answered as things stand (or cut off) at once, not after 30 s.
        stopping = time.monotonic()
        await first.close()
        assert time.monotonic() - stopping < 15  # the wait was 30 s
        with contextlib.suppress(BaseException):  # the SDK's client, its server gone
            await asyncio.wait_for(waiting, 5)
        await store.close()

        store = open_store(url)
        second = await start_bot(slack, build_agent(store, ran), clients=CLIENTS)
        try:
            again = Api(second)
            status, same = await again.ask(body, key="restart")
            assert (status, same["id"], same["status"]) == (200, asked["id"], "pending")
            assert await second.press(card, APPROVE_ACTION, user=ALICE) == 200
            _, decided = await again.get(asked["id"], wait=15)
            assert decided["status"] == "approved"
            await asyncio.wait_for(received.wait(), 15)
            assert json.loads(hits[-1])["status"] == "approved"
            assert len(cards(slack)) == 0  # decided: the one card has no buttons any more
        finally:
            await second.close()
            await store.close()
    await receiver.close()
