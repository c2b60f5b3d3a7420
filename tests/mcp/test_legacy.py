"""Servers on MCP 2025-11-25, which ask inside a call: the call suspends like any
question while the server's request stays open, and the answer goes to it. Such a
question lives in this process's session: after a restart the call is treated as
interrupted (asked again from the start if idempotent, else reported)."""

from __future__ import annotations

import asyncio

import pytest

from agents import Agent, MemoryStore, ResumeDataInvalidError, ToolCall
from agents.mcp import McpTools

from ..agents.helpers import call_then_answer
from .conftest import Calls, Connected, stdio_server


def desk(tools: McpTools, call: ToolCall, store: MemoryStore | None = None) -> Agent:
    return Agent(
        id="desk", model=call_then_answer(call), tool_sources=[tools], store=store or MemoryStore()
    )


async def test_a_question_inside_the_call_pauses_it_and_the_answer_finishes_it(
    legacy: Connected,
) -> None:
    assert legacy.tools._client is not None
    assert legacy.tools._client.protocol_version == "2025-11-25"
    agent = desk(legacy.tools, ToolCall("tickets__escalate", {"ticket": "T-1"}))
    paused = await agent.generate("escalate T-1")
    assert paused.finish_reason == "suspended"
    question = paused.suspend_payload
    assert question is not None
    assert question.suspend_payload["message"] == "Why should the ticket be escalated?"
    assert question.suspend_payload["mcp_question"]["live"] is True

    with pytest.raises(ResumeDataInvalidError, match="reason"):
        await agent.resume_generate({"why": "no"}, run_id=paused.run_id)
    # A person may take longer than the call's timeout (2 s here): that time does not count.
    await asyncio.sleep(2.5)
    final = await agent.resume_generate({"reason": "customer is down"}, run_id=paused.run_id)
    assert "T-1 escalated: customer is down" in final.text
    assert [c["tool"] for c in legacy.calls()] == ["escalate"]


@pytest.mark.parametrize("cancel", [False, True])
async def test_declining_the_question_answers_the_open_call(
    legacy: Connected, cancel: bool
) -> None:
    agent = desk(legacy.tools, ToolCall("tickets__escalate", {"ticket": "T-1"}))
    paused = await agent.generate("escalate T-1")
    final = await agent.decline_tool_call_generate(run_id=paused.run_id, cancel=cancel)
    assert f"not escalated ({'cancel' if cancel else 'decline'})" in final.text


async def test_after_a_restart_a_call_that_is_not_idempotent_is_reported_not_rerun(
    stdio_calls: Calls,
) -> None:
    store = MemoryStore()
    call = ToolCall("tickets__escalate", {"ticket": "T-2"})
    before = McpTools(stdio_server(stdio_calls, protocol="legacy"))
    await before.start(wait=20)
    try:
        paused = await desk(before, call, store).generate("escalate T-2")
    finally:
        await before.aclose()  # the bot stops: the session, and the call in it, end

    after = McpTools(stdio_server(stdio_calls, protocol="legacy"))
    await after.start(wait=20)
    try:
        final = await desk(after, call, store).resume_generate(
            {"reason": "VPN for all"}, run_id=paused.run_id
        )
    finally:
        await after.aclose()
    assert "no longer open (the bot restarted" in final.text
    assert "It was not run again" in final.text
    assert [c["tool"] for c in stdio_calls()] == ["escalate"]  # only the first attempt


async def test_after_a_restart_an_idempotent_call_starts_over_and_asks_again(
    stdio_calls: Calls,
) -> None:
    store = MemoryStore()
    call = ToolCall("tickets__schedule", {"ticket": "T-1"})
    before = McpTools(stdio_server(stdio_calls, protocol="legacy"))
    await before.start(wait=20)
    try:
        paused = await desk(before, call, store).generate("schedule T-1")
    finally:
        await before.aclose()

    after = McpTools(stdio_server(stdio_calls, protocol="legacy"))
    await after.start(wait=20)
    try:
        agent = desk(after, call, store)
        again = await agent.resume_generate({"day": "sunday", "hour": 4}, run_id=paused.run_id)
        assert again.finish_reason == "suspended"  # asked anew, by the call started over
        assert again.suspend_payload is not None
        assert again.suspend_payload.suspend_payload["message"] == (
            "When should the maintenance run?"
        )
        final = await agent.resume_generate({"day": "saturday", "hour": 22}, run_id=paused.run_id)
    finally:
        await after.aclose()
    assert "T-1 scheduled: saturday 22:00 UTC" in final.text


async def test_a_question_while_other_calls_are_in_flight_is_refused(legacy: Connected) -> None:
    """The protocol does not say which call asks, so with several in flight none is guessed."""
    slow = asyncio.create_task(legacy.tools.call("slow", {"ticket": "T-1"}))
    await asyncio.sleep(0.2)
    agent = desk(legacy.tools, ToolCall("tickets__escalate", {"ticket": "T-1"}))
    result = await agent.generate("escalate T-1")
    assert result.finish_reason == "stop"
    assert "only one in flight" in result.text
    with pytest.raises(Exception, match="did not answer"):
        await slow
