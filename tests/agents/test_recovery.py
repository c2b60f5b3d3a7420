"""Crashes at awkward moments: every run left in flight is found and settled once."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from pydantic import BaseModel

from agents import (
    Agent,
    AgentOptions,
    FunctionModel,
    MemoryStore,
    Message,
    ModelResponse,
    RunNotFoundError,
    RunNotPausedError,
    ToolCall,
    ToolCallApprovalChunk,
    ToolCallSuspendedChunk,
    ToolContext,
    tool,
)
from agents.models.base import ModelRequest
from agents.snapshot import dump_snapshot

from .helpers import Counter, after_the_lease, call_then_answer, last_results


class Gate:
    """Lets a test hold a model call open, then 'crash' the process mid-turn."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.release = asyncio.Event()


def gated_model(gate: Gate, calls: list[ToolCall]) -> FunctionModel:
    """Asks for ``calls``; after their results, blocks on ``gate`` before answering."""

    async def handler(messages: list[Message], request: ModelRequest) -> ModelResponse:
        if not last_results(messages):
            return ModelResponse(tool_calls=calls)
        gate.reached.set()
        await gate.release.wait()
        return ModelResponse(text="done")

    return FunctionModel(handler)


async def crash_while(stream_task: asyncio.Task[object], gate: Gate) -> None:
    """Wait until the model is mid-turn, then kill the work as a crash would."""
    await asyncio.wait_for(gate.reached.wait(), timeout=5)
    stream_task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stream_task


async def test_a_crash_during_the_model_turn_after_an_approval_asks_the_model_again() -> None:
    """The tool's outcome was saved before the model turn: recovery asks the model
    again, and the answer comes without the tool running twice."""
    store = MemoryStore()
    ran = Counter()

    @tool(require_approval=True)
    def send_email(to: str) -> str:
        """Send an email."""
        ran(to=to)
        return "sent"

    def build(gate: Gate) -> Agent:
        model = gated_model(gate, [ToolCall("send_email", {"to": "a@b.c"}, id="mail")])
        return Agent(id="mailer", model=model, tools=[send_email], store=store)

    gate = Gate()
    agent = build(gate)
    paused = await agent.generate("mail", thread_id="t", metadata={"where": "here"})
    stream = await agent.approve_tool_call(run_id=paused.run_id)
    await crash_while(asyncio.create_task(stream.result()), gate)
    assert (await store.load_run(paused.run_id)).status == "running"  # type: ignore[union-attr]
    assert await store.runs_in_flight() == [paused.run_id]

    answering = Gate()
    answering.release.set()
    restarted = build(answering)
    (found,) = await restarted.recover_interrupted(now=after_the_lease())
    assert found.metadata == {"where": "here"}
    assert found.thread_id == "t"
    assert found.error is None
    assert found.stream is not None
    result = await found.stream.result()
    assert result.text == "done"
    assert (await store.load_run(paused.run_id)).status == "finished"  # type: ignore[union-attr]
    assert ran.count == 1
    assert await restarted.recover_interrupted(now=after_the_lease()) == []


async def test_a_crash_while_tools_run_reruns_the_idempotent_and_reports_the_rest() -> None:
    """The batch was saved before its tools ran: after a crash in the middle of it,
    an idempotent call runs again, any other is reported to the model as cut off
    (never run twice), and the run goes on to its answer."""
    store = MemoryStore()
    looked = Counter()
    charged = Counter()
    hold = asyncio.Event()

    @tool(idempotent=True)
    async def look_up(order: str) -> str:
        """Look an order up."""
        looked(order=order)
        await hold.wait()
        return f"order {order}"

    @tool
    async def charge(order: str) -> str:
        """Charge an order."""
        charged(order=order)
        await hold.wait()
        return "charged"

    async def handler(messages: list[Message], request: ModelRequest) -> ModelResponse:
        results = last_results(messages)
        if not results:
            calls = [
                ToolCall("look_up", {"order": "7"}, id="look"),
                ToolCall("charge", {"order": "7"}, id="charge"),
            ]
            return ModelResponse(tool_calls=calls)
        return ModelResponse(text=" | ".join(str(r.content) for r in results))

    def build() -> Agent:
        tools = [look_up, charge]
        return Agent(id="a", model=FunctionModel(handler), tools=tools, store=store)

    task = asyncio.create_task(build().generate("charge 7", thread_id="t"))
    for _ in range(200):
        if looked.count and charged.count:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    hold.set()

    (found,) = await build().recover_interrupted(now=after_the_lease())
    assert found.stream is not None
    answer = (await found.stream.result()).text
    assert "order 7" in answer
    assert "may or may not have finished" in answer
    assert looked.count == 2  # idempotent: run again
    assert charged.count == 1  # never twice


