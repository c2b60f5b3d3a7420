"""Automatic resumption: the next message on a thread resumes a suspended tool."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from agents import (
    Agent,
    AgentOptions,
    FunctionModel,
    MemoryStore,
    Message,
    ModelResponse,
    ResumeDataInvalidError,
    ToolCall,
    ToolContext,
    tool,
)
from agents.models.base import ModelRequest

from .helpers import Counter, call_then_answer, last_results
from .test_suspend import weather


def weather_conversation_model() -> FunctionModel:
    def handler(messages: list[Message], request: ModelRequest) -> ModelResponse:
        results = last_results(messages)
        if results:
            return ModelResponse(text=f"The weather in {results[0].content}")
        return ModelResponse(tool_calls=[ToolCall("weather", {})])

    return FunctionModel(handler)


def weather_agent(store: MemoryStore, auto: bool = True) -> Agent:
    return Agent(
        id="my-agent",
        instructions="You are a helpful assistant",
        model=weather_conversation_model(),
        tools=[weather],
        store=store,
        default_options=AgentOptions(auto_resume_suspended_tools=auto),
    )


async def test_the_reference_weather_conversation() -> None:
    store = MemoryStore()
    agent = weather_agent(store)
    first = await agent.generate("What's the weather like?", thread_id="t")
    assert first.finish_reason == "suspended"
    assert first.suspend_payload is not None
    assert first.suspend_payload.suspend_payload == {
        "message": "What city do you want to know the weather for?"
    }
    second = await (await agent.stream("San Francisco", thread_id="t")).result()
    assert second.run_id == first.run_id
    assert second.finish_reason == "stop"
    assert "San Francisco: sunny" in second.text
    assert await agent.list_suspended_runs(thread_id="t") == []


async def test_auto_resume_works_through_a_sub_agent() -> None:
    store = MemoryStore()
    inner = Agent(
        id="weather-agent", model=call_then_answer(ToolCall("weather", {})), tools=[weather]
    )
    sup = Agent(
        id="sup",
        model=call_then_answer(
            ToolCall("agent-weather", {"task": "weather"}),
            answer=lambda m: "sup: " + last_results(m)[0].content,
        ),
        agents={"weather": inner},
        store=store,
        default_options=AgentOptions(auto_resume_suspended_tools=True),
    )
    first = await sup.generate("What's the weather like?", thread_id="t")
    assert first.finish_reason == "suspended"
    second = await sup.generate("Berlin", thread_id="t")
    assert second.run_id == first.run_id
    assert "Berlin: sunny" in second.text


class Booking(BaseModel):
    date: str
    seats: int


def booking_agent(store: MemoryStore, extracted: list[dict[str, Any]]) -> Agent:
    booked = Counter()

    @tool(resume_schema=Booking)
    def book_table(ctx: ToolContext) -> str:
        """Book a table; asks for the date and the number of seats."""
        if ctx.resume_data is None:
            ctx.suspend({"message": "For which date, and how many seats?"})
        booked(**ctx.resume_data.model_dump())
        return f"booked {ctx.resume_data.seats} seats on {ctx.resume_data.date}"

    def extract(messages: list[Message], schema: dict[str, Any]) -> dict[str, Any]:
        assert set(schema["properties"]) == {"date", "seats"}
        assert "The user replied:" in messages[-1].text
        return extracted.pop(0)

    model = FunctionModel(
        call_then_answer(ToolCall("book_table", {}))._handler,
        structured_handler=extract,
    )
    return Agent(
        id="host",
        model=model,
        tools=[book_table],
        store=store,
        default_options=AgentOptions(auto_resume_suspended_tools=True),
    )


async def test_a_two_field_resume_schema_is_extracted_by_the_model() -> None:
    store = MemoryStore()
    agent = booking_agent(store, [{"date": "2026-12-24", "seats": 4}])
    await agent.generate("book a table", thread_id="t")
    final = await agent.generate("Christmas eve, four of us", thread_id="t")
    assert "booked 4 seats on 2026-12-24" in final.text


async def test_an_invalid_reply_then_a_valid_one() -> None:
    store = MemoryStore()
    agent = booking_agent(store, [{"date": "soon"}, {"date": "2026-12-24", "seats": 2}])
    first = await agent.generate("book a table", thread_id="t")
    with pytest.raises(ResumeDataInvalidError) as info:
        await agent.stream("whenever", thread_id="t")
    assert info.value.errors == ["seats: Field required"]
    assert (await agent.get_run(first.run_id)).status == "paused"
    final = await agent.generate("24 December, two people", thread_id="t")
    assert final.run_id == first.run_id
    assert "booked 2 seats" in final.text


async def test_text_never_resolves_an_approval() -> None:
    store = MemoryStore()
    ran = Counter()

    @tool(require_approval=True)
    def delete_record(id: str) -> str:
        """Delete a record."""
        ran(id=id)
        return "deleted"

    agent = Agent(
        id="records",
        model=call_then_answer(ToolCall("delete_record", {"id": "1"})),
        tools=[delete_record],
        store=store,
        default_options=AgentOptions(auto_resume_suspended_tools=True),
    )
    first = await agent.generate("delete record 1", thread_id="t")
    await agent.generate("approve", thread_id="t")
    assert ran.count == 0
    assert (await agent.get_run(first.run_id)).status == "paused"


async def test_with_the_flag_off_a_message_starts_a_new_turn() -> None:
    store = MemoryStore()
    agent = weather_agent(store, auto=False)
    first = await agent.generate("What's the weather like?", thread_id="t")
    second = await agent.generate("San Francisco", thread_id="t")
    assert second.run_id != first.run_id
    assert next(p.run_id for p in await agent.list_suspended_runs(thread_id="t")) == first.run_id


async def test_the_flag_can_be_set_per_call() -> None:
    store = MemoryStore()
    agent = weather_agent(store, auto=False)
    first = await agent.generate("What's the weather like?", thread_id="t")
    second = await agent.generate("Oslo", thread_id="t", auto_resume_suspended_tools=True)
    assert second.run_id == first.run_id
    assert "Oslo: sunny" in second.text
