"""How long a client of the approval service waits, against the bot's own approval cycle.

Run with ``python -m bench.client_bench`` (options: ``--stores memory,sqlite,redis``,
``--size 50``, ``--rounds 3``). As in ``slack_bench``, all is local: the real aiohttp
server (Slack adapter, ``/v1`` API) over a ``ChatBot`` with the tests' clients, the fake
Slack Web API, Redis at ``REDIS_URL`` under a private key prefix deleted afterwards.
Each round sends N (``--size``) requests at once, then N Approve clicks at once:

- the bot's own cycle, N @mentions asking for the gated tool: "mention -> card" is
  mention sent -> its card's ``chat.postMessage`` at the fake Slack, "click -> card
  updated" click sent -> that card's ``chat.update`` there;
- the service, N ``POST /v1/approvals`` (one ``Idempotency-Key`` each): "request ->
  card" is request sent -> its card's ``chat.postMessage`` (the card's buttons name its
  run, whose id is the approval's); then, with a ``GET /v1/approvals/{id}?wait=60``
  waiting for each, "click -> answer" is click sent -> that long poll's answer.

Printed per store: p50, p99 and max of each, and request -> card and click -> answer as
ratios of mention -> card and click -> card updated (p50 to p50, p99 to p99) in the same
run. One clock: ``time.monotonic`` (the fake's ``ApiCall.at``). Client, server and fake
Slack share one event loop; garbage is collected before each burst; one round per store
warms up unmeasured.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from typing import Any

import aiohttp

from adapters.slack.wire import APPROVE_ACTION, decode_button_value
from agents import Store
from bot.service import MAX_WAIT
from tests.slack.fake_slack import FakeSlack, Posted, shown_blocks
from tests.slack.harness import BotServer, start_bot
from tests.slack.scripted import build_agent
from tests.slack.test_client_api import CI_CHANNEL, CLIENTS, DEPLOY
from tests.slack.test_client_api import TOKEN as CLIENT_TOKEN

from .approval_cycle_bench import store_for
from .slack_bench import (
    CLICK_CARD,
    FORM,
    JSON,
    STORES,
    click_body,
    mention_body,
    pending_cards,
    send,
    warm_body,
)
from .versus import Row

MENTION_CARD = "mention -> card"
REQUEST_CARD = "request -> card"
CLICK_ANSWER = "click -> answer"
SCENARIOS = (MENTION_CARD, CLICK_CARD, REQUEST_CARD, CLICK_ANSWER)
AUTH = {"Authorization": f"Bearer {CLIENT_TOKEN}"}


def approve_run(blocks: list[dict[str, Any]]) -> str | None:
    """The run whose call an Approve button among ``blocks`` decides, if one is there."""
    for block in blocks:
        for element in block.get("elements", []):
            if element.get("action_id") == APPROVE_ACTION:
                return decode_button_value(element.get("value")).run
    return None


def posted_at(slack: FakeSlack) -> dict[str, float]:
    """When each card's ``chat.postMessage`` arrived, by the run its buttons name."""
    found: dict[str, float] = {}
    for call in slack.of("chat.postMessage"):
        blocks, attachments = call.args.get("blocks") or [], call.args.get("attachments") or []
        if run := approve_run(shown_blocks(blocks, attachments)):
            found[run] = call.at
    return found


def updated_at(slack: FakeSlack, card: Posted, since: float) -> float:
    """When the first ``chat.update`` of ``card`` since ``since`` arrived."""
    updates = slack.of("chat.update")
    return min(c.at for c in updates if c.args.get("ts") == card.ts and c.at >= since)


def ok(status: int, wanted: int = 200) -> None:
    """Fail on an HTTP status other than ``wanted``."""
    if status != wanted:
        raise RuntimeError(f"the bot answered {status}, not {wanted}")


async def cards_of(bot: BotServer, size: int) -> dict[str, Posted]:
    """The ``size`` cards waiting once the bot is idle, by their run."""
    await bot.idle()
    cards = {approve_run(card.shown) or "": card for card in pending_cards(bot.slack)}
    if len(cards) != size:
        raise RuntimeError(f"expected {size} cards, got {len(cards)}")
    return cards


async def click_all(
    session: aiohttp.ClientSession, bot: BotServer, cards: dict[str, Posted]
) -> dict[str, float]:
    """Approve every card at once; when each click was sent, by run."""
    clicked: dict[str, float] = {}

    async def click(run: str, card: Posted) -> None:
        clicked[run] = time.monotonic()
        ok(await send(session, bot.url, click_body(card), FORM))

    gc.collect()  # not the garbage of what came before
    await asyncio.gather(*(click(run, card) for run, card in cards.items()))
    return clicked


async def own_cycle(
    session: aiohttp.ClientSession, bot: BotServer, size: int, n: int
) -> tuple[list[float], list[float]]:
    """N mentions, then N clicks: mention -> card and click -> card updated (ms)."""
    sent: dict[str, float] = {}  # by the mention's ts, its card's thread

    async def mention(i: int) -> None:
        body = mention_body(f"deploy r{n}m{i}")
        sent[json.loads(body)["event"]["ts"]] = time.monotonic()
        ok(await send(session, bot.url, body, JSON))

    gc.collect()
    await asyncio.gather(*(mention(i) for i in range(size)))
    cards = await cards_of(bot, size)
    posts = posted_at(bot.slack)
    to_card = [(posts[run] - sent[card.thread_ts or ""]) * 1000 for run, card in cards.items()]
    clicked = await click_all(session, bot, cards)
    await bot.idle()
    return to_card, [
        (updated_at(bot.slack, card, clicked[run]) - clicked[run]) * 1000
        for run, card in cards.items()
    ]


