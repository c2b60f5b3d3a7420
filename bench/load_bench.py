"""A burst on two replicas: what Slack would see, with nothing lost or failed.

Run with ``python -m bench.load_bench`` (``--size 200``, ``--store redis|sqlite``).
Two real ``python -m bot`` processes share one store (by default the real Redis
at ``REDIS_URL``) and the fake Slack Web API of the tests. Each replica gets a
burst of N @mentions at once, each asking for a gated tool, then N Approve
clicks at once on the cards. Reported:

- cards posted, and failures: answers other than 200, missing cards, cards not
  updated exactly once, tools not run exactly once, "went wrong" notices;
- ack p50/p99 of mentions and of clicks (Slack wants an answer within 3 s);
- click -> card p99: click sent -> ``chat.update`` of that card received.

Machines here are shared and noisy, so every latency is also printed as a
ratio to the median ack of lone mentions sent one at a time in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from redis.asyncio import Redis

from adapters.slack.wire import APPROVE_ACTION
from tests.slack.fake_slack import FakeSlack, Posted
from tests.slack.harness import mention_event
from tests.slack.process import BotProcess

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
LONE = 20


def p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed(work: Awaitable[int]) -> tuple[int, float]:
    start = time.perf_counter()
    status = await work
    return status, (time.perf_counter() - start) * 1000


def has_buttons(posted: Posted) -> bool:
    return any(block["type"] == "actions" for block in posted.blocks)


async def wait(condition: Callable[[], bool], what: str, within: float) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            print(f"  gave up waiting for {what}")
            return False
        await asyncio.sleep(0.02)
    return True


async def run(size: int, store_url: str, workdir: Path) -> None:
    slack = FakeSlack()
    await slack.start()
    replicas = []
    for name in ("a", "b"):
        folder = workdir / name
        folder.mkdir()
        replicas.append(BotProcess(slack=slack, store_url=store_url, workdir=folder, lease="30s"))
    try:
        await asyncio.gather(*(r.start() for r in replicas))
        lone = []
        for n in range(LONE):  # the baseline: one at a time, nothing else going on
            lone.append(await timed(replicas[n % 2].send_event(mention_event(f"hello {n}"))))
        await wait(lambda: len(slack.messages) >= LONE, "the lone answers", 30)
        baseline = statistics.median(ms for _, ms in lone)

        mentions = await asyncio.gather(
            *(
                timed(bot.send_event(mention_event(f"deploy {bot.port}-{n}")))
                for bot in replicas
                for n in range(size)
            )
        )
        total = 2 * size

        def cards() -> list[Posted]:
            return [m for m in slack.messages.values() if m.blocks and has_buttons(m)]

        await wait(lambda: len(cards()) >= total, "every card", 120)
        posted = cards()
        sent: dict[str, float] = {}

        async def press(bot: BotProcess, card: Posted) -> tuple[int, float]:
            sent[card.ts] = time.perf_counter()
            return await timed(bot.press(card, APPROVE_ACTION))

        clicks = await asyncio.gather(
            *(press(replicas[n % 2], card) for n, card in enumerate(posted))
        )
        await wait(lambda: all(c.updates >= 1 for c in posted), "every card updated", 120)
        await wait(lambda: not any(has_buttons(c) for c in posted), "every card decided", 120)
        await asyncio.gather(*(r.stop() for r in replicas))

        to_card = [((c.updated_at or float("nan")) - sent[c.ts]) * 1000 for c in posted]
        ran = [line["service"] for r in replicas for line in r.recorded("deploy-end")]
        texts = [m.text for m in slack.messages.values()]
        failures = {
            "answers other than 200": sum(s != 200 for s, _ in [*lone, *mentions, *clicks]),
            "missing cards": total - len(posted),
            "cards not updated once": sum(c.updates != 1 for c in posted),
            "tools not run exactly once": total - len(set(ran)) + len(ran) - len(set(ran)),
            "'went wrong' notices": sum("went wrong" in t for t in texts),
        }
        mention_ms = [ms for _, ms in mentions]
        click_ms = [ms for _, ms in clicks]
        print(f"two replicas, store {store_url.split('?')[0]}, burst {size} per replica")
        print(f"  cards: {len(posted)} of {total}; failures: {sum(failures.values())}")
        for what, count in failures.items():
            if count:
                print(f"    {what}: {count}")
        print(f"  baseline: lone mention ack p50 {baseline:.1f} ms")
        rows = [
            ("mention ack", mention_ms),
            ("click ack", click_ms),
            ("click -> card", to_card),
        ]
        for name, samples in rows:
            p50, p99 = p(samples, 0.5), p(samples, 0.99)
            print(
                f"  {name:<14} p50 {p50:8.1f} ms ({p50 / baseline:5.1f}x)"
                f"   p99 {p99:8.1f} ms ({p99 / baseline:5.1f}x)"
            )
    finally:
        for replica in replicas:
            await replica.stop()
        await slack.stop()


async def main(size: int, store: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if store == "sqlite":
            await run(size, f"sqlite:///{Path(tmp) / 'bot.db'}", Path(tmp))
            return
        prefix = f"bench-load-{uuid.uuid4().hex[:8]}"
        separator = "&" if "?" in REDIS_URL else "?"
        try:
            await run(size, f"{REDIS_URL}{separator}prefix={prefix}", Path(tmp))
        finally:
            client = Redis.from_url(REDIS_URL)
            keys = [k async for k in client.scan_iter(match=f"{prefix}:*", count=1000)]
            if keys:
                await client.delete(*keys)
            await client.aclose()


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=200, help="burst per replica")
    parser.add_argument("--store", choices=["redis", "sqlite"], default="redis")
    args = parser.parse_args(argv)
    asyncio.run(main(args.size, args.store))
    return 0


if __name__ == "__main__":
    sys.exit(cli())
