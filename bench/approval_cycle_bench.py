"""One full approval cycle through the runtime, per store: operations and latency.

Run with ``python -m bench.approval_cycle_bench``. The cycle is what a chat
approval costs: a scripted model asks for a gated tool, the run pauses and is
persisted (``generate``), a person approves, the tool runs and the model
answers (``approve_tool_call_generate``). Store calls are counted by a thin
proxy around the real store; Redis is the server at ``REDIS_URL`` and Redis
Cluster the cluster at ``REDIS_CLUSTER_URL``, each under a private key prefix,
deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from agents import Agent, FunctionModel, Message, ModelResponse, Store, ToolCall, open_store, tool
from agents.models.base import ModelRequest
from agents.stores import redis_client, split_prefix
from tests.stores.conftest import postgres_schema

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
REDIS_CLUSTER_URL = os.environ.get(
    "REDIS_CLUSTER_URL", "redis+cluster://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003/"
)
KINDS = ("memory", "sqlite", "redis", "cluster", "postgres")


class CountingStore:
    """Forwards to a store and counts each call by method name."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if not callable(target):
            return target

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return target(*args, **kwargs)

        return counted

    def lock(
        self, name: str, *, ttl: float = 30.0, wait: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        self.calls["lock"] += 1
        return self.inner.lock(name, ttl=ttl, wait=wait)


def approval_agent(store: Store) -> Agent:
    """An agent whose model asks for one gated refund, then answers from its result."""

    @tool(require_approval=True)
    def refund(order_id: str, amount: float) -> dict[str, Any]:
        """Refund an order."""
        return {"refunded": amount, "order_id": order_id}

    def script(messages: list[Message], request: ModelRequest) -> ModelResponse:
        last = messages[-1]
        if last.role == "user" and last.tool_results:
            return ModelResponse(text=f"Done: {last.tool_results[0].content}")
        return ModelResponse(
            text="I'll refund that order.",
            tool_calls=[ToolCall("refund", {"order_id": "A-100234", "amount": 249.99})],
        )

    return Agent(id="billing", model=FunctionModel(script), tools=[refund], store=store)


def supervised_agent(store: Store) -> Agent:
    """A supervisor that hands the refund to ``approval_agent`` (the gated tool is its)."""

    def script(messages: list[Message], request: ModelRequest) -> ModelResponse:
        last = messages[-1]
        if last.role == "user" and last.tool_results:
            return ModelResponse(text=f"Billing says: {last.tool_results[0].content}")
        return ModelResponse(tool_calls=[ToolCall("agent-billing", {"task": "refund A-100234"})])

    return Agent(
        id="front",
        model=FunctionModel(script),
        agents={"billing": approval_agent(store)},
        store=store,
    )


@asynccontextmanager
async def store_for(kind: str) -> AsyncIterator[Store]:
    """An empty store of one kind, removed afterwards."""
    if kind == "memory":
        yield open_store("memory://")
        return
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            store = open_store(f"sqlite:///{Path(folder) / 'bench.db'}")
            try:
                yield store
            finally:
                await store.close()
        return
    if kind == "postgres":
        async with postgres_schema() as scratch:
            store = open_store(scratch)
            try:
                yield store
            finally:
                await store.close()
        return
    url = REDIS_URL if kind == "redis" else REDIS_CLUSTER_URL
    prefix = f"bench-{uuid.uuid4().hex[:12]}"
    store = open_store(f"{url}{'&' if '?' in url else '?'}prefix={prefix}")
    client = redis_client(split_prefix(url)[0])
    try:
        yield store
    finally:
        await store.close()
        # Key by key: a cluster's keys differ in slot (its client scans every primary).
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            await client.delete(key)
        await client.aclose()


def percentile(samples: list[float], fraction: float) -> float:
    """The sample at ``fraction`` (nearest rank), in milliseconds."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))] * 1000


async def measure(kind: str, iterations: int, *, supervised: bool = False) -> list[str]:
    """Time ``iterations`` cycles on one store; the report line."""
    async with store_for(kind) as inner:
        store = CountingStore(inner)
        agent = supervised_agent(store) if supervised else approval_agent(store)
        pause: list[float] = []
        decide: list[float] = []
        per_cycle: Counter[str] = Counter()
        for i in range(iterations):
            before = Counter(store.calls)
            start = time.perf_counter()
            paused = await agent.generate("refund A-100234", thread_id=f"bench:{i}")
            middle = time.perf_counter()
            final = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="U1")
            end = time.perf_counter()
            if final.finish_reason != "stop":
                raise RuntimeError(f"cycle {i} ended with {final.finish_reason}")
            pause.append(middle - start)
            decide.append(end - middle)
            per_cycle = store.calls - before
        ops = sum(per_cycle.values())
        detail = ", ".join(f"{name} {n}" for name, n in sorted(per_cycle.items()))
        cycle = percentile([p + d for p, d in zip(pause, decide, strict=True)], 0.5)
        return [
            f"{kind}{' (supervisor)' if supervised else ''}",
            f"{cycle:.2f}",
            f"{percentile(pause, 0.5):.2f}",
            f"{percentile(pause, 0.99):.2f}",
            f"{percentile(decide, 0.5):.2f}",
            f"{percentile(decide, 0.99):.2f}",
            str(ops),
            detail,
        ]


def print_table(rows: list[list[str]]) -> None:
    """Print aligned columns."""
    header = [
        "store",
        "cycle p50",
        "pause p50",
        "pause p99",
        "decide+resume p50",
        "p99",
        "store ops",
        "per op",
    ]
    table = [header, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for n, row in enumerate(table):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


async def main(argv: list[str]) -> int:
    """Measure every store and print the table (milliseconds)."""
    parser = argparse.ArgumentParser(prog="python -m bench.approval_cycle_bench")
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args(argv)
    print(f"Approval cycle through the runtime, scripted model, {args.iterations} cycles (ms)")
    single = [await measure(kind, args.iterations) for kind in KINDS]
    nested = [await measure(kind, args.iterations, supervised=True) for kind in KINDS]
    print_table([*single, *nested])
    memory = float(single[0][1])
    print("ratios of the cycle p50, in this run:")
    for one, two in zip(single, nested, strict=True):
        print(
            f"  {one[0]:<7} {float(one[1]) / memory:5.2f}x the memory store;"
            f" supervisor -> sub-agent {float(two[1]) / float(one[1]):5.2f}x a single agent"
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
