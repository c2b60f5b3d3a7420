"""How fast the Teams adapter answers, and how soon a click shows on the card.

Run with ``python -m bench.teams_bench`` (``--sizes 50,200``). Everything is
local: the real aiohttp server with the Teams adapter (``CloudAdapter`` from
botbuilder) over a ``ChatBot`` on SQLite, the fake Bot Connector of the tests,
activities as Teams sends them (local, unauthenticated mode). For each size N
it posts N "deploy" messages at once, each in its own channel thread (N cards),
then N Approve clicks (``Action.Execute`` invokes) at once, and reports:

- ack: message: activity sent -> HTTP response;
- click -> card (clicker): invoke sent -> its response, which carries the decided card;
- click -> card (everyone): invoke sent -> the card's update reaching the connector.

Each figure is also a ratio to a lone message's ack in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path

from agents import open_store
from tests.teams import activities as act
from tests.teams.conftest import TeamsBot, start_teams_bot
from tests.teams.fake_connector import ConnectorCall, FakeConnector


def in_thread(root: str) -> str:
    return f"{act.CHANNEL};messageid={root}"


def p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed(work: Awaitable[object]) -> float:
    start = time.perf_counter()
    await work
    return (time.perf_counter() - start) * 1000


async def measure(
    size: int, folder: Path, connector: FakeConnector
) -> list[tuple[str, list[float]]]:
    store = open_store(f"sqlite:///{folder / f'{size}.db'}")
    teams: TeamsBot = await start_teams_bot(store=store)
    try:
        lone = [
            await timed(teams.post(act.channel_post(connector.url, f"hello {n}", mention=True)))
            for n in range(10)
        ]
        await teams.bot.drain()
        roots = [f"17{size:04d}{n:07d}" for n in range(size)]
        acks = await asyncio.gather(
            *(
                timed(
                    teams.post(
                        act.channel_post(connector.url, f"deploy s{n}", activity_id=r, mention=True)
                    )
                )
                for n, r in enumerate(roots)
            )
        )
        await teams.bot.drain()
        cards: list[ConnectorCall] = [connector.cards(in_thread(r))[0] for r in roots]
        seen: dict[str, float] = {}
        watching = True

        async def watch() -> None:
            while watching:
                now = time.perf_counter()
                for update in connector.updates():
                    if update.activity_id is not None:
                        seen.setdefault(update.activity_id, now)
                await asyncio.sleep(0.002)

        watcher = asyncio.create_task(watch())
        sent: dict[str, float] = {}

        async def click(root: str, card: ConnectorCall) -> float:
            assert card.card is not None
            invoke = act.execute(
                connector.url,
                card.card,
                "approve",
                conversation=act.channel_conversation(root),
                card_id=card.response_id,
            )
            sent[card.response_id] = time.perf_counter()
            return await timed(teams.post(invoke))

        clicks = await asyncio.gather(*(click(r, c) for r, c in zip(roots, cards, strict=True)))
        await teams.bot.drain()
        await asyncio.sleep(0.05)
        watching = False
        await watcher
        everyone = [(seen[c.response_id] - sent[c.response_id]) * 1000 for c in cards]
    finally:
        await teams.close()
        await store.close()
    return [
        ("lone message ack", lone),
        ("message ack", list(acks)),
        ("click -> card (clicker)", list(clicks)),
        ("click -> card (everyone)", everyone),
    ]


async def main(sizes: list[int]) -> None:
    connector = await FakeConnector().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for size in sizes:
                rows = await measure(size, Path(tmp), connector)
                baseline = statistics.median(rows[0][1])
                print(f"Teams adapter, SQLite, {size} at once (lone ack p50 {baseline:.1f} ms)")
                for name, samples in rows[1:]:
                    p50, p99 = p(samples, 0.5), p(samples, 0.99)
                    print(
                        f"  {name:<25} p50 {p50:8.1f} ms ({p50 / baseline:5.1f}x)"
                        f"   p99 {p99:8.1f} ms ({p99 / baseline:5.1f}x)"
                    )
    finally:
        await connector.close()


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="50,200", help="concurrent requests per round")
    args = parser.parse_args(argv)
    asyncio.run(main([int(s) for s in args.sizes.split(",") if s.strip()]))
    return 0


if __name__ == "__main__":
    sys.exit(cli())