def noop_agent(gate: Gate) -> Agent:
    """An agent that calls a harmless tool, then waits on ``gate`` before answering."""

    @tool
    def noop() -> str:
        """Nothing."""
        return "ok"

    model = gated_model(gate, [ToolCall("noop", {})])
    return Agent(id="a", model=model, tools=[noop], store=MemoryStore())


async def test_a_run_that_has_not_been_quiet_long_enough_is_left_alone() -> None:
    gate = Gate()
    agent = noop_agent(gate)
    task = asyncio.create_task(agent.generate("go"))
    await crash_while(task, gate)
    assert await agent.recover_interrupted() == []  # its heartbeat lasts a lease
    assert len(await agent.recover_interrupted(now=after_the_lease())) == 1


def two_restarts_under_a_supervisor(ran: Counter, gate: Gate, store: MemoryStore) -> Agent:
    @tool(require_approval=True)
    async def restart(name: str) -> str:
        """Restart a service."""
        ran(name=name)
        return f"restarted {name}"

    sub = Agent(
        id="ops",
        model=gated_model(
            gate,
            [
                ToolCall("restart", {"name": "api"}, id="r-api"),
                ToolCall("restart", {"name": "web"}, id="r-web"),
            ],
        ),
        tools=[restart],
    )
    return Agent(
        id="sup",
        model=call_then_answer(ToolCall("agent-ops", {"task": "restart both"}, id="d")),
        agents={"ops": sub},
        store=store,
    )


async def test_a_crash_while_a_sub_agent_continues_is_found_after_both_decisions() -> None:
    store = MemoryStore()
    ran = Counter()
    gate = Gate()
    sup = two_restarts_under_a_supervisor(ran, gate, store)
    paused = await sup.generate("restart both", thread_id="t")
    await sup.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="r-api")
    last = await sup.approve_tool_call(run_id=paused.run_id, tool_call_id="r-web")
    await crash_while(asyncio.create_task(last.result()), gate)

    # The top waits on its sub-agent: nothing to decide, but work is in flight.
    assert (await sup.get_run(paused.run_id)).status == "paused"
    assert await sup.list_suspended_runs(thread_id="t") == []
    assert await store.runs_in_flight() == [paused.run_id]
    (found,) = await two_restarts_under_a_supervisor(ran, Gate(), store).recover_interrupted(
        now=after_the_lease()
    )
    assert found.stream is None
    assert sorted(c["name"] for c in ran.calls) == ["api", "web"]


async def test_a_nested_idempotent_call_already_recorded_below_is_not_run_again() -> None:
    store = MemoryStore()
    ran = Counter()

    @tool(require_approval=True, idempotent=True)
    def restart(name: str) -> str:
        """Restart a service."""
        ran(name=name)
        return "restarted"

    def build(gate: Gate) -> Agent:
        sub = Agent(
            id="ops",
            model=gated_model(gate, [ToolCall("restart", {"name": "api"}, id="r")]),
            tools=[restart],
        )
        return Agent(
            id="sup",
            model=call_then_answer(ToolCall("agent-ops", {"task": "restart"})),
            agents={"ops": sub},
            store=store,
        )

    gate = Gate()
    sup = build(gate)
    paused = await sup.generate("restart")
    stream = await sup.approve_tool_call(run_id=paused.run_id)
    await crash_while(asyncio.create_task(stream.result()), gate)
    (found,) = await build(Gate()).recover_interrupted(now=after_the_lease())
    assert found.stream is None  # the tool's outcome was recorded: only the model turn was lost
    assert found.error is not None
    assert ran.count == 1


async def test_a_claimed_decline_is_finished_after_a_crash_not_reported_as_maybe_run() -> None:
    store = MemoryStore()
    ran = Counter()

    @tool(require_approval=True)
    def wipe() -> str:
        """Wipe."""
        ran()
        return "wiped"

    def build() -> Agent:
        return Agent(
            id="w",
            model=call_then_answer(ToolCall("wipe", {}, id="w-1")),
            tools=[wipe],
            store=store,
        )

    paused = await build().generate("wipe")
    await build().decline_tool_call(run_id=paused.run_id, reason="no")  # then the process dies
    (found,) = await build().recover_interrupted(now=after_the_lease())
    assert found.stream is not None
    final = await found.stream.result()
    assert final.finish_reason == "stop"
    assert "not approved" in final.text
    assert ran.count == 0


