"""Parallel tool calls in one turn, thread memory and the thread's waiting calls."""

from __future__ import annotations

from agents import (
    Agent,
    AgentOptions,
    FunctionModel,
    MemoryStore,
    Message,
    ModelResponse,
    ToolCall,
    tool,
)
from agents.models.base import ModelRequest

from .helpers import Counter, call_then_answer, last_results


async def test_a_mixed_batch_asks_for_exactly_the_gated_decisions() -> None:
    reads, deletes, renames = Counter(), Counter(), Counter()
    model_turns: list[int] = []

    @tool
    def read_record(id: str) -> str:
        """Read a record."""
        reads(id=id)
        return f"record {id}"

    @tool(require_approval=True)
    def delete_record(id: str) -> str:
        """Delete a record."""
        deletes(id=id)
        return f"deleted {id}"

    @tool(require_approval=True)
    def rename_record(id: str, name: str) -> str:
        """Rename a record."""
        renames(id=id, name=name)
        return f"renamed {id}"

    def handler(messages: list[Message], request: ModelRequest) -> ModelResponse:
        model_turns.append(1)
        if last_results(messages):
            return ModelResponse(text="; ".join(r.content for r in last_results(messages)))
        return ModelResponse(
            tool_calls=[
                ToolCall("read_record", {"id": "1"}, id="r"),
                ToolCall("delete_record", {"id": "2"}, id="d"),
                ToolCall("rename_record", {"id": "3", "name": "new"}, id="n"),
            ]
        )

    agent = Agent(
        id="records",
        model=FunctionModel(handler),
        tools=[read_record, delete_record, rename_record],
    )
    output = await agent.generate("tidy up")
    assert sorted(p.tool_call_id for p in output.pending) == ["d", "n"]
    assert reads.count == 1

    await agent.decline_tool_call_generate(run_id=output.run_id, tool_call_id="n")
    assert len(model_turns) == 1
    final = await agent.approve_tool_call_generate(run_id=output.run_id, tool_call_id="d")
    assert len(model_turns) == 2
    assert final.text == "record 1; deleted 2; Tool call was not approved by the user"
    assert (reads.count, deletes.count, renames.count) == (1, 1, 0)


async def test_ungated_calls_in_one_turn_run_concurrently() -> None:
    import asyncio

    both_started = asyncio.Event()
    started = 0

    @tool
    async def slow(n: int) -> int:
        """Wait for the other call to start too."""
        nonlocal started
        started += 1
        if started == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), timeout=2)
        return n

    agent = Agent(
        id="p",
        model=call_then_answer(ToolCall("slow", {"n": 1}), ToolCall("slow", {"n": 2})),
        tools=[slow],
    )
    result = await agent.generate("go")
    assert [r.content for r in result.tool_results] == ["1", "2"]


def echo_memory_agent(store: MemoryStore, window: int = 50) -> Agent:
    def handler(messages: list[Message], request: ModelRequest) -> ModelResponse:
        said = [m.text for m in messages if m.role == "user" and m.text]
        return ModelResponse(text=f"I have heard: {' / '.join(said)}")

    return Agent(
        id="memo",
        model=FunctionModel(handler),
        store=store,
        default_options=AgentOptions(history_window=window),
    )


async def test_runs_on_one_thread_share_the_conversation_across_instances() -> None:
    store = MemoryStore()
    await echo_memory_agent(store).generate("my name is Ada", thread_id="t1", resource_id="U1")
    again = await echo_memory_agent(store).generate("what is my name?", thread_id="t1")
    assert again.text == "I have heard: my name is Ada / what is my name?"
    other = await echo_memory_agent(store).generate("hello", thread_id="t2")
    assert other.text == "I have heard: hello"


async def test_thread_memory_is_bounded_by_the_window() -> None:
    store = MemoryStore()
    agent = echo_memory_agent(store, window=4)
    for word in ["one", "two", "three", "four"]:
        result = await agent.generate(word, thread_id="t")
    # four messages kept: "two" and "three" with their answers
    assert result.text == "I have heard: two / three / four"


async def test_the_requester_is_recorded() -> None:
    ran = Counter()

    @tool(require_approval=True)
    def wipe() -> str:
        """Wipe."""
        ran()
        return "wiped"

    agent = Agent(id="w", model=call_then_answer(ToolCall("wipe", {})), tools=[wipe])
    output = await agent.generate("wipe", thread_id="t", resource_id="U42")
    assert output.suspend_payload is not None
    assert output.suspend_payload.requester == "U42"
    assert (await agent.get_run(output.run_id)).resource_id == "U42"


async def test_list_suspended_runs_names_every_waiting_call_of_a_thread() -> None:
    @tool(require_approval=True)
    def wipe(target: str) -> str:
        """Wipe."""
        return "wiped"

    agent = Agent(id="w", model=call_then_answer(ToolCall("wipe", {"target": "db"})), tools=[wipe])
    first = await agent.generate("wipe", thread_id="t")
    second = await agent.generate("wipe again", thread_id="t")
    await agent.generate("elsewhere", thread_id="other")
    waiting = await agent.list_suspended_runs(thread_id="t")
    assert [w.run_id for w in waiting] == [first.run_id, second.run_id]
    assert all(w.kind == "approval" and w.tool_name == "wipe" for w in waiting)
    assert waiting[0].args == {"target": "db"}
    assert waiting[0].agent_path == ("w",)
    assert waiting[0].expires_at > waiting[0].created_at

    await agent.approve_tool_call_generate(run_id=first.run_id)
    assert [w.run_id for w in await agent.list_suspended_runs(thread_id="t")] == [second.run_id]
