"""How fast the Slack adapter acknowledges, and how soon a click shows on the card.

Run with ``python -m bench.slack_bench`` (options: ``--store sqlite|memory``,
``--sizes 50,200``). Everything is local: the real aiohttp server with the Slack
adapter over a ``ChatBot``, the fake Slack Web API from the tests, requests
signed like Slack's. For each size N it sends N @mentions at once (each asks
for a gated tool, so N cards appear), then N Approve clicks at once, and reports:

- ack: mention event: request sent -> HTTP response (Slack wants it within 3 s);
- ack: button click: the same for ``block_actions``;
- click -> card updated: click sent -> ``chat.update`` of that card received.

The same load goes, in the same run, to a bare slack-bolt ``AsyncApp`` behind
aiohttp whose listeners only ack (the least any Slack app can do), and each
figure is printed with its ratio to that baseline.

Client, server and fake Slack share one event loop and one CPU, so the numbers
include their contention; the agent work of earlier requests runs meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.wire import APPROVE_ACTION
from agents import Store, open_store
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

ACK_BUDGET_MS = 3000.0


@dataclass
class Row:
    """One line of the report."""

    scenario: str
    concurrent: int
    samples: list[float]
    baseline: Row | None = None
    """The bare Bolt app's figures for the same load (click ack for click -> card)."""

    @property
    def p99(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]

    def cells(self) -> list[str]:
        ordered = sorted(self.samples)
        base = self.baseline
        return [
            self.scenario,
            str(self.concurrent),
            f"{statistics.median(ordered):.1f}",
            f"{self.p99:.1f}",
            f"{ordered[-1]:.1f}",
            f"{base.p99:.1f}" if base else "-",
            f"{self.p99 / base.p99:.2f}x" if base else "-",
        ]


async def timed(work: Awaitable[int]) -> float:
    """Milliseconds until ``work`` (an HTTP request) answered; fails on a non-200."""
    start = time.perf_counter()
    status = await work
    if status != 200:
        raise RuntimeError(f"the bot answered {status}")
    return (time.perf_counter() - start) * 1000


async def post(session: aiohttp.ClientSession, bot: BotServer, body: str, kind: str) -> int:
    headers = {"Content-Type": kind, **signed_headers(body)}
    async with session.post(bot.url, data=body.encode(), headers=headers) as resp:
        await resp.read()
        return resp.status


async def verify_url(session: aiohttp.ClientSession, bot: BotServer) -> int:
    body = json.dumps({"type": "url_verification", "challenge": "warm-up", "token": "x"})
    return await post(session, bot, body, "application/json")


async def mention(session: aiohttp.ClientSession, bot: BotServer, text: str) -> int:
    body = json.dumps(event_body(mention_event(text)))
    return await post(session, bot, body, "application/json")


async def click(session: aiohttp.ClientSession, bot: BotServer, card: Posted) -> int:
    payload = block_actions(card, APPROVE_ACTION, user=BOB)
    body = urlencode({"payload": json.dumps(payload)})
    return await post(session, bot, body, "application/x-www-form-urlencoded")


def pending_cards(slack: FakeSlack) -> list[Posted]:
    return [m for m in slack.messages.values() if any(b["type"] == "actions" for b in m.blocks)]


async def measure(size: int, store: Store) -> list[Row]:
    """One round: ``size`` concurrent mentions, then ``size`` concurrent clicks."""
    slack = FakeSlack()
    await slack.start()
    bot = await start_bot(slack, build_agent(store))
    connector = aiohttp.TCPConnector(limit=0)  # no client-side queueing
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            # Warm up: auth.test, and one open connection per concurrent request (so
            # the kernel's listen backlog of 128 does not add SYN retries of 1 s).
            await mention(session, bot, "hello")
            await asyncio.gather(*(verify_url(session, bot) for _ in range(size)))
            await bot.idle()

            mentions = await asyncio.gather(
                *(timed(mention(session, bot, f"deploy svc{i}")) for i in range(size))
            )
            await bot.idle()
            cards = pending_cards(slack)
            if len(cards) != size:
                raise RuntimeError(f"expected {size} cards, got {len(cards)}")

            sent: dict[str, float] = {}

            async def click_one(card: Posted) -> float:
                sent[card.ts] = time.perf_counter()
                return await timed(click(session, bot, card))

            clicks = await asyncio.gather(*(click_one(card) for card in cards))
            await bot.idle()
            updated = [((card.updated_at or float("nan")) - sent[card.ts]) * 1000 for card in cards]
            if any(card.updates != 1 for card in cards):
                raise RuntimeError("not every card was updated exactly once")
    finally:
        await bot.close()
        await slack.stop()
    return [
        Row("ack: mention event", size, list(mentions)),
        Row("ack: button click", size, list(clicks)),
        Row("click -> card updated", size, updated),
    ]


async def bare_bolt(size: int) -> list[Row]:
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
    try:
        async with aiohttp.ClientSession(connector=connector) as session:

            async def send(body: str, kind: str) -> int:
                headers = {"Content-Type": kind, **signed_headers(body)}
                async with session.post(url, data=body.encode(), headers=headers) as resp:
                    await resp.read()
                    return resp.status

            def mention_body(text: str) -> str:
                return json.dumps(event_body(mention_event(text)))

            click_body = urlencode({"payload": json.dumps(block_actions(card, APPROVE_ACTION))})
            form = "application/x-www-form-urlencoded"
            await send(mention_body("hello"), "application/json")
            await asyncio.gather(
                *(send(mention_body("warm"), "application/json") for _ in range(size))
            )
            mentions = await asyncio.gather(
                *(
                    timed(send(mention_body(f"deploy svc{i}"), "application/json"))
                    for i in range(size)
                )
            )
            clicks = await asyncio.gather(*(timed(send(click_body, form)) for _ in range(size)))
    finally:
        await server.close()
        await slack.stop()
    return [
        Row("ack: mention event", size, list(mentions)),
        Row("ack: button click", size, list(clicks)),
    ]


async def main(sizes: list[int], store_kind: str) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            url = "memory://" if store_kind == "memory" else f"sqlite:///{Path(tmp) / f'{size}.db'}"
            store = open_store(url)
            try:
                ours = await measure(size, store)
            finally:
                await store.close()
            bare = {row.scenario: row for row in await bare_bolt(size)}
            for row in ours:
                row.baseline = bare.get(row.scenario)
            # Click -> card against the bare click ack: the goal compares the two.
            ours[2].baseline = bare["ack: button click"]
            rows.extend(ours)
    return rows


def report(rows: list[Row], store_kind: str) -> str:
    header = ["scenario", "concurrent", "p50 ms", "p99 ms", "max ms", "bare p99", "ratio"]
    table = [header, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = [f"Slack adapter, store={store_kind} (Slack's ack budget: {ACK_BUDGET_MS:.0f} ms)"]
    for line in table:
        lines.append(
            "  ".join(
                cell.ljust(w) if i == 0 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(line, widths, strict=True))
            )
        )
    return "\n".join(lines)


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    parser.add_argument("--sizes", default="50,200", help="concurrent requests per round")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    rows = asyncio.run(main(sizes, args.store))
    print(report(rows, args.store))
    return 0


if __name__ == "__main__":
    sys.exit(cli())
