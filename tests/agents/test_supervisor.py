"""Supervisors: sub-agents' approvals and suspensions surface at the top."""

from __future__ import annotations

from typing import Any

import pytest

from agents import (
    Agent,
    FunctionModel,
    MemoryStore,
    Message,
    ModelResponse,
    ToolCall,
    ToolCallApprovalChunk,
    ToolCallSuspendedChunk,
    ToolResultChunk,
    tool,
)
from agents.models.base import ModelRequest

from .helpers import Counter, call_then_answer, last_results
from .test_suspend import weather


def find_user_agent(ran: Counter) -> Agent:
    @tool(require_approval=True)
    def find_user(user_id: str) -> dict[str, Any]:
        """Find a user by ID."""
        ran(user_id=user_id)
        return {"user": {"id": user_id, "name": "Ada"}}

    return Agent(
        id="data-agent",
        description="Handles database queries and user data retrieval",
        model=call_then_answer(
            ToolCall("find_user", {"user_id": "12345"}, id="find-1"),
            answer=lambda m: "data says: " + last_results(m)[0].content,
        ),
        tools=[find_user],
    )


def supervisor(
    agents: dict[str, Agent], *tasks: tuple[str, str], store: MemoryStore | None = None
) -> Agent:
    calls = [ToolCall(f"agent-{key}", {"task": task}, id=f"sup-{key}") for key, task in tasks]
    return Agent(
        id="supervisor",
        instructions="You coordinate data retrieval tasks.",
        model=call_then_answer(
            *calls,
            answer=lambda m: "supervisor: " + " | ".join(r.content for r in last_results(m)),
        ),
        agents=agents,
        store=store or MemoryStore(),
    )


async def test_sub_agents_are_offered_as_agent_key_tools() -> None:
    sup = supervisor({"data": find_user_agent(Counter())}, ("data", "x"))
    spec = next(s for s in sup.tool_specs() if s.name == "agent-data")
    assert spec.description == "Handles database queries and user data retrieval"
    assert spec.input_schema["required"] == ["task"]


async def test_a_sub_agents_approval_surfaces_at_the_top_and_approval_travels_down() -> None:
    ran = Counter()
    sup = supervisor({"data": find_user_agent(ran)}, ("data", "Find user with ID 12345"))
    stream = await sup.stream("Find user with ID 12345")
    chunks = [c async for c in stream]
    approval = next(c for c in chunks if isinstance(c, ToolCallApprovalChunk))
    assert approval.payload.tool_name == "find_user"
    assert approval.payload.args == {"user_id": "12345"}
    assert approval.payload.agent_path == ("supervisor", "data")
    assert approval.payload.run_id == stream.run_id

    approved = await sup.approve_tool_call(
        run_id=stream.run_id, tool_call_id=approval.payload.tool_call_id
    )
    inner = [c async for c in approved if isinstance(c, ToolResultChunk)]
    assert inner[0].agent_path == ("supervisor", "data")
    final = await approved.result()
    assert ran.calls == [{"user_id": "12345"}]
    assert final.text.startswith("supervisor: data says:")
    assert "Ada" in final.text


async def test_decline_at_the_top_reaches_the_sub_agents_model() -> None:
    ran = Counter()
    sup = supervisor({"data": find_user_agent(ran)}, ("data", "Find user 12345"))
    output = await sup.generate("Find user 12345")
    final = await sup.decline_tool_call_generate(
        run_id=output.run_id, tool_call_id="find-1", reason="privacy"
    )
    assert ran.count == 0
    assert "data says: Tool call was not approved by the user. Reason: privacy" in final.text


async def test_suspend_inside_a_sub_agent_is_resumed_from_the_top() -> None:
    weather_agent = Agent(
        id="weather-agent",
        model=call_then_answer(ToolCall("weather", {}, id="w-1")),
        tools=[weather],
    )
    sup = supervisor({"weather": weather_agent}, ("weather", "weather please"))
    stream = await sup.stream("What's the weather like?")
    suspended = [c async for c in stream if isinstance(c, ToolCallSuspendedChunk)]
    assert suspended[0].payload.agent_path == ("supervisor", "weather")
    assert suspended[0].payload.suspend_payload["message"].startswith("What city")
    final = await sup.resume_generate({"city": "Lisbon"}, run_id=stream.run_id)
    assert "Lisbon: sunny" in final.text
    assert final.text.startswith("supervisor:")


def three_levels(ran: Counter, store: MemoryStore | None = None) -> Agent:
    agent_b = find_user_agent(ran)
    agent_a = Agent(
        id="a",
        description="Middle manager",
        model=call_then_answer(
            ToolCall("agent-b", {"task": "look it up"}, id="a-to-b"),
            answer=lambda m: "A relays: " + last_results(m)[0].content,
        ),
        agents={"b": agent_b},
    )
    return supervisor({"a": agent_a}, ("a", "find the user"), store=store)


