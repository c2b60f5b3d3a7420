"""Flat with size: an approval cycle and a thread's pending list among many others.

Run with ``python -m bench.size_bench [--pending 100000]``. For each store the
same cycle as ``approval_cycle_bench`` (pause, approve, resume to the answer)
and ``Agent.list_suspended_runs`` of one thread are timed with 100 other runs
waiting for approval, then again once ``--pending`` others wait (seeded with
``Store.save_run``, the store's public API, in other threads). What is printed
is each figure at the large size as a ratio to the small one, in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid

from agents import Agent, RunSnapshot, Store

from .approval_cycle_bench import KINDS, approval_agent, store_for

SMALL = 100
SEED_BATCH = 500
"""Saves sent at once while seeding."""


async def paused_template(agent: Agent) -> RunSnapshot:
    """A run as the runtime leaves it, paused on its refund approval."""
    paused = await agent.generate("refund A-100234", thread_id="bench:template")
    return await agent.get_run(paused.run_id)


async def seed(store: Store, template: RunSnapshot, start: int, stop: int) -> None:
    """Save paused copies of ``template`` numbered ``start..stop``, each in its own thread."""
    for low in range(start, stop, SEED_BATCH):
        copies = []
        for n in range(low, min(stop, low + SEED_BATCH)):
            run_id = f"seed-{n}-{uuid.uuid4().hex[:8]}"
            copies.append(
                template.model_copy(
                    deep=True,
                    update={
                        "run_id": run_id,
                        "root_run_id": run_id,
                        "thread_id": f"bench:other:{n}",
                        "revision": 0,
                    },
                )
            )
        await asyncio.gather(*(store.save_run(copy) for copy in copies))


async def timings(agent: Agent, iterations: int) -> tuple[float, float]:
    """Median ms of one cycle and of one ``list_suspended_runs``, ``iterations`` each."""
    cycles: list[float] = []
    lists: list[float] = []
    for i in range(iterations):
        thread = f"bench:cycle:{uuid.uuid4().hex[:8]}"
        start = time.perf_counter()
        paused = await agent.generate("refund A-100234", thread_id=thread)
        middle = time.perf_counter()
        await agent.list_suspended_runs(thread_id=thread)
        listed = time.perf_counter()
        final = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="U1")
        end = time.perf_counter()
        if final.finish_reason != "stop":
            raise RuntimeError(f"cycle {i} ended with {final.finish_reason}")
        cycles.append((middle - start) + (end - listed))
        lists.append(listed - middle)
    return statistics.median(cycles) * 1000, statistics.median(lists) * 1000


async def measure(kind: str, pending: int, iterations: int) -> str:
    """The report line of one store."""
    async with store_for(kind) as store:
        agent = approval_agent(store)
        template = await paused_template(agent)
        await seed(store, template, 0, SMALL)
        await timings(agent, max(10, iterations // 10))  # warm up
        small_cycle, small_list = await timings(agent, iterations)
        began = time.perf_counter()
        await seed(store, template, SMALL, pending)
        seeded = time.perf_counter() - began
        large_cycle, large_list = await timings(agent, iterations)
    return (
        f"{kind:<8} cycle {small_cycle:6.2f} -> {large_cycle:6.2f} ms"
        f" ({large_cycle / small_cycle:4.2f}x)   list_suspended_runs"
        f" {small_list:6.3f} -> {large_list:6.3f} ms ({large_list / small_list:4.2f}x)"
        f"   [seeded {pending - SMALL} in {seeded:.0f} s]"
    )


async def main(argv: list[str]) -> int:
    """Measure every store at both sizes and print the ratios."""
    parser = argparse.ArgumentParser(prog="python -m bench.size_bench")
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--stores", default=",".join(KINDS))
    args = parser.parse_args(argv)
    print(
        f"Cycle and list_suspended_runs, medians of {args.iterations}, with {SMALL}"
        f" and then {args.pending} other pending approvals (ratio large / small)"
    )
    for kind in args.stores.split(","):
        print(await measure(kind, args.pending, args.iterations), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