async def test_deciding_one_call_keeps_its_sibling_announced_once() -> None:
    store = MemoryStore()
    sup = two_restarts_under_a_supervisor(Counter(), Gate(), store)
    paused = await sup.generate("restart both")
    assert {p.tool_call_id for p in paused.pending} == {"r-api", "r-web"}
    after = await sup.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="r-api")
    (left,) = (await sup.get_run(paused.run_id)).pending
    assert left.tool_call_id == "r-web"
    assert left.announced  # what only the top run knew survives the sub-agent's update
    assert [p.tool_call_id for p in after.pending] == ["r-web"]


async def test_requests_are_audited_even_when_the_reader_stops_at_the_first_card() -> None:
    store = MemoryStore()

    @tool(require_approval=True)
    def wipe(target: str) -> str:
        """Wipe."""
        return "wiped"

    agent = Agent(
        id="w",
        model=call_then_answer(
            ToolCall("wipe", {"target": "a"}, id="c1"), ToolCall("wipe", {"target": "b"}, id="c2")
        ),
        tools=[wipe],
        store=store,
    )
    stream = await agent.stream("wipe both")
    async for chunk in stream:
        if isinstance(chunk, ToolCallApprovalChunk):
            break
    audit = await store.list_audit(run_id=stream.run_id)
    assert sorted(e.tool_call_id for e in audit if e.event == "requested") == ["c1", "c2"]


async def test_a_sync_tool_does_not_block_the_event_loop() -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    @tool
    def slow() -> str:
        """Blocks for a while, as file or network work would."""
        time.sleep(0.3)
        return "ok"

    agent = Agent(id="s", model=call_then_answer(ToolCall("slow", {})), tools=[slow])
    task = asyncio.create_task(ticker())
    await agent.generate("go")
    task.cancel()
    assert ticks >= 10


async def test_a_tool_named_like_a_delegation_is_an_ordinary_tool() -> None:
    ran = Counter()

    @tool(name="agent-delete", require_approval=True)
    def delete() -> str:
        """Delete the agent."""
        ran()
        return "deleted"

    agent = Agent(id="a", model=call_then_answer(ToolCall("agent-delete", {})), tools=[delete])
    assert (await agent.generate("delete")).finish_reason == "suspended"
    assert ran.count == 0
    with pytest.raises(ValueError, match="clashes"):
        Agent(id="b", model=agent.model, tools=[delete], agents={"delete": agent})


async def test_errors_about_a_run_name_the_call_too() -> None:
    agent = Agent(id="a", model=call_then_answer(), default_options=AgentOptions())
    with pytest.raises(RunNotFoundError, match="tool call 'c-9'") as info:
        await agent.approve_tool_call(run_id="run_x", tool_call_id="c-9")
    assert info.value.tool_call_id == "c-9"


async def test_a_sub_agent_that_crashed_while_its_sibling_waits_is_found() -> None:
    store = MemoryStore()
    ran = Counter()

    def build(gate: Gate) -> Agent:
        @tool(require_approval=True)
        def find_user(user_id: str) -> str:
            """Find a user."""
            ran(user_id=user_id)
            return f"user {user_id}"

        one = Agent(
            id="one",
            model=gated_model(gate, [ToolCall("find_user", {"user_id": "1"}, id="find-1")]),
            tools=[find_user],
        )
        two = Agent(
            id="two",
            model=call_then_answer(ToolCall("find_user", {"user_id": "2"}, id="find-2")),
            tools=[find_user],
        )
        return Agent(
            id="sup",
            model=call_then_answer(
                ToolCall("agent-one", {"task": "1"}, id="d1"),
                ToolCall("agent-two", {"task": "2"}, id="d2"),
            ),
            agents={"one": one, "two": two},
            store=store,
        )

    gate = Gate()
    sup = build(gate)
    paused = await sup.generate("both", thread_id="t")
    stream = await sup.approve_tool_call(run_id=paused.run_id, tool_call_id="find-1")
    await crash_while(asyncio.create_task(stream.result()), gate)
    assert await store.runs_in_flight() == [paused.run_id]

    restarted = build(Gate())
    (found,) = await restarted.recover_interrupted(now=after_the_lease())
    assert [p.tool_call_id for p in found.dropped] == ["find-2"]
    with pytest.raises(RunNotPausedError):
        await restarted.approve_tool_call(run_id=paused.run_id, tool_call_id="find-2")
    assert ran.calls == [{"user_id": "1"}]


