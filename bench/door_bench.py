"""Store reads of a click and of ``stop`` as a deployment grows, against an empty one.

Run with ``python -m bench.door_bench``. One memory store, counted: a thread has one
approval card. Around it, ``N`` other cards wait in the same thread (what a click on
the first must not scan) and ``N`` runs work in other threads (what ``stop`` in this
thread must not read). A click on the card, refused (the clicker is not an approver,
so nothing changes), and a ``stop`` in another quiet thread are made; the store's
reads (``load_run`` and the index reads) of each are counted and printed, with their
ratio to the same walk at ``N = 0``: 1.0x means the walk reads by id, whatever the size.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from typing import Any

from agents import Agent, MemoryStore, ToolCall, tool
from agents.models.function import FunctionModel
from bot import ApprovalCard, ApprovalPolicy, ChatBot, ThreadKey
from bot.types import Click
from tests.agents.helpers import call_then_answer
from tests.bot.helpers import RecordingMessenger

THREAD = ThreadKey(platform="bench", workspace="W1", channel="C1", root="1.0")
READS = ("load_run", "paused_runs", "runs_in_flight", "thread_runs", "list_audit")


class CountingStore(MemoryStore):
    """A memory store that counts the reads the bench is about."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: Counter[str] = Counter()

    def __getattribute__(self, name: str) -> Any:
        found = object.__getattribute__(self, name)
        if name not in READS:
            return found
        reads: Counter[str] = object.__getattribute__(self, "reads")

        async def counted(*args: Any, **kwargs: Any) -> Any:
            reads[name] += 1
            return await found(*args, **kwargs)

        return counted


def refund_agent(store: CountingStore) -> Agent:
    @tool(require_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    model: FunctionModel = call_then_answer(ToolCall("refund", {"order": "A-1"}))
    return Agent(id="ops", model=model, tools=[refund], store=store)


async def walk(others: int) -> tuple[Counter[str], Counter[str]]:
    """The reads of one refused click, then of one ``stop`` in a quiet thread, with
    ``others`` cards beside the clicked one and ``others`` runs working elsewhere."""
    store = CountingStore()
    policy = ApprovalPolicy.from_toml('[tools.refund]\napprovers = ["U_BOSS"]\n')
    bot = ChatBot(refund_agent(store), policy=policy)
    messenger = RecordingMessenger()
    bot.register("bench", messenger)
    card = await ask(bot, messenger)
    snap = await store.load_run(card.run_id)
    assert snap is not None
    for i in range(2 * others):
        working = i % 2 == 1
        copy = snap.model_copy(
            update={
                "run_id": f"other_{i}",
                "root_run_id": f"other_{i}",
                "revision": 0,
                "status": "running" if working else snap.status,
                "pending": [] if working else snap.pending,
                "thread_id": f"bench:W1:C{i}:1.0" if working else snap.thread_id,
            }
        )
        await store.save_run(copy)
    store.reads.clear()
    click = Click(
        thread=THREAD,
        user_id="U_STRANGER",
        run_id=card.run_id,
        tool_call_id=card.tool_call_id,
        action="approve",
        ask=card.ask,
    )
    await bot.decisions.decide(click)
    clicked = Counter(store.reads)
    store.reads.clear()
    await bot.on_stop(ThreadKey(platform="bench", workspace="W1", channel="Q", root="1"), "U1")
    stopped = Counter(store.reads)
    await bot.aclose()
    return clicked, stopped


async def ask(bot: ChatBot, messenger: RecordingMessenger) -> ApprovalCard:
    from bot import IncomingMessage

    await bot.on_message(IncomingMessage(thread=THREAD, user_id="U1", text="refund A-1"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)
    return card


async def main(sizes: list[int]) -> None:
    base_click, base_stop = (sum(c.values()) for c in await walk(0))
    print(f"{'N':>6}  {'click reads':>11}  {'ratio':>6}  {'stop reads':>10}  {'ratio':>6}")
    for size in sizes:
        clicked, stopped = (sum(c.values()) for c in await walk(size))
        print(
            f"{size:>6}  {clicked:>11}  {clicked / base_click:>5.1f}x"
            f"  {stopped:>10}  {stopped / max(base_stop, 1):>5.1f}x"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[0, 10, 100, 1000])
    args = parser.parse_args()
    asyncio.run(main(args.sizes))
    sys.exit(0)
