"""An approvals inbox as the audit log grows: its time against an empty log's.

Run with ``python -m bench.inbox_bench``. One SQLite store; a person has made a
few decisions, then the audit log fills with other people's entries (other
threads, other workspaces). The inbox (``ChatBot.inbox``: waiting calls, own
requests, latest decisions) is timed with each log size and printed as a ratio
to the time with the empty log, measured in the same process: a ratio near 1
means the inbox does not read the log.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agents import Agent, AuditEntry, ToolCall, open_store, tool
from agents.models.function import FunctionModel
from bot import ChatBot, IncomingMessage, ThreadKey
from bot.types import Click
from tests.agents.helpers import call_then_answer
from tests.bot.helpers import RecordingMessenger

THREAD = ThreadKey(platform="bench", workspace="W1", channel="C1", root="1.0")


def refund_agent() -> Agent:
    @tool(require_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    model: FunctionModel = call_then_answer(ToolCall("refund", {"order": "A-1"}))
    return Agent(id="ops", model=model, tools=[refund])


async def fill(bot: ChatBot, entries: int) -> None:
    for i in range(entries):
        await bot.store.append_audit(
            AuditEntry(
                event="approved",
                run_id=f"run_other_{i}",
                thread_id=f"bench:W{i % 3 + 2}:C9:{i}.0",
                tool_call_id=f"c{i}",
                tool_name="refund",
                args={"order": f"X-{i}"},
                actor=f"U{i % 50 + 100}",
            )
        )


async def timed(bot: ChatBot, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        await bot.inbox(THREAD, "U2")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def main(sizes: list[int], rounds: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(f"sqlite:///{Path(folder) / 'bench.db'}")
        agent = refund_agent()
        agent.store = store
        bot = ChatBot(agent)
        bot.register("bench", RecordingMessenger())
        try:
            for i in range(5):  # U2 decides five of U1's requests
                thread = ThreadKey(platform="bench", workspace="W1", channel="C1", root=f"{i}.0")
                await bot.on_message(
                    IncomingMessage(thread=thread, user_id="U1", text="refund", dedupe_keys=())
                )
                await bot.drain()
                (call,) = await agent.list_suspended_runs(thread_id=thread.id)
                click = Click(
                    thread=thread,
                    user_id="U2",
                    run_id=call.run_id,
                    tool_call_id=call.tool_call_id,
                    action="approve",
                )
                await bot.on_click(click)
                await bot.drain()
            assert len((await bot.inbox(THREAD, "U2")).decided) == 5
            baseline = await timed(bot, rounds)
            print(f"audit entries     0: inbox {baseline * 1000:7.2f} ms  1.00x (baseline)")
            filled = 0
            for size in sizes:
                await fill(bot, size - filled)
                filled = size
                took = await timed(bot, rounds)
                ratio = took / baseline
                print(f"audit entries {size:5d}: inbox {took * 1000:7.2f} ms  {ratio:.2f}x")
        finally:
            await bot.aclose()
            await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 5000, 20000])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.sizes, args.rounds))
    sys.exit(0)
