"""Bad arguments and failing tools never crash a run."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

from agents import Agent, ToolCall, ToolErrorChunk, tool

from .helpers import call_then_answer


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
async def explode() -> str:
    """Always fails."""
    raise ValueError("disk on fire")


async def test_invalid_arguments_become_an_error_result_naming_the_fields() -> None:
    agent = Agent(
        id="calc", model=call_then_answer(ToolCall("add", {"a": "x"}, id="c1")), tools=[add]
    )
    stream = await agent.stream("add")
    errors = [c async for c in stream if isinstance(c, ToolErrorChunk)]
    assert "a:" in errors[0].error
    assert "b:" in errors[0].error
    result = await stream.result()
    assert result.finish_reason == "stop"
    assert result.tool_results[0].is_error


async def test_a_raising_tool_gives_a_tool_error_and_the_run_continues() -> None:
    agent = Agent(id="x", model=call_then_answer(ToolCall("explode", {})), tools=[explode])
    stream = await agent.stream("go")
    errors = [c async for c in stream if isinstance(c, ToolErrorChunk)]
    assert errors[0].error == "Tool explode failed: disk on fire"
    result = await stream.result()
    assert result.finish_reason == "stop"
    assert "disk on fire" in result.text


async def test_an_unknown_tool_is_an_error_result() -> None:
    agent = Agent(id="x", model=call_then_answer(ToolCall("nope", {})), tools=[add])
    result = await agent.generate("go")
    assert result.tool_results[0].content == "Unknown tool 'nope'."


async def test_max_steps_stops_a_looping_model() -> None:
    agent = Agent(
        id="loop",
        model=call_then_answer(ToolCall("add", {"a": 1, "b": 2}), answer=lambda m: ""),
        tools=[add],
    )

    result = await agent.generate("go", max_steps=1)
    assert result.finish_reason == "max_steps"
    assert result.steps == 1


async def test_annotated_constraints_in_a_signature_are_enforced() -> None:
    @tool
    def pay(amount: Annotated[float, Field(gt=0, description="Amount in USD.")]) -> str:
        """Pay."""
        return "paid"

    schema = pay.spec().input_schema["properties"]["amount"]
    assert schema["description"] == "Amount in USD."
    agent = Agent(id="p", model=call_then_answer(ToolCall("pay", {"amount": -5})), tools=[pay])
    result = await agent.generate("pay")
    assert result.tool_results[0].is_error
    assert "amount:" in result.tool_results[0].content


async def test_a_pattern_error_does_not_show_the_regex() -> None:
    from pydantic import BaseModel, ValidationError

    from agents.errors import validation_messages

    class Version(BaseModel):
        version: str = Field(pattern=r"^\d+\.\d+\.\d+$")

    with pytest.raises(ValidationError) as info:
        Version(version="soon")
    assert validation_messages(info.value) == ["version: is not in the expected format"]
