"""How fast the Teams adapter answers, against a bare botbuilder app, per store.

Run with ``python -m bench.teams_bench`` (options: ``--stores memory,sqlite,redis``,
``--sizes 50``, ``--rounds 5``). Everything is local: the real aiohttp server with
the Teams adapter (botbuilder's ``CloudAdapter``) over a ``ChatBot``, the fake Bot
Connector of the tests, activities as Teams sends them, each with a channel token
signed by a local key that the SDK checks against a local OpenID endpoint (the
tests' ``serve_openid``), as in production. Redis is the server at ``REDIS_URL``,
under a private key prefix deleted afterwards. For each store and size N, each
round posts N "deploy" messages at once, each in its own channel thread (N
cards), then N Approve clicks (``Action.Execute`` invokes) at once, and reports
over all rounds:

- ack: message: activity sent -> HTTP response;
- click -> card (clicker): invoke sent -> its response, which carries the decided
  card (the core waits for the decision, up to ``CLICK_WAIT``);
- click -> card (everyone): invoke sent -> the card's update reaching the connector.

The same load goes, in the same run and right before each store's, to a bare
botbuilder app: an ``ActivityHandler`` whose handlers do nothing (an invoke gets
an empty 200), behind the same route, ``CloudAdapter`` and authentication
settings as the adapter's (the least a Teams bot can do). Each figure's p50 and
p99 is printed with its ratio to that baseline's (clicks against the bare invoke).

Client, server and fake connector share one event loop and one CPU, so the
numbers include their contention; the agent work of earlier requests runs
meanwhile. Before each burst the garbage of what came before is collected, and
one round per store warms up (the SDK's key cache, connections) unmeasured.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from botbuilder.core import ActivityHandler, InvokeResponse, TurnContext
from botbuilder.integration.aiohttp import (
    CloudAdapter,
    ConfigurationBotFrameworkAuthentication,
)
from botbuilder.schema import Activity
from botframework.connector.auth import BotFrameworkAuthentication, MicrosoftAppCredentials

from adapters.teams import MESSAGES_PATH, TeamsSettings
from agents import Store
from tests.teams import activities as act
from tests.teams.conftest import TeamsBot, start_teams_bot
from tests.teams.fake_connector import ConnectorCall, FakeConnector
from tests.teams.signed import BOT_TOKEN, in_thread, signed_settings
from tests.teams.signing import make_token, serve_openid

from .approval_cycle_bench import store_for
from .versus import Row, table

STORES = ("memory", "sqlite", "redis")
MESSAGE_ACK = "ack: message"
CLICKER = "click -> card (clicker)"
EVERYONE = "click -> card (everyone)"
INVOKE_ACK = "ack: invoke"


@dataclass(frozen=True)
class Teams:
    """How Teams reaches a bot in this run: the connector, and a signed channel token."""

    connector: FakeConnector
    token: str

    async def post(self, session: aiohttp.ClientSession, url: str, activity: dict[str, Any]) -> int:
        """POST an activity as Teams does; the HTTP status."""
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"}
        async with session.post(url, data=json.dumps(activity), headers=headers) as resp:
            await resp.read()
            return resp.status


@asynccontextmanager
async def signed_teams() -> AsyncIterator[Teams]:
    """The fake connector and a local OpenID endpoint; the SDK checks tokens against it."""

    def token_from_entra(self: MicrosoftAppCredentials, force_refresh: bool = False) -> str:
        return BOT_TOKEN

    connector = await FakeConnector().start()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(MicrosoftAppCredentials, "get_access_token", token_from_entra)
            async with serve_openid(patch) as openid:
                yield Teams(connector, make_token(openid.key, connector.url))
    finally:
        await connector.close()


async def timed(work: Awaitable[int]) -> float:
    """Milliseconds until ``work`` (an HTTP request) answered; fails on a non-200."""
    start = time.perf_counter()
    status = await work
    if status != 200:
        raise RuntimeError(f"the bot answered {status}")
    return (time.perf_counter() - start) * 1000


def deploy(teams: Teams, text: str, root: str) -> dict[str, Any]:
    return act.channel_post(teams.connector.url, text, activity_id=root, mention=True)


def approve(teams: Teams, root: str, card: ConnectorCall) -> dict[str, Any]:
    assert card.card is not None
    return act.execute(
        teams.connector.url,
        card.card,
        "approve",
        conversation=act.channel_conversation(root),
        card_id=card.response_id,
    )


@dataclass
class Round:
    """One round's samples (milliseconds)."""

    acks: list[float]
    clicks: list[float]
    everyone: list[float]


