"""Peers: agents whose top runs a root agent's engine runs, decides and recovers too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agents import (
    Agent,
    MemoryStore,
    ToolCall,
    ToolCallApprovalChunk,
    ToolResultChunk,
    tool,
)

from .helpers import Counter, call_then_answer


def pair(ran: Counter, store: MemoryStore) -> Agent:
    @tool(require_approval=True)
    async def release(version: str) -> str:
        """Release a version."""
        ran(version=version)
        return f"released {version}"

    @tool
    async def chat(text: str) -> str:
        """The root's own tool."""
        return text

    peer = Agent(
        id="ci",
        model=call_then_answer(ToolCall("release", {"version": "v2"}, id="call-1")),
        tools=[release],
    )
    return Agent(
        id="ops",
        model=call_then_answer(ToolCall("chat", {"text": "hi"})),
        tools=[chat],
        peers={"ci": peer},
        store=store,
    )


async def test_a_peer_run_is_decided_through_the_root_agent() -> None:
    ran, store = Counter(), MemoryStore()
    root = pair(ran, store)
    chunks = [c async for c in await root.stream("go", peer="ci", run_id="run_peer")]
    asked = [c for c in chunks if isinstance(c, ToolCallApprovalChunk)]
    assert [c.payload.tool_name for c in asked] == ["release"]
    assert asked[0].payload.agent_path == ("ci",)
    assert [t.name for t in root.tool_specs()] == ["chat"]  # never offered to the root's model

    # Another process, with only the root agent, decides it.
    other = pair(Counter(), store)
    chunks = [
        c
        async for c in await other.approve_tool_call(
            run_id="run_peer", decided_by="U1", args={"version": "v3"}
        )
    ]
    assert [c.result for c in chunks if isinstance(c, ToolResultChunk)] == ["released v3"]
    assert (await other.get_run("run_peer")).agent_path == ["ci"]


async def test_a_peer_run_expires_like_the_roots_own() -> None:
    ran, store = Counter(), MemoryStore()
    root = pair(ran, store)
    [c async for c in await root.stream("go", peer="ci", run_id="run_peer")]
    later = datetime.now(UTC) + timedelta(days=2)
    expired = await root.expire_due(later)
    assert [e.pending.tool_name for e in expired] == ["release"]
    [c async for c in expired[0].stream]
    assert not ran.calls


async def test_a_peer_must_be_keyed_by_its_id_and_one_it_has_not_is_refused() -> None:
    peer = Agent(id="ci", model=call_then_answer(ToolCall("x", {})))
    with pytest.raises(ValueError, match="peer"):
        Agent(id="ops", model=call_then_answer(ToolCall("x", {})), peers={"cd": peer})
    itself = Agent(id="ops", model=call_then_answer(ToolCall("x", {})))
    with pytest.raises(ValueError, match="peer"):
        Agent(id="ops", model=call_then_answer(ToolCall("x", {})), peers={"ops": itself})
    with pytest.raises(KeyError):
        await Agent(id="ops", model=call_then_answer(ToolCall("x", {}))).stream("go", peer="ci")


async def test_a_run_may_ask_for_less_time_than_its_tools_expiry() -> None:
    ran, store = Counter(), MemoryStore()
    root = pair(ran, store)
    stream = await root.stream("go", peer="ci", run_id="run_peer", expires_in=timedelta(minutes=5))
    asked = [c async for c in stream if isinstance(c, ToolCallApprovalChunk)]
    waits = asked[0].payload.expires_at - asked[0].payload.created_at
    assert waits == timedelta(minutes=5)
    # Longer than the tool's own (the agent's 24 h): the tool's.
    stream = await root.stream("go", peer="ci", run_id="run_2", expires_in=timedelta(days=9))
    asked = [c async for c in stream if isinstance(c, ToolCallApprovalChunk)]
    assert asked[0].payload.expires_at - asked[0].payload.created_at == timedelta(hours=24)
