"""How fast the Slack adapter acknowledges, and how soon a click shows on the card.

Run with ``python -m bench.slack_bench`` (options: ``--store sqlite|memory``,
``--sizes 50,200``). Everything is local: the real aiohttp server with the Slack
adapter over a ``ChatBot``, the fake Slack Web API from the tests, requests
signed like Slack's. For each size N it sends N @mentions at once (each asks
for a gated tool, so N cards appear), then N Approve clicks at once, and reports:

- ack: mention event: request sent -> HTTP response (Slack wants it within 3 s);
- ack: button click: the same for ``block_actions``;
- click -> card updated: click sent -> ``chat.update`` of that card received.

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

from adapters.slack.wire import APPROVE_ACTION
from agents import Store, open_store
from tests.slack.fake_slack import FakeSlack, Posted
from tests.slack.harness import (
    BOB,
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

    def cells(self) -> list[str]:
        ordered = sorted(self.samples)
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        return [
            self.scenario,
            str(self.concurrent),
            f"{statistics.median(ordered):.1f}",
            f"{p99:.1f}",
            f"{ordered[-1]:.1f}",
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


async def main(sizes: list[int], store_kind: str) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            url = "memory://" if store_kind == "memory" else f"sqlite:///{Path(tmp) / f'{size}.db'}"
            store = open_store(url)
            try:
                rows.extend(await measure(size, store))
            finally:
                await store.close()
    return rows


def report(rows: list[Row], store_kind: str) -> str:
    header = ["scenario", "concurrent", "p50 ms", "p99 ms", "max ms"]
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
