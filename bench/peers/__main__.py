"""Run the approval cycle on this project and on each installed peer; print medians and ratios.

``python -m bench.peers [--iterations N]``. A peer whose package is missing is
named with the extra that installs it, not skipped silently.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from agents import open_store

from ..approval_cycle_bench import approval_agent
from . import Cycle

PEERS = [
    ("LangGraph raw interrupt() + InMemorySaver", "langgraph_interrupt"),
    ("LangChain create_agent + HITL middleware", "langchain_hitl"),
    ("Pydantic AI deferred tools", "pydantic_ai_deferred"),
]
"""Each peer's name and the module under ``bench.peers`` that builds its cycle."""


async def project_cycle() -> Cycle:
    """This project's runtime on the memory store."""
    agent = approval_agent(open_store("memory://"))

    async def cycle(n: int) -> None:
        paused = await agent.generate("refund A-100234", thread_id=f"bench:{n}")
        final = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="U1")
        if final.finish_reason != "stop":
            raise RuntimeError(f"cycle {n} ended with {final.finish_reason}")

    return cycle


async def median_ms(cycle: Cycle, iterations: int) -> float:
    """The median of ``iterations`` cycles after a short warm-up, in milliseconds."""
    for n in range(max(5, iterations // 10)):
        await cycle(-1 - n)
    samples = []
    for n in range(iterations):
        start = time.perf_counter()
        await cycle(n)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


async def main(argv: list[str]) -> int:
    """Measure every system in turn and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.peers")
    parser.add_argument("--iterations", type=int, default=300)
    args = parser.parse_args(argv)
    print(f"Approval cycle, scripted model, median of {args.iterations} (ms), one process")
    ours = await median_ms(await project_cycle(), args.iterations)
    print(f"  {'this project (memory store)':<44} {ours:7.3f}", flush=True)
    missing = []
    for name, module in PEERS:
        try:
            build: Callable[[], Awaitable[Cycle]] = importlib.import_module(
                f"{__package__}.{module}"
            ).cycle
        except ImportError as error:
            missing.append(f"{name}: {error.name} is not installed")
            continue
        ms = await median_ms(await build(), args.iterations)
        print(f"  {name:<44} {ms:7.3f}   this project takes {ours / ms:4.2f}x its time", flush=True)
    for line in missing:
        print(f"  {line} (pip install -e '.[bench-peers]')")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
