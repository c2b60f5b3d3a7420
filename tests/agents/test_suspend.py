"""Runtime suspension: tools that call suspend() and are resumed with data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from agents import (
    Agent,
    MemoryStore,
    ResumeDataInvalidError,
    Store,
    ToolCall,
    ToolCallApprovalChunk,
    ToolCallNotPendingError,
    ToolCallSuspendedChunk,
    ToolContext,
    ToolErrorChunk,
    open_store,
    tool,
)
from agents.snapshot import dump_snapshot, load_snapshot

from .helpers import call_then_answer


class AskCity(BaseModel):
    message: str


class City(BaseModel):
    city: str


@tool(suspend_schema=AskCity, resume_schema=City)
def weather(ctx: ToolContext, city: str = "") -> dict[str, str]:
    """Fetch the weather for a city."""
    resume = ctx.resume_data
    if not city and resume is None:
        ctx.suspend({"message": "What city do you want to know the weather for?"})
    chosen = resume.city if resume is not None else city
    return {"weather": f"{chosen}: sunny, 21°C"}


def weather_agent(store: Store | None = None) -> Agent:
    return Agent(
        id="weather-agent",
        model=call_then_answer(ToolCall("weather", {}, id="w-1")),
        tools=[weather],
        store=store or MemoryStore(),
    )


async def test_a_suspending_tool_pauses_with_its_payload() -> None:
    agent = weather_agent()
    stream = await agent.stream("What's the weather like?")
    suspended = [c async for c in stream if isinstance(c, ToolCallSuspendedChunk)]
    assert len(suspended) == 1
    payload = suspended[0].payload
    assert payload.suspend_payload == {"message": "What city do you want to know the weather for?"}
    assert payload.resume_schema is not None
    assert "city" in payload.resume_schema["properties"]
    assert (await stream.result()).finish_reason == "suspended"


@pytest.mark.parametrize("with_call_id", [True, False])
async def test_resume_stream_runs_the_tool_again_with_resume_data(with_call_id: bool) -> None:
    agent = weather_agent()
    output = await agent.generate("What's the weather like?")
    call_id = "w-1" if with_call_id else None
    resumed = await agent.resume_stream(
        {"city": "San Francisco"}, run_id=output.run_id, tool_call_id=call_id
    )
    text = "".join([t async for t in resumed.text_stream])
    assert "San Francisco: sunny" in text


async def test_invalid_resume_data_keeps_the_run_suspended_then_valid_data_works() -> None:
    agent = weather_agent()
    output = await agent.generate("What's the weather like?")
    with pytest.raises(ResumeDataInvalidError) as info:
        await agent.resume_stream({"town": "Paris"}, run_id=output.run_id)
    assert info.value.run_id == output.run_id
    assert info.value.tool_call_id == "w-1"
    assert any(e.startswith("city:") for e in info.value.errors)
    assert (await agent.get_run(output.run_id)).pending[0].state == "pending"

    final = await agent.resume_generate({"city": "Paris"}, run_id=output.run_id)
    assert "Paris: sunny" in final.text


async def test_approve_is_refused_for_a_suspension_and_resume_for_an_approval() -> None:
    agent = weather_agent()
    output = await agent.generate("What's the weather like?")
    with pytest.raises(ToolCallNotPendingError, match="resume data"):
        await agent.approve_tool_call(run_id=output.run_id)

    @tool(require_approval=True)
    def wipe() -> str:
        """Wipe."""
        return "wiped"

    gated = Agent(id="g", model=call_then_answer(ToolCall("wipe", {})), tools=[wipe])
    waiting = await gated.generate("wipe")
    with pytest.raises(ToolCallNotPendingError, match="waits for approval"):
        await gated.resume_stream({"anything": 1}, run_id=waiting.run_id)
    assert (await gated.get_run(waiting.run_id)).pending[0].state == "pending"


@pytest.mark.parametrize(
    ("cancel", "told", "audited"),
    [
        (False, "declined to answer the question", "declined"),
        (True, "cancelled the question", "cancelled"),
    ],
)
async def test_a_declined_question_ends_the_call_and_the_model_hears_it(
    cancel: bool, told: str, audited: str
) -> None:
    agent = weather_agent()
    output = await agent.generate("What's the weather like?")
    stream = await agent.decline_tool_call(
        run_id=output.run_id, decided_by="U1", reason="not now", cancel=cancel
    )
    errors: list[ToolErrorChunk] = []
    async for chunk in stream:
        if isinstance(chunk, ToolErrorChunk):
            errors.append(chunk)
    assert [e.error for e in errors] == [
        f"The user {told}, so the tool did not finish. Reason: not now"
    ]
    run = await agent.get_run(output.run_id)
    assert run.status == "finished"
    events = [e.event for e in await agent.engine.store.list_audit(run_id=output.run_id)]
    assert events == ["requested", audited]


async def test_an_approved_tool_may_still_suspend() -> None:
    @tool(require_approval=True, resume_schema=City)
    def careful(ctx: ToolContext) -> str:
        """Needs approval and then a city."""
        if ctx.resume_data is None:
            ctx.suspend({"message": "which city?"})
        return f"ok {ctx.resume_data.city} approved={ctx.approved}"

    agent = Agent(id="a", model=call_then_answer(ToolCall("careful", {})), tools=[careful])
    stream = await agent.stream("go")
    assert any([isinstance(c, ToolCallApprovalChunk) async for c in stream])
    approved = await agent.approve_tool_call(run_id=stream.run_id)
    assert any([isinstance(c, ToolCallSuspendedChunk) async for c in approved])
    final = await agent.resume_generate({"city": "Oslo"}, run_id=stream.run_id)
    assert "ok Oslo approved=True" in final.text


async def test_an_invalid_suspend_payload_is_a_tool_error_naming_the_call() -> None:
    @tool(suspend_schema=AskCity)
    def sloppy(ctx: ToolContext) -> str:
        """Suspends with the wrong payload."""
        ctx.suspend({"msg": "oops"})

    agent = Agent(id="a", model=call_then_answer(ToolCall("sloppy", {}, id="s-1")), tools=[sloppy])
    stream = await agent.stream("go")
    errors = [c async for c in stream if isinstance(c, ToolErrorChunk)]
    assert "suspended with an invalid payload" in errors[0].error
    assert "s-1" in errors[0].error
    assert (await stream.result()).finish_reason == "stop"


async def test_the_snapshot_is_versioned_json_saved_before_the_chunk(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    agent = weather_agent(store)
    stream = await agent.stream("What's the weather like?")
    seen = 0
    async for chunk in stream:
        if isinstance(chunk, ToolCallSuspendedChunk):
            seen += 1
            snap = await store.load_run(stream.run_id)  # read back from the file
            assert snap is not None
            assert snap.status == "paused"
            data = json.loads(dump_snapshot(snap))
            assert data["version"] == 1
            assert data["pending"][0]["tool_call_id"] == "w-1"
            assert load_snapshot(dump_snapshot(snap)) == snap
    assert seen == 1
    with pytest.raises(ValidationError):
        load_snapshot(json.dumps({**data, "version": 2}))
    await store.close()


async def test_cold_resume_of_a_suspension() -> None:
    store = MemoryStore()
    output = await weather_agent(store).generate("What's the weather like?")
    final = await weather_agent(store).resume_generate({"city": "Rome"}, run_id=output.run_id)
    assert "Rome: sunny" in final.text


async def test_a_stored_snapshot_leaves_out_what_holds_its_default() -> None:
    store = MemoryStore()
    output = await weather_agent(store).generate("What's the weather like?")
    snap = await store.load_run(output.run_id)
    assert snap is not None
    data = json.loads(dump_snapshot(snap))
    assert data["version"] == 1  # always said, so an unknown one fails to load
    assert "decisions" not in data  # empty: the default
    assert "created_at" in data["pending"][0]  # a time is never a default
    assert load_snapshot(dump_snapshot(snap)) == snap


async def test_a_paused_run_stores_the_calls_it_waits_on_once() -> None:
    store = MemoryStore()
    output = await weather_agent(store).generate("What's the weather like?")
    snap = await store.load_run(output.run_id)
    assert snap is not None
    assert snap.batch  # waiting on its call, which is also its last turn's call
    assert snap.tool_calls == snap.batch

    text = dump_snapshot(snap)
    assert text.count('"tool_name":"weather"') == 2  # the message and the pending call
    assert text.count(snap.run_id) == 1  # a top run is its own root
    assert load_snapshot(text) == snap
    # What the runs were before (the calls written out) still loads the same.
    full = {**json.loads(text), **snap.model_dump(mode="json", include={"batch", "tool_calls"})}
    assert load_snapshot(json.dumps(full)) == snap


@pytest.mark.parametrize(
    ("asked", "stored"),
    [
        ({"amount": 12.0}, None),  # the model's own arguments: read from its message
        ({"amount": "12"}, {"amount": 12.0}),  # changed by validation: kept as they run
    ],
)
async def test_a_pending_call_stores_its_arguments_unless_the_model_gave_them_as_they_are(
    asked: dict[str, object], stored: dict[str, object] | None
) -> None:
    @tool(require_approval=True)
    def pay(amount: float) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    store = MemoryStore()
    agent = Agent(
        id="pay",
        model=call_then_answer(ToolCall("pay", asked, id="p-1")),
        tools=[pay],
        store=store,
    )
    paused = await agent.generate("pay 12")
    snap = await store.load_run(paused.run_id)
    assert snap is not None
    assert snap.pending[0].args == {"amount": 12.0}  # what the approver sees and what runs
    text = dump_snapshot(snap)
    assert json.loads(text)["pending"][0].get("args") == stored
    assert load_snapshot(text) == snap
