"""Stopping a run: the model hears nothing more, waiting calls are dropped, once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agents import (
    Agent,
    AgentStream,
    FinishChunk,
    FunctionModel,
    MemoryStore,
    Message,
    ModelResponse,
    RunNotFoundError,
    RunNotPausedError,
    ToolCall,
    ToolCallApprovalChunk,
    tool,
)
from agents import texts as runtime_texts
from agents.messages import ToolCallPart
from agents.models.base import ModelEvent, ModelFinish, ModelRequest, TextDelta, ToolCallEvent
from agents.usage import Usage

from .helpers import Counter, call_then_answer
from .test_supervisor import find_user_agent, supervisor


def deploy_agent(ran: Counter, store: MemoryStore, *, require: bool = True) -> Agent:
    @tool(require_approval=require)
    async def deploy(service: str) -> str:
        """Deploy a service."""
        ran(service=service)
        return f"deployed {service}"

    return Agent(
        id="ops",
        model=call_then_answer(
            ToolCall("deploy", {"service": "api"}, id="call-1"), before="On it. "
        ),
        tools=[deploy],
        store=store,
    )


async def test_stopping_a_paused_run_drops_its_call_and_nothing_runs_after() -> None:
    ran, store = Counter(), MemoryStore()
    agent = deploy_agent(ran, store)
    stream = await agent.stream("deploy api", thread_id="t1", resource_id="U1")
    chunks = [c async for c in stream]
    assert any(isinstance(c, ToolCallApprovalChunk) for c in chunks)

    stopped = await agent.stop_run(stream.run_id, stopped_by="U1")

    assert stopped is not None
    assert stopped.ended
    assert stopped.stopped_by == "U1"
    assert stopped.requester == "U1"
    assert [p.tool_call_id for p in stopped.dropped] == ["call-1"]
    run = await agent.get_run(stream.run_id)
    assert (run.status, run.finish_reason, run.pending) == ("stopped", "stopped", [])
    with pytest.raises(RunNotPausedError) as raised:
        await agent.approve_tool_call(run_id=stream.run_id, tool_call_id="call-1")
    assert raised.value.status == "stopped"
    assert ran.count == 0
    audit = [(e.event, e.actor) for e in await store.list_audit(run_id=stream.run_id)]
    assert audit == [("requested", None), ("stopped", "U1")]
    assert await store.paused_runs("t1") == []
    assert await store.runs_in_flight() == []
    # The thread remembers the call as never run, so the next turn is valid and knows.
    history = await store.load_history("t1")
    results = [r for m in history for r in m.tool_results]
    assert [(r.tool_call_id, r.content, r.is_error) for r in results] == [
        ("call-1", runtime_texts.STOPPED, True)
    ]
    assert await agent.stop_run(stream.run_id, stopped_by="U1") is None  # over already


async def test_stopping_an_unknown_run_says_so() -> None:
    agent = deploy_agent(Counter(), MemoryStore())
    with pytest.raises(RunNotFoundError):
        await agent.stop_run("run_nope")


class SlowModel:
    """Streams a long answer word by word, pausing so a stop can land mid-answer."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []
        self.closed = False

    @property
    def name(self) -> str:
        return "slow"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        try:
            for i in range(50):
                yield TextDelta(text=f"word{i} ")
                await asyncio.sleep(0.01)
            call = ToolCallPart(tool_call_id="late", tool_name="deploy", args={"service": "x"})
            yield ToolCallEvent(call=call)
            yield ModelFinish(stop_reason="tool_use", usage=Usage())
        finally:
            self.closed = True

    async def structured(self, request: Any) -> dict[str, Any]:
        raise NotImplementedError


async def test_a_stop_cuts_the_model_off_mid_answer_and_what_it_asked_never_runs() -> None:
    ran, store, model = Counter(), MemoryStore(), SlowModel()

    @tool
    async def deploy(service: str) -> str:
        """Deploy a service."""
        ran(service=service)
        return "ok"

    agent = Agent(id="ops", model=model, tools=[deploy], store=store)
    stream = await agent.stream("write a lot", thread_id="t1")
    seen: list[Any] = []
    async for chunk in stream:
        seen.append(chunk)
        if len(seen) == 3:
            stopped = await agent.stop_run(stream.run_id, stopped_by="U1")
            assert stopped is not None
            assert not stopped.ended

    assert isinstance(seen[-1], FinishChunk)
    assert seen[-1].finish_reason == "stopped"
    assert len(seen) < 10  # cut off, not the fifty words
    assert model.closed
    assert len(model.requests) == 1
    assert ran.count == 0
    run = await agent.get_run(stream.run_id)
    assert run.status == "stopped"
    assert run.stop is not None
    assert run.stop.by == "U1"
    assert run.text.startswith("word0 ")
    result = await stream.result()
    assert result.finish_reason == "stopped"


