"""Cards under Slack's per-channel rate limit: how many are lost, how fast acks stay.

Run with ``python -m bench.limits_bench`` (``--size 20``). A fake Slack Web API that
limits like Slack (``chat.postMessage``: one message a second per channel, ``429``
with ``Retry-After: 1`` beyond that) takes a burst of N @mentions in one channel,
each asking for a gated tool, so each should end with a card. The same burst runs,
in the same process, against the adapter as it is (every post through its
``Pacer``: in order, waiting out ``Retry-After``) and against the adapter with one
try per post after the Web API client's own two 429 retries (what it did before),
and reports for each: cards shown, cards lost, acks (median, p99, in ms) and the
seconds until the bot was done.

Everything is local and shares one event loop, so the timings include contention.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import aiohttp
from aiohttp import web

from adapters.slack.wire import APPROVE_ACTION
from agents import open_store
from tests.slack.fake_slack import FakeSlack
from tests.slack.harness import event_body, mention_event, signed_headers, start_bot
from tests.slack.scripted import build_agent

from .versus import percentile

T = TypeVar("T")

PER_CHANNEL_SECONDS = 1.0
"""Slack's pace for ``chat.postMessage`` in one channel: about one message a second."""


class LimitedSlack(FakeSlack):
    """The fake Web API, limiting ``chat.postMessage`` per channel like Slack."""

    def __init__(self) -> None:
        super().__init__()
        self._last: dict[str, float] = {}
        self.refused = 0

    async def _handle(self, request: web.Request) -> web.Response:
        if request.match_info["method"] == "chat.postMessage":
            body = await request.read()
            channel = str(json.loads(body or b"{}").get("channel", ""))
            now = time.monotonic()
            if now - self._last.get(channel, -PER_CHANNEL_SECONDS) < PER_CHANNEL_SECONDS:
                self.refused += 1
                return web.json_response(
                    {"ok": False, "error": "ratelimited"},
                    status=429,
                    headers={"Retry-After": str(int(PER_CHANNEL_SECONDS))},
                )
            self._last[channel] = now
        return await super()._handle(request)


class OneTry:
    """A post made once (after the client's own retries): the adapter before its Pacer."""

    waiting = 0

    async def call(self, place: str, limit: str, send: Callable[[], Awaitable[T]]) -> T:
        return await send()


async def burst(size: int, *, paced: bool) -> dict[str, float]:
    """``size`` mentions in one channel at once; the figures of what became of them."""
    slack = LimitedSlack()
    await slack.start()
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(f"sqlite:///{Path(folder) / 'bench.db'}")
        bot = await start_bot(slack, build_agent(store))
        if not paced:
            bot.adapter.messenger.pacer = OneTry()  # type: ignore[assignment]
        try:
            acks: list[float] = []
            async with aiohttp.ClientSession() as session:

                async def mention(n: int) -> None:
                    body = json.dumps(event_body(mention_event(f"deploy svc{n}")))
                    headers = {"Content-Type": "application/json", **signed_headers(body)}
                    started = time.perf_counter()
                    async with session.post(bot.url, data=body.encode(), headers=headers) as r:
                        await r.read()
                    acks.append((time.perf_counter() - started) * 1000)

                started = time.monotonic()
                await asyncio.gather(*(mention(n) for n in range(size)))
                await bot.idle()
                done = time.monotonic() - started
        finally:
            await bot.close()
            await slack.stop()
            await store.close()
    shown = len(cards(slack))
    return {
        "cards shown": shown,
        "cards lost": size - shown,
        "ack median ms": statistics.median(acks),
        "ack p99 ms": percentile(acks, 0.99),
        "s until all done": done,
        "429s": slack.refused,
    }


def cards(slack: FakeSlack) -> list[object]:
    """The approval cards shown (messages with an Approve button)."""
    return [
        message
        for message in slack.messages.values()
        if any(
            element.get("action_id") == APPROVE_ACTION
            for block in message.blocks
            for element in block.get("elements", ())
        )
    ]


def main() -> int:
    logging.disable(logging.ERROR)  # the lost posts before, one traceback each
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=20, help="mentions in the burst")
    args = parser.parse_args()
    before = asyncio.run(burst(args.size, paced=False))
    after = asyncio.run(burst(args.size, paced=True))
    print(f"{args.size} @mentions at once in one channel; Slack allows one post a second there")
    print(f"{'':16} {'one try (before)':>18} {'paced (now)':>14} {'ratio':>8}")
    for key in before:
        ratio = f"{after[key] / before[key]:.2f}x" if before[key] else "-"
        print(f"{key:16} {before[key]:>18.1f} {after[key]:>14.1f} {ratio:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