@pytest.mark.parametrize("approve", [True, False])
async def test_three_levels_deep_the_decision_travels_down(approve: bool) -> None:
    ran = Counter()
    sup = three_levels(ran)
    output = await sup.generate("Find user 12345")
    assert output.suspend_payload is not None
    assert output.suspend_payload.agent_path == ("supervisor", "a", "b")
    if approve:
        final = await sup.approve_tool_call_generate(run_id=output.run_id)
        assert ran.count == 1
        assert "supervisor: A relays: data says:" in final.text
    else:
        final = await sup.decline_tool_call_generate(run_id=output.run_id)
        assert ran.count == 0
        assert "not approved" in final.text
    assert final.finish_reason == "stop"


async def test_cold_resume_of_a_nested_pause_from_fresh_agents() -> None:
    store = MemoryStore()
    ran = Counter()
    output = await three_levels(ran, store).generate("Find user 12345")
    final = await three_levels(ran, store).approve_tool_call_generate(run_id=output.run_id)
    assert ran.count == 1
    assert "A relays" in final.text


async def test_two_parallel_delegations_decided_in_reverse_order() -> None:
    ran = Counter()
    model_calls: list[int] = []

    def delegate_both(messages: list[Message], request: ModelRequest) -> ModelResponse:
        model_calls.append(len(messages))
        if not last_results(messages):
            return ModelResponse(
                tool_calls=[
                    ToolCall("agent-one", {"task": "t1"}, id="d1"),
                    ToolCall("agent-two", {"task": "t2"}, id="d2"),
                ]
            )
        return ModelResponse(text=" + ".join(r.content for r in last_results(messages)))

    @tool(require_approval=True)
    def find_user(user_id: str) -> str:
        """Find a user by ID."""
        ran(user_id=user_id)
        return f"user {user_id}"

    def member(user_id: str) -> Agent:
        return Agent(
            id=f"member-{user_id}",
            model=call_then_answer(
                ToolCall("find_user", {"user_id": user_id}, id=f"find-{user_id}")
            ),
            tools=[find_user],
        )

    sup = Agent(
        id="sup",
        model=FunctionModel(delegate_both),
        agents={"one": member("1"), "two": member("2")},
    )
    output = await sup.generate("both")
    assert {p.tool_call_id for p in output.pending} == {"find-1", "find-2"}
    assert len(model_calls) == 1

    partial = await sup.approve_tool_call_generate(run_id=output.run_id, tool_call_id="find-2")
    assert partial.finish_reason == "suspended"
    assert [p.tool_call_id for p in partial.pending] == ["find-1"]
    assert len(model_calls) == 1

    final = await sup.approve_tool_call_generate(run_id=output.run_id, tool_call_id="find-1")
    assert final.finish_reason == "stop"
    assert len(model_calls) == 2
    assert ran.calls == [{"user_id": "2"}, {"user_id": "1"}]
    assert "user 1" in final.text
    assert "user 2" in final.text


async def test_concurrent_decisions_on_one_sub_agents_calls_continue_it_once() -> None:
    import asyncio

    ran = Counter()
    sub_turns: list[int] = []

    @tool(require_approval=True)
    async def restart(name: str) -> str:
        """Restart a service."""
        await asyncio.sleep(0)  # let the other decision interleave here
        ran(name=name)
        return f"restarted {name}"

    def two_restarts(messages: list[Message], request: ModelRequest) -> ModelResponse:
        sub_turns.append(1)
        if last_results(messages):
            return ModelResponse(text=" & ".join(r.content for r in last_results(messages)))
        return ModelResponse(
            tool_calls=[
                ToolCall("restart", {"name": "api"}, id="r-api"),
                ToolCall("restart", {"name": "web"}, id="r-web"),
            ]
        )

    ops = Agent(id="ops-sub", model=FunctionModel(two_restarts), tools=[restart])
    sup = supervisor({"ops": ops}, ("ops", "restart both"))
    output = await sup.generate("restart both")
    assert len(output.pending) == 2

    await asyncio.gather(
        sup.approve_tool_call_generate(run_id=output.run_id, tool_call_id="r-api"),
        sup.approve_tool_call_generate(run_id=output.run_id, tool_call_id="r-web"),
    )
    final = await sup.get_run(output.run_id)
    assert final.status == "finished"
    assert final.text == "supervisor: restarted api & restarted web"
    assert len(sub_turns) == 2
    assert sorted(c["name"] for c in ran.calls) == ["api", "web"]