async def test_a_call_that_asks_again_after_sibling_decisions_is_announced_once() -> None:
    class City(BaseModel):
        city: str

    @tool(require_approval=True, resume_schema=City)
    def travel(ctx: ToolContext, who: str) -> str:
        """Book travel; asks where to."""
        if ctx.resume_data is None:
            ctx.suspend({"message": f"Where should {who} go?"})
        return f"{who} to {ctx.resume_data.city}"

    store = MemoryStore()
    agent = Agent(
        id="t",
        model=call_then_answer(
            ToolCall("travel", {"who": "x"}, id="x"), ToolCall("travel", {"who": "y"}, id="y")
        ),
        tools=[travel],
        store=store,
    )
    paused = await agent.generate("book both")
    streams = [
        await agent.approve_tool_call(run_id=paused.run_id, tool_call_id=call)
        for call in ("x", "y")
    ]
    asked = [
        chunk.payload.tool_call_id
        for stream in streams
        async for chunk in stream
        if isinstance(chunk, ToolCallSuspendedChunk)
    ]
    assert sorted(asked) == ["x", "y"]
    requested = [e.tool_call_id for e in await store.list_audit(run_id=paused.run_id)]
    assert requested.count("x") == 3  # approval asked, approved, question asked


async def backdate(store: MemoryStore, run_id: str, by: timedelta) -> None:
    """Make a run look last saved ``by`` earlier (no public API sets ``updated_at``)."""
    snapshot = await store.load_run(run_id)
    assert snapshot is not None
    snapshot.updated_at -= by
    store._saved[run_id] = dump_snapshot(snapshot)


async def test_a_run_whose_sub_agent_still_makes_progress_is_not_taken_as_crashed() -> None:
    store = MemoryStore()
    gate = Gate()
    sup = two_restarts_under_a_supervisor(Counter(), gate, store)
    paused = await sup.generate("restart both", thread_id="t")
    await sup.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="r-api")
    last = await sup.approve_tool_call(run_id=paused.run_id, tool_call_id="r-web")
    await crash_while(asyncio.create_task(last.result()), gate)

    top = await store.load_run(paused.run_id)
    assert top is not None
    child_id = top.busy_children[0]
    await backdate(store, paused.run_id, timedelta(hours=1))
    assert await sup.recover_interrupted(now=after_the_lease(), quiet=timedelta(minutes=15)) == []

    await backdate(store, child_id, timedelta(hours=1))
    found = await sup.recover_interrupted(now=after_the_lease(), quiet=timedelta(minutes=15))
    assert len(found) == 1


async def test_a_run_working_longer_than_its_lease_stays_alive_until_its_process_dies() -> None:
    gate = Gate()
    agent = noop_agent(gate).configured(lease=timedelta(seconds=0.3))
    task = asyncio.create_task(agent.generate("go"))
    await asyncio.wait_for(gate.reached.wait(), timeout=5)
    await asyncio.sleep(0.9)  # three leases without a save: only the heartbeat says it lives
    assert await agent.recover_interrupted() == []

    await crash_while(task, gate)
    await asyncio.sleep(0.4)  # one lease after the last beat
    (found,) = await agent.recover_interrupted()
    assert found.stream is not None  # cut off in its model turn: asked again
    gate.release.set()
    assert (await found.stream.result()).text == "done"


async def test_a_run_cancelled_as_its_process_shuts_down_is_taken_on_at_once() -> None:
    """A graceful shutdown hands the run back as last saved: another process goes on
    with it now, not a lease later; without ``closing`` it waits for its lease."""
    gate = Gate()
    store = MemoryStore()

    def build(gate: Gate) -> Agent:
        @tool
        def noop() -> str:
            """Nothing."""
            return "ok"

        model = gated_model(gate, [ToolCall("noop", {})])
        return Agent(id="a", model=model, tools=[noop], store=store)

    crashed = build(gate)
    await crash_while(asyncio.create_task(crashed.generate("go")), gate)
    assert await build(Gate()).recover_interrupted() == []  # a crash: its lease first

    closing = build(gate := Gate())
    task = asyncio.create_task(closing.generate("go again"))
    await asyncio.wait_for(gate.reached.wait(), timeout=5)
    closing.closing()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    answering = Gate()
    answering.release.set()
    (found,) = await build(answering).recover_interrupted()
    assert found.stream is not None
    assert (await found.stream.result()).text == "done"
