"""Expiry of waiting calls, recovery after a crash mid-tool, and the audit log."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agents import (
    Agent,
    CallExpiredError,
    MemoryStore,
    ToolCall,
    ToolContext,
    tool,
)
from agents.snapshot import utcnow

from .helpers import Counter, after_the_lease, call_then_answer


def gated_agent(
    ran: Counter, store: MemoryStore, *, idempotent: bool = False, expires: timedelta | None = None
) -> Agent:
    @tool(require_approval=True, idempotent=idempotent, expires_in=expires)
    def restart_service(name: str, ctx: ToolContext) -> str:
        """Restart a service."""
        ran(name=name, key=ctx.tool_call_id)
        return f"restarted {name}"

    return Agent(
        id="ops",
        model=call_then_answer(ToolCall("restart_service", {"name": "api"}, id="r-1")),
        tools=[restart_service],
        store=store,
    )


async def test_a_call_expires_after_its_tools_ttl() -> None:
    store = MemoryStore()
    agent = gated_agent(Counter(), store, expires=timedelta(minutes=5))
    output = await agent.generate("restart api", thread_id="t")
    assert output.suspend_payload is not None
    ttl = output.suspend_payload.expires_at - output.suspend_payload.created_at
    assert ttl == timedelta(minutes=5)


async def test_the_sweep_returns_each_expired_call_once_and_the_model_is_told() -> None:
    store = MemoryStore()
    ran = Counter()
    agent = gated_agent(ran, store)
    output = await agent.generate("restart api", thread_id="t", resource_id="U1")
    assert await agent.expire_due() == []

    later = utcnow() + timedelta(hours=25)
    expired = await agent.expire_due(now=later)
    assert [e.pending.tool_call_id for e in expired] == ["r-1"]
    assert expired[0].pending.requester == "U1"
    assert await gated_agent(ran, store).expire_due(now=later) == []

    final = await expired[0].stream.result()
    assert final.finish_reason == "stop"
    assert "expired before anyone decided" in final.text
    assert ran.count == 0
    events = [e.event for e in await store.list_audit(run_id=output.run_id)]
    assert events == ["requested", "expired"]


async def test_deciding_an_expired_call_is_a_typed_error() -> None:
    store = MemoryStore()
    agent = gated_agent(Counter(), store, expires=timedelta(seconds=-1))
    output = await agent.generate("restart api")
    with pytest.raises(CallExpiredError) as info:
        await agent.approve_tool_call(run_id=output.run_id)
    assert info.value.tool_call_id == "r-1"
    assert (await agent.get_run(output.run_id)).pending[0].state == "pending"


async def crash_mid_tool(agent: Agent) -> str:
    """Approve, then stop before the tool's outcome is recorded (as a crash would)."""
    output = await agent.generate("restart api", thread_id="t")
    stream = await agent.approve_tool_call(run_id=output.run_id, decided_by="U2")
    assert stream.run_id == output.run_id  # the decision is claimed; the work never runs
    return output.run_id


async def test_a_crash_mid_tool_marks_a_non_idempotent_run_interrupted() -> None:
    store = MemoryStore()
    ran = Counter()
    run_id = await crash_mid_tool(gated_agent(ran, store))
    assert await store.runs_in_flight() == [run_id]

    restarted = gated_agent(ran, store)
    assert await restarted.recover_interrupted() == []  # alive: another replica may run it
    found = await restarted.recover_interrupted(now=after_the_lease())
    assert [f.pending and f.pending.tool_call_id for f in found] == ["r-1"]
    assert found[0].stream is None
    snap = await restarted.get_run(run_id)
    assert snap.status == "interrupted"
    assert "may or may not have finished" in (snap.error or "")
    assert ran.count == 0
    assert await store.runs_in_flight() == []
    assert [e.event for e in await store.list_audit(run_id=run_id)][-1] == "interrupted"


async def test_a_crash_mid_tool_retries_an_idempotent_tool_with_the_same_key() -> None:
    store = MemoryStore()
    ran = Counter()
    run_id = await crash_mid_tool(gated_agent(ran, store, idempotent=True))
    found = await gated_agent(ran, store, idempotent=True).recover_interrupted(
        now=after_the_lease()
    )
    assert found[0].stream is not None
    final = await found[0].stream.result()
    assert final.finish_reason == "stop"
    assert ran.calls == [{"name": "api", "key": "r-1"}]
    assert (await store.load_run(run_id)).status == "finished"  # type: ignore[union-attr]


async def test_the_audit_log_records_requests_and_decisions_per_run_and_thread() -> None:
    store = MemoryStore()
    agent = gated_agent(Counter(), store)
    first = await agent.generate("restart api", thread_id="t", resource_id="U1")
    await agent.decline_tool_call_generate(run_id=first.run_id, decided_by="U2", reason="not now")
    second = await agent.generate("restart api", thread_id="t", resource_id="U1")
    await agent.approve_tool_call_generate(run_id=second.run_id, decided_by="U3")

    entries = await store.list_audit(thread_id="t")
    assert [(e.event, e.actor) for e in entries] == [
        ("requested", None),
        ("declined", "U2"),
        ("requested", None),
        ("approved", "U3"),
        ("executed", "U3"),
    ]
    assert entries[-1].result is not None
    declined = entries[1]
    assert declined.reason == "not now"
    assert declined.requester == "U1"
    assert declined.tool_name == "restart_service"
    assert declined.args == {"name": "api"}
    assert [e.event for e in await store.list_audit(run_id=second.run_id)] == [
        "requested",
        "approved",
        "executed",
    ]