async def one_round(
    session: aiohttp.ClientSession, bot: TeamsBot, teams: Teams, size: int, n: int
) -> Round:
    """``size`` messages at once, then (their cards posted) ``size`` clicks at once."""
    url = f"{bot.url}{MESSAGES_PATH}"
    roots = [act.next_id() for _ in range(size)]
    gc.collect()  # not the garbage of what came before
    acks = await asyncio.gather(
        *(
            timed(teams.post(session, url, deploy(teams, f"deploy s{i}", r)))
            for i, r in enumerate(roots)
        )
    )
    await bot.adapter.drain()
    cards = [teams.connector.cards(in_thread(r))[0] for r in roots]
    connector = teams.connector
    seen: dict[str, float] = {}
    watching = True

    async def watch() -> None:
        checked = len(connector.calls)
        while watching:
            now = time.perf_counter()
            calls = connector.calls[checked:]
            checked += len(calls)
            for call in calls:
                if call.method == "PUT" and call.activity_id is not None:
                    seen.setdefault(call.activity_id, now)
            await asyncio.sleep(0.002)

    sent: dict[str, float] = {}

    async def click(root: str, card: ConnectorCall) -> float:
        invoke = approve(teams, root, card)
        sent[card.response_id] = time.perf_counter()
        return await timed(teams.post(session, url, invoke))

    gc.collect()
    watcher = asyncio.create_task(watch())
    clicks = await asyncio.gather(*(click(r, c) for r, c in zip(roots, cards, strict=True)))
    await bot.adapter.drain()
    await asyncio.sleep(0.05)
    watching = False
    await watcher
    everyone = [(seen[c.response_id] - sent[c.response_id]) * 1000 for c in cards]
    return Round(list(acks), list(clicks), everyone)


async def measure(store_kind: str, store: Store, teams: Teams, size: int, rounds: int) -> list[Row]:
    """``rounds`` of ``size`` concurrent messages, then ``size`` concurrent clicks."""
    bot = await start_teams_bot(store=store, settings=signed_settings())
    connector = aiohttp.TCPConnector(limit=0)  # no client-side queueing
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            # Warm up: the OpenID metadata and key, the store's connections, and one open
            # connection per concurrent request.
            await one_round(session, bot, teams, size, -1)
            measured = [await one_round(session, bot, teams, size, n) for n in range(rounds)]
    finally:
        await bot.close()
    return [
        Row(store_kind, MESSAGE_ACK, size, [ms for r in measured for ms in r.acks]),
        Row(store_kind, CLICKER, size, [ms for r in measured for ms in r.clicks]),
        Row(store_kind, EVERYONE, size, [ms for r in measured for ms in r.everyone]),
    ]


class BareBot(ActivityHandler):  # type: ignore[misc]
    """Does nothing with any activity; an invoke gets an empty 200."""

    async def on_invoke_activity(self, turn_context: TurnContext) -> InvokeResponse:
        return InvokeResponse(status=200)