async def service_cycle(
    session: aiohttp.ClientSession, bot: BotServer, size: int, n: int
) -> tuple[list[float], list[float]]:
    """N requests, then N long polls and N clicks: request -> card, click -> answer (ms)."""
    asked: dict[str, float] = {}  # by approval id, its card's run

    async def request(i: int) -> None:
        headers = {**AUTH, "Idempotency-Key": f"bench-r{n}k{i}"}
        body = {**DEPLOY, "args": {"service": "api", "version": f"r{n}k{i}"}}
        url = bot.server.make_url("/v1/approvals")
        sent = time.monotonic()
        async with session.post(url, json=body, headers=headers) as resp:
            ok(resp.status, 201)
            asked[(await resp.json())["id"]] = sent

    async def long_poll(approval: str) -> float:
        url = bot.server.make_url(f"/v1/approvals/{approval}?wait={MAX_WAIT:g}")
        async with session.get(url, headers=AUTH) as resp:
            answer = await resp.json()
        answered = time.monotonic()
        ok(resp.status)
        if answer["status"] != "approved":
            raise RuntimeError(f"approval {approval} is {answer['status']}")
        return answered

    gc.collect()
    await asyncio.gather(*(request(i) for i in range(size)))
    cards = await cards_of(bot, size)
    posts = posted_at(bot.slack)
    to_card = [(posts[run] - asked[run]) * 1000 for run in cards]
    polls = {run: asyncio.create_task(long_poll(run)) for run in cards}
    service = bot.bot.service

    def all_waiting() -> bool:
        return all(service.waiting(run) for run in cards)

    await bot.slack.wait_for(all_waiting, within=30, what="the long polls")
    clicked = await click_all(session, bot, cards)
    answered = dict(zip(polls, await asyncio.gather(*polls.values()), strict=True))
    await bot.idle()
    return to_card, [(answered[run] - clicked[run]) * 1000 for run in cards]


async def measure(store_kind: str, store: Store, size: int, rounds: int) -> list[Row]:
    """``rounds`` of the bot's own cycle, then the service's, ``size`` at once each."""
    slack = FakeSlack()
    await slack.start()
    slack.add_channel(CI_CHANNEL, name="deploys")
    bot = await start_bot(slack, build_agent(store), clients=CLIENTS)
    connector = aiohttp.TCPConnector(limit=0)  # no client-side queueing
    samples: list[list[float]] = [[] for _ in SCENARIOS]
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            # Warm up: auth.test, the store, and an open connection for each request of
            # the largest burst (N long polls and N clicks), then one whole round.
            await send(session, bot.url, mention_body("hello"), JSON)
            warm = (send(session, bot.url, warm_body(), JSON) for _ in range(2 * size))
            await asyncio.gather(*warm)
            for n in range(-1, rounds):  # round -1 warms up
                own = await own_cycle(session, bot, size, n)
                service = await service_cycle(session, bot, size, n)
                if n >= 0:
                    for kept, taken in zip(samples, (*own, *service), strict=True):
                        kept.extend(taken)
    finally:
        await bot.close()
        await slack.stop()
    mention, update, request, answer = (
        Row(store_kind, scenario, size, taken)
        for scenario, taken in zip(SCENARIOS, samples, strict=True)
    )
    request.baseline, answer.baseline = mention, update
    return [mention, request, update, answer]


async def main(size: int, stores: list[str], rounds: int) -> list[Row]:
    """Each store's four rows."""
    rows: list[Row] = []
    for store_kind in stores:
        async with store_for(store_kind) as store:
            rows += await measure(store_kind, store, size, rounds)
    return rows


HEADER = ["store", "scenario", "concurrent", "p50 ms", "p99 ms", "max ms"]
HEADER += ["own p50", "own p99", "p50 ratio", "p99 ratio"]
"""``Row.cells``' columns; "own": the bot's own cycle, each service row's baseline."""


def report(rows: list[Row], rounds: int) -> str:
    """A table per store (milliseconds), each service row beside the bot's own cycle."""
    lines = [HEADER, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]

    def aligned(cells: list[str]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in pairs)

    out = [f"Approval service vs the bot's own approval cycle, {rounds} rounds per store"]
    for i, line in enumerate(lines[1:]):
        if i % len(SCENARIOS) == 0:  # a store's first row: a new table
            out += ["", aligned(HEADER)]
        out.append(aligned(line))
    return "\n".join(out)


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--stores", "--store", default=",".join(STORES), help="memory, sqlite, redis"
    )
    parser.add_argument("--size", type=int, default=50, help="concurrent requests per burst")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per store")
    args = parser.parse_args(argv)
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    if unknown := [s for s in stores if s not in STORES]:
        parser.error(f"unknown store {unknown[0]!r}: choose from {', '.join(STORES)}")
    rows = asyncio.run(main(args.size, stores, args.rounds))
    print(report(rows, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(cli())
