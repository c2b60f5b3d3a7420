"""``Agent.ask_again``: a waiting approval asked anew with edited arguments, undecided.

The call keeps waiting under a new asking (a new ``created_at``); its arguments are the
edit's, validated like any edit; the audit log says who edited what; an approval then
runs exactly the new arguments; a supervisor's view of a sub-agent's call changes
with it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agents import Agent, ArgsInvalidError, MemoryStore, ToolCall, tool

from .helpers import call_then_answer


def refunds(ran: list[dict[str, Any]], store: MemoryStore) -> Agent:
    @tool(require_approval=True)
    def refund(order: str, amount: int) -> str:
        """Refund part of an order."""
        ran.append({"order": order, "amount": amount})
        return "refunded"

    model = call_then_answer(ToolCall("refund", {"order": "A-1", "amount": 500}, id="r1"))
    return Agent(id="billing", model=model, tools=[refund], store=store)


async def test_a_call_asked_again_waits_anew_and_runs_exactly_the_edit() -> None:
    ran: list[dict[str, Any]] = []
    store = MemoryStore()
    agent = refunds(ran, store)
    paused = await agent.generate("refund A-1 500", thread_id="t")
    before = paused.suspend_payload
    assert before is not None

    asked = await agent.ask_again(
        run_id=paused.run_id,
        tool_call_id="r1",
        args={"order": "A-1", "amount": 5000},
        edited_by="U0LEAD001",
        expires_in=timedelta(hours=4),
    )
    assert asked.args == {"order": "A-1", "amount": 5000}
    assert asked.created_at > before.created_at
    assert asked.expires_at - asked.created_at == timedelta(hours=4)
    assert asked.edited_by == "U0LEAD001"
    assert ran == []
    (waiting,) = await agent.list_suspended_runs(thread_id="t")
    assert waiting.args == asked.args

    with pytest.raises(ArgsInvalidError):
        await agent.ask_again(
            run_id=paused.run_id, tool_call_id="r1", args={"order": "A-1", "amount": "lots"}
        )
    (still,) = await agent.list_suspended_runs(thread_id="t")
    assert (still.args, still.created_at) == (asked.args, asked.created_at)

    await agent.approve_tool_call_generate(
        run_id=paused.run_id, tool_call_id="r1", decided_by="U0FIN0001"
    )
    assert ran == [{"order": "A-1", "amount": 5000}]
    events = [(e.event, e.actor) for e in await store.list_audit(run_id=paused.run_id)]
    assert ("edited", "U0LEAD001") in events
    assert events.index(("edited", "U0LEAD001")) < events.index(("approved", "U0FIN0001"))
