"""How fast the Slack adapter acknowledges, and how soon a click shows on the card.

Run with ``python -m bench.slack_bench`` (options: ``--stores memory,sqlite,redis,postgres``,
``--sizes 50``, ``--rounds 5``). Everything is local: the real aiohttp server with
the Slack adapter over a ``ChatBot``, the fake Slack Web API from the tests,
requests signed like Slack's. Redis is the server at ``REDIS_URL``, under a
private key prefix deleted afterwards. For each store and size N, each round
sends N @mentions at once (each asks for a gated tool, so N cards appear), then
N Approve clicks at once, and reports over all rounds:

- ack: mention event: request sent -> HTTP response (Slack wants it within 3 s);
- ack: button click: the same for ``block_actions``;
- click -> card updated: click sent -> ``chat.update`` of that card received.

The same load goes, in the same run and right before each store's, to a bare
slack-bolt ``AsyncApp`` behind aiohttp whose listeners only ack (the least any
Slack app can do), and each ack's p50 and p99 is printed with its ratio to that
baseline's (click -> card against the bare click ack).

Client, server and fake Slack share one event loop and one CPU, so the numbers
include their contention; the agent work of earlier requests runs meanwhile.
Before each burst the garbage of what came before is collected, and one round
per store warms up (connections, caches) unmeasured.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from urllib.parse import urlencode

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.wire import APPROVE_ACTION
from agents import Store
from tests.slack.fake_slack import TOKEN, FakeSlack, Posted
from tests.slack.harness import (
    BOB,
    CHANNEL,
    SIGNING_SECRET,
    BotServer,
    block_actions,
    event_body,
    mention_event,
    signed_headers,
    start_bot,
)
from tests.slack.scripted import build_agent
from tests.slack.test_approvals import has_buttons

from .approval_cycle_bench import store_for
from .versus import Row, table

ACK_BUDGET_MS = 3000.0
STORES = ("memory", "sqlite", "redis", "postgres")
MENTION_ACK = "ack: mention event"
CLICK_ACK = "ack: button click"
CLICK_CARD = "click -> card updated"


async def timed(work: Awaitable[int]) -> float:
    """Milliseconds until ``work`` (an HTTP request) answered; fails on a non-200."""
    start = time.perf_counter()
    status = await work
    if status != 200:
        raise RuntimeError(f"the bot answered {status}")
    return (time.perf_counter() - start) * 1000


async def send(session: aiohttp.ClientSession, url: str, body: str, kind: str) -> int:
    """POST one body signed like Slack; the HTTP status."""
    headers = {"Content-Type": kind, **signed_headers(body)}
    async with session.post(url, data=body.encode(), headers=headers) as resp:
        await resp.read()
        return resp.status


def mention_body(text: str) -> str:
    return json.dumps(event_body(mention_event(text)))


def click_body(card: Posted) -> str:
    return urlencode({"payload": json.dumps(block_actions(card, APPROVE_ACTION, user=BOB))})


JSON = "application/json"
FORM = "application/x-www-form-urlencoded"


def warm_body() -> str:
    return json.dumps({"type": "url_verification", "challenge": "warm-up", "token": "x"})


def pending_cards(slack: FakeSlack) -> list[Posted]:
    """The approval cards still waiting (not the Stop button above each)."""
    return [message for message in slack.messages.values() if has_buttons(message)]


@dataclass
class Round:
    """One round's samples (milliseconds)."""

    mentions: list[float]
    clicks: list[float]
    updated: list[float]


async def one_round(session: aiohttp.ClientSession, bot: BotServer, size: int, n: int) -> Round:
    """``size`` mentions at once, then (their cards posted) ``size`` clicks at once."""
    slack = bot.slack
    gc.collect()  # not the garbage of what came before
    mentions = await asyncio.gather(
        *(
            timed(send(session, bot.url, mention_body(f"deploy r{n}s{i}"), JSON))
            for i in range(size)
        )
    )
    await bot.idle()
    cards = pending_cards(slack)
    if len(cards) != size:
        raise RuntimeError(f"expected {size} cards, got {len(cards)}")
    sent: dict[str, float] = {}

    async def click_one(card: Posted) -> float:
        sent[card.ts] = time.perf_counter()
        return await timed(send(session, bot.url, click_body(card), FORM))

    gc.collect()
    clicks = await asyncio.gather(*(click_one(card) for card in cards))
    await bot.idle()
    if any(card.updates != 1 for card in cards):
        raise RuntimeError("not every card was updated exactly once")
    updated = [((card.updated_at or float("nan")) - sent[card.ts]) * 1000 for card in cards]
    return Round(list(mentions), list(clicks), updated)