def bare_app(settings: TeamsSettings) -> tuple[web.Application, BotFrameworkAuthentication]:
    """The least a Teams bot can do, as the botbuilder samples serve it; and its
    authentication."""
    configuration = SimpleNamespace(  # the attributes the samples' config.py has
        APP_ID=settings.microsoft_app_id or "",
        APP_PASSWORD=settings.microsoft_app_password or "",
        APP_TYPE=settings.microsoft_app_type,
        APP_TENANTID=settings.microsoft_app_tenant_id or "",
    )
    authentication = ConfigurationBotFrameworkAuthentication(configuration)
    cloud = CloudAdapter(authentication)
    bot = BareBot()

    async def messages(request: web.Request) -> web.Response:
        # ``CloudAdapter.process`` itself, but answering 200 where it answers 201 (the
        # adapter's answer), and an invoke's status without a body it cannot serialize.
        body = await request.json()
        activity: Activity = Activity().deserialize(body)
        auth_header = request.headers.get("Authorization", "")
        invoke = await cloud.process_activity(auth_header, activity, bot.on_turn)
        return web.Response(status=int(invoke.status) if invoke is not None else 200)

    app = web.Application()
    app.router.add_post(MESSAGES_PATH, messages)
    return app, authentication


async def bare_botbuilder(teams: Teams, size: int, rounds: int) -> dict[str, Row]:
    """The baseline: the same activities to a botbuilder app that does nothing."""
    app, authentication = bare_app(signed_settings())
    # The SDK fetches the OpenID metadata and keys on the event loop, with a blocking
    # ``requests.get``: fetched here first, off the loop that serves them (a bare app
    # in production stalls on its first request instead).
    header = f"Bearer {teams.token}"
    activity = Activity().deserialize(deploy(teams, "warm-up", act.next_id()))
    await asyncio.to_thread(asyncio.run, authentication.authenticate_request(activity, header))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}{MESSAGES_PATH}"
    card: dict[str, Any] = {
        "type": "AdaptiveCard",
        "actions": [{"type": "Action.Execute", "verb": "approve", "data": {"run": "x"}}],
    }
    acks: list[float] = []
    clicks: list[float] = []
    connector = aiohttp.TCPConnector(limit=0)
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            for n in range(-1, rounds):  # the first round warms up
                roots = [act.next_id() for _ in range(size)]
                gc.collect()
                round_acks = await asyncio.gather(
                    *(
                        timed(teams.post(session, url, deploy(teams, f"deploy s{i}", r)))
                        for i, r in enumerate(roots)
                    )
                )
                gc.collect()
                invokes = [
                    act.execute(
                        teams.connector.url,
                        card,
                        "approve",
                        conversation=act.channel_conversation(r),
                        card_id=act.next_id(),
                    )
                    for r in roots
                ]
                round_clicks = await asyncio.gather(
                    *(timed(teams.post(session, url, invoke)) for invoke in invokes)
                )
                if n >= 0:
                    acks += round_acks
                    clicks += round_clicks
    finally:
        await runner.cleanup()
    return {
        MESSAGE_ACK: Row("bare botbuilder", MESSAGE_ACK, size, acks),
        INVOKE_ACK: Row("bare botbuilder", INVOKE_ACK, size, clicks),
    }


async def main(sizes: list[int], stores: list[str], rounds: int) -> list[Row]:
    """Each store at each size, each after the bare app's run at that size."""
    rows: list[Row] = []
    async with signed_teams() as teams:
        for size in sizes:
            for store_kind in stores:
                bare = await bare_botbuilder(teams, size, rounds)
                async with store_for(store_kind) as store:
                    ours = await measure(store_kind, store, teams, size, rounds)
                for row in ours:
                    row.baseline = bare.get(row.scenario, bare[INVOKE_ACK])
                rows.extend(ours)
    return rows


def report(rows: list[Row], rounds: int) -> str:
    """The table, milliseconds."""
    return table(
        f"Teams adapter vs a bare botbuilder app, signed requests, {rounds} rounds per size",
        rows,
    )


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--stores", "--store", default=",".join(STORES), help="memory, sqlite, redis"
    )
    parser.add_argument("--sizes", default="50", help="concurrent requests per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per store and size")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    if unknown := [s for s in stores if s not in STORES]:
        parser.error(f"unknown store {unknown[0]!r}: choose from {', '.join(STORES)}")
    rows = asyncio.run(main(sizes, stores, args.rounds))
    print(report(rows, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(cli())
