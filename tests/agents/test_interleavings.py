"""The compare-and-set protocol under every order of store calls hypothesis finds.

Two people approve the same call, a third declines its sibling, someone stops
the run, and another process's crash recovery looks at it, all at once, over
one store. A store that yields to the event loop a drawn number of times before
each call makes the interleavings; whatever the order, no decision is lost or
doubled: each tool runs at most once, exactly one approval of a call wins (or
the stop came first), the audit log says what happened and nothing more, and
the run ends, remembered in its thread's history once. The same holds when the
calls are a sub-agent's, under a supervisor: a tree of runs, written together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents import Agent, AgentError, MemoryStore, ToolCall, tool
from agents.snapshot import utcnow

from .helpers import Counter, call_then_answer

THREAD = "t"
ORDERS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
"""Orders drawn per test: the same ones every run (a failure shows up again)."""


class Shuffled:
    """A store whose every call first yields to the loop as often as drawn."""

    def __init__(self, inner: MemoryStore, yields: Iterator[int]) -> None:
        self.inner = inner
        self._yields = yields

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if not callable(target) or name in ("lock", "url"):
            return target

        async def shuffled(*args: Any, **kwargs: Any) -> Any:
            for _ in range(next(self._yields, 0)):
                await asyncio.sleep(0)
            return await target(*args, **kwargs)

        return shuffled


def build(store: Any, paid: Counter, shipped: Counter, *, agent_id: str = "shop") -> Agent:
    @tool(require_approval=True)
    async def pay(order: str) -> str:
        """Take the payment."""
        paid(order=order)
        await asyncio.sleep(0)
        return "paid"

    @tool(require_approval=True)
    async def ship(order: str) -> str:
        """Ship the order."""
        shipped(order=order)
        return "shipped"

    model = call_then_answer(
        ToolCall("pay", {"order": "7"}, id="pay"), ToolCall("ship", {"order": "7"}, id="ship")
    )
    return Agent(id=agent_id, model=model, tools=[pay, ship], store=store)


def supervising(store: Any, paid: Counter, shipped: Counter) -> Agent:
    """A supervisor that hands the order to ``build``'s agent (the gated calls are its)."""
    model = call_then_answer(ToolCall("agent-shop", {"task": "order 7"}, id="delegated"))
    return Agent(id="front", model=model, agents={"shop": build(store, paid, shipped)}, store=store)


async def settle(call: Any) -> str:
    """What one actor came to: ``ok`` or the typed error's name (anything else fails)."""
    try:
        result = await call
        if hasattr(result, "result"):
            await result.result()
    except AgentError as exc:
        return type(exc).__name__
    return "ok"


@ORDERS
@given(st.lists(st.integers(min_value=0, max_value=4), min_size=80, max_size=80))
def test_no_decision_is_lost_or_doubled_in_any_order(yields: list[int]) -> None:
    asyncio.run(scenario(yields, build))


@ORDERS
@given(st.lists(st.integers(min_value=0, max_value=4), min_size=120, max_size=120))
def test_no_decision_in_a_sub_agents_run_is_lost_or_doubled_in_any_order(
    yields: list[int],
) -> None:
    asyncio.run(scenario(yields, supervising))


async def scenario(yields: list[int], agent: Callable[[Any, Counter, Counter], Agent]) -> None:
    memory = MemoryStore()
    paid, shipped = Counter(), Counter()
    paused = await agent(memory, paid, shipped).generate("order 7", thread_id=THREAD)
    run_id = paused.run_id
    store = Shuffled(memory, iter(yields))
    here = agent(store, paid, shipped)
    elsewhere = agent(store, paid, shipped)  # another process: its own engine

    first, second, decline, stop, recovered = await asyncio.gather(
        settle(here.approve_tool_call(run_id=run_id, tool_call_id="pay", decided_by="U1")),
        settle(elsewhere.approve_tool_call(run_id=run_id, tool_call_id="pay", decided_by="U2")),
        settle(here.decline_tool_call(run_id=run_id, tool_call_id="ship", decided_by="U3")),
        settle(elsewhere.stop_run(run_id, stopped_by="U4")),
        settle(elsewhere.recover_interrupted(now=utcnow())),
    )
    assert recovered == "ok"  # nothing crashed: recovery takes nothing
    assert stop == "ok"
    run = await memory.load_run(run_id)
    assert run is not None
    events = [(e.event, e.tool_call_id) for e in await memory.list_audit(run_id=run_id)]
    approvals = [first, second].count("ok")

    assert paid.count <= 1, paid.calls
    assert shipped.count == 0, shipped.calls
    assert approvals <= 1, (first, second)
    assert events.count(("approved", "pay")) == approvals
    assert paid.count == approvals  # an approval that won ran its tool, once
    assert events.count(("declined", "ship")) == (decline == "ok")
    assert events.count(("requested", "pay")) == events.count(("requested", "ship")) == 1
    if approvals == 0:
        # Only the stop can keep both approvals from counting: it dropped the call.
        assert ("stopped", "pay") in events, (first, second, events)
    assert run.status in ("finished", "stopped"), run.status
    assert not [p for p in run.pending if p.state == "executing"]
    history = await memory.load_history(THREAD)
    assert [m.text for m in history if m.role == "user" and m.text] == ["order 7"]