async def test_a_tool_that_runs_when_the_stop_comes_finishes_and_the_model_is_not_told() -> None:
    store = MemoryStore()
    release = asyncio.Event()
    started = asyncio.Event()
    ran = Counter()

    @tool(require_approval=True)
    async def deploy(service: str) -> str:
        """Deploy a service."""
        started.set()
        await release.wait()
        ran(service=service)
        return "deployed"

    model = call_then_answer(ToolCall("deploy", {"service": "api"}, id="call-1"))
    agent = Agent(id="ops", model=model, tools=[deploy], store=store)
    stream = await agent.stream("deploy api", thread_id="t1")
    _ = [c async for c in stream]
    going = await agent.approve_tool_call(run_id=stream.run_id, decided_by="U2")
    consumed = asyncio.create_task(_chunks(going))
    await started.wait()

    stopped = await agent.stop_run(stream.run_id, stopped_by="U1")
    assert stopped is not None
    assert not stopped.ended
    assert stopped.dropped == ()
    release.set()
    chunks = await consumed

    assert chunks[-1].finish_reason == "stopped"
    assert ran.count == 1  # it ran to its end, once
    assert len(model.requests) == 1  # and the model never heard of it
    run = await agent.get_run(stream.run_id)
    assert run.status == "stopped"
    assert run.pending == []
    events = [e.event for e in await store.list_audit(run_id=stream.run_id)]
    assert events == ["requested", "approved", "executed"]
    assert await store.runs_in_flight() == []


async def test_a_stop_from_another_process_ends_the_run_at_its_next_step() -> None:
    store = MemoryStore()
    release = asyncio.Event()
    started = asyncio.Event()

    @tool
    async def look(q: str) -> str:
        """Look something up."""
        started.set()
        await release.wait()
        return "found"

    def steps(messages: list[Message], request: ModelRequest) -> ModelResponse:
        n = sum(1 for m in messages if m.tool_results)
        return ModelResponse(tool_calls=(ToolCall("look", {"q": str(n)}, id=f"look-{n}"),))

    model = FunctionModel(steps)
    driver = Agent(id="ops", model=model, tools=[look], store=store)
    other = Agent(id="ops", model=model, tools=[look], store=store)  # another replica
    stream = await driver.stream("look forever", thread_id="t1")
    consumed = asyncio.create_task(_chunks(stream))
    await started.wait()

    stopped = await other.stop_run(stream.run_id, stopped_by="U1")
    assert stopped is not None
    assert not stopped.ended
    release.set()
    chunks = await consumed

    assert chunks[-1].finish_reason == "stopped"
    assert len(model.requests) == 1  # the first lookup's result went nowhere
    run = await driver.get_run(stream.run_id)
    assert run.status == "stopped"
    assert run.stop is not None
    assert run.stop.by == "U1"


async def test_stopping_a_supervisor_drops_its_sub_agents_waiting_call() -> None:
    ran, store = Counter(), MemoryStore()
    sup = supervisor({"data": find_user_agent(ran)}, ("data", "Find user 12345"), store=store)
    stream = await sup.stream("find the user", thread_id="t1")
    _ = [c async for c in stream]

    stopped = await sup.stop_run(stream.run_id, stopped_by="U1")

    assert stopped is not None
    assert stopped.ended
    assert [(p.tool_name, p.agent_path) for p in stopped.dropped] == [
        ("find_user", ("supervisor", "data"))
    ]
    with pytest.raises(RunNotPausedError):
        await sup.approve_tool_call(run_id=stream.run_id, tool_call_id="find-1")
    assert ran.count == 0
    assert (await sup.get_run(stream.run_id)).status == "stopped"


async def _chunks(stream: AgentStream) -> list[Any]:
    return [c async for c in stream]