async def measure(store_kind: str, store: Store, size: int, rounds: int) -> list[Row]:
    """``rounds`` of ``size`` concurrent mentions, then ``size`` concurrent clicks."""
    slack = FakeSlack()
    await slack.start()
    bot: BotServer = await start_bot(slack, build_agent(store))
    connector = aiohttp.TCPConnector(limit=0)  # no client-side queueing
    measured: list[Round] = []
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            # Warm up: auth.test, the store's connections, and one open connection per
            # concurrent request (the kernel's listen backlog of 128 adds no SYN retries).
            await send(session, bot.url, mention_body("hello"), JSON)
            await asyncio.gather(*(send(session, bot.url, warm_body(), JSON) for _ in range(size)))
            await bot.idle()
            await one_round(session, bot, size, -1)
            measured = [await one_round(session, bot, size, n) for n in range(rounds)]
    finally:
        await bot.close()
        await slack.stop()
    return [
        Row(store_kind, MENTION_ACK, size, [ms for r in measured for ms in r.mentions]),
        Row(store_kind, CLICK_ACK, size, [ms for r in measured for ms in r.clicks]),
        Row(store_kind, CLICK_CARD, size, [ms for r in measured for ms in r.updated]),
    ]


async def bare_bolt(size: int, rounds: int) -> dict[str, Row]:
    """The baseline: the same requests to a Bolt app whose listeners only ack."""
    slack = FakeSlack()
    await slack.start()
    app = AsyncApp(
        client=AsyncWebClient(token=TOKEN, base_url=slack.url),
        signing_secret=SIGNING_SECRET,
        process_before_response=True,
    )

    async def just_ack(ack: AsyncAck) -> None:
        await ack()

    app.event("app_mention")(just_ack)
    app.action(APPROVE_ACTION)(just_ack)

    async def handle(request: web.Request) -> web.Response:
        return await to_aiohttp_response(await app.async_dispatch(await to_bolt_request(request)))

    web_app = web.Application()
    web_app.router.add_post("/slack/events", handle)
    server = TestServer(web_app, host="127.0.0.1")
    await server.start_server()
    url = str(server.make_url("/slack/events"))
    card = Posted(
        channel=CHANNEL,
        ts="1700000000.000100",
        thread_ts=None,
        text="card",
        blocks=[
            {
                "type": "actions",
                "elements": [{"type": "button", "action_id": APPROVE_ACTION, "value": "x"}],
            }
        ],
    )
    connector = aiohttp.TCPConnector(limit=0)
    mentions: list[float] = []
    clicks: list[float] = []
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            await send(session, url, mention_body("hello"), JSON)
            await asyncio.gather(*(send(session, url, warm_body(), JSON) for _ in range(size)))
            for n in range(rounds):
                gc.collect()
                mentions += await asyncio.gather(
                    *(
                        timed(send(session, url, mention_body(f"deploy r{n}s{i}"), JSON))
                        for i in range(size)
                    )
                )
                gc.collect()
                clicks += await asyncio.gather(
                    *(timed(send(session, url, click_body(card), FORM)) for _ in range(size))
                )
    finally:
        await server.close()
        await slack.stop()
    return {
        MENTION_ACK: Row("bare Bolt", MENTION_ACK, size, mentions),
        CLICK_ACK: Row("bare Bolt", CLICK_ACK, size, clicks),
    }


async def main(sizes: list[int], stores: list[str], rounds: int) -> list[Row]:
    """Each store at each size, each after the bare app's run at that size."""
    rows: list[Row] = []
    for size in sizes:
        for store_kind in stores:
            bare = await bare_bolt(size, rounds)
            async with store_for(store_kind) as store:
                ours = await measure(store_kind, store, size, rounds)
            for row in ours:
                row.baseline = bare.get(row.scenario, bare[CLICK_ACK])
            rows.extend(ours)
    return rows


def report(rows: list[Row], rounds: int) -> str:
    """The table, milliseconds."""
    return table(
        f"Slack adapter vs a bare Bolt app, {rounds} rounds per size "
        f"(Slack's ack budget: {ACK_BUDGET_MS:.0f} ms)",
        rows,
    )


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--stores", "--store", default=",".join(STORES), help="memory, sqlite, redis, postgres"
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
