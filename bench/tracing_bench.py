"""What tracing costs per approval cycle through the chat core, as a ratio.

Run with ``python -m bench.tracing_bench``. The cycle is a chat approval on the
memory store: a person's message, the model asks for a gated tool, its card is
posted, a person clicks Approve, the tool runs and the answer is posted (every span
of ``bot.traces`` and ``agents.tracing``: about ten per cycle). OpenTelemetry's
global tracer provider can be set once per process, so each round is its own process:
one without an endpoint (the API's no-op spans), one exporting over OTLP/HTTP to a
local collector that accepts everything, alternating, so a noisy machine weighs on
both alike; the ratio of the medians of their per-cycle p50 is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from statistics import median

from agents import Agent, MemoryStore, ToolCall, tool
from bot import ApprovalCard, ApprovalPolicy, ChatBot, IncomingMessage, ThreadKey
from bot.tracing import tracing_from_env
from bot.types import Click
from tests.agents.helpers import call_then_answer
from tests.bot.helpers import RecordingMessenger
from tests.otlp import OtlpReceiver


def refund_agent() -> Agent:
    @tool(require_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    model = call_then_answer(ToolCall("refund", {"order": "A-1"}), before="Refunding.")
    return Agent(id="billing", model=model, tools=[refund], store=MemoryStore())


async def cycles(count: int) -> tuple[float, float]:
    """``count`` chat approval cycles: the p50 of one, and the CPU time of the process
    (every thread: the exporter's too) per cycle, in milliseconds."""
    tracing = tracing_from_env()
    if tracing is not None:
        tracing.install()
    bot = ChatBot(refund_agent(), policy=ApprovalPolicy())
    messenger = RecordingMessenger()
    bot.register("bench", messenger)
    samples: list[float] = []
    cpu = time.process_time()
    try:
        for i in range(count):
            thread = ThreadKey(platform="bench", workspace="W1", channel="C1", root=f"{i}.0")
            start = time.perf_counter()
            await bot.on_message(IncomingMessage(thread=thread, user_id="U1", text="refund A-1"))
            await bot.drain()
            card = messenger.views(ApprovalCard)[-1]
            click = Click(
                thread=thread,
                user_id="U2",
                run_id=card.run_id,
                tool_call_id=card.tool_call_id,
                action="approve",
            )
            await bot.on_click(click)
            await bot.drain()
            samples.append(time.perf_counter() - start)
    finally:
        await bot.aclose()
        if tracing is not None:
            await tracing.aclose()  # the last spans exported: their CPU counts too
    cpu = time.process_time() - cpu
    return sorted(samples)[len(samples) // 2] * 1000, cpu / count * 1000


def one_round(count: int, endpoint: str | None) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    if endpoint is not None:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    done = subprocess.run(
        [sys.executable, "-m", "bench.tracing_bench", "--one", str(count)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    return float(measured["p50"]), float(measured["cpu"])


async def main(count: int, rounds: int) -> None:
    async with OtlpReceiver() as receiver:
        plain: list[tuple[float, float]] = []
        traced: list[tuple[float, float]] = []
        for _ in range(rounds):
            plain.append(await asyncio.to_thread(one_round, count, None))
            traced.append(await asyncio.to_thread(one_round, count, receiver.url))
        spans = len(receiver.spans)
    print(
        f"Chat approval cycle with tracing / without, {rounds} rounds of {count} cycles"
        f" (memory store, alternating processes; {spans / (rounds * count):.0f} spans a"
        " cycle received):"
    )
    for n, what in enumerate(("wall p50", "CPU per cycle")):
        without = median(p[n] for p in plain)
        with_ = median(t[n] for t in traced)
        print(f"  {what:<14} {with_ / without:5.2f}x ({with_:.2f} ms with, {without:.2f} without)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        p50, cpu = asyncio.run(cycles(args.one))
        print(json.dumps({"p50": p50, "cpu": cpu}))
    else:
        asyncio.run(main(args.cycles, args.rounds))
    sys.exit(0)
