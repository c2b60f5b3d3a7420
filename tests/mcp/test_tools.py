"""MCP tools through the runtime: the approval rule from hints, one call per approval,
validation before any card, and every failure a tool error the model sees."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
import time
from typing import Any

import mcp.types as mt
import pytest

from agents import Agent, MemoryStore, ResumeDataInvalidError, ToolCall
from agents.mcp import McpError, McpServer, McpTools, McpUnavailable

from ..agents.helpers import call_then_answer
from .conftest import Calls, Connected, HttpServer, free_port, http_server_spec, stdio_server


def agent_calling(tools: McpTools, *calls: ToolCall) -> Agent:
    return Agent(
        id="desk",
        model=call_then_answer(*calls),
        tool_sources=[tools],
        store=MemoryStore(),
    )


async def test_the_model_sees_each_tool_as_server__tool_with_the_servers_schema(
    tickets: Connected,
) -> None:
    agent = agent_calling(tickets.tools)
    specs = {s.name: s for s in agent.tool_specs()}
    assert {"tickets__lookup", "tickets__delete_ticket", "tickets__close_ticket"} <= set(specs)
    lookup = specs["tickets__lookup"]
    assert lookup.description == "Show a ticket."
    assert lookup.input_schema["properties"]["ticket"]["type"] == "string"
    assert lookup.input_schema["required"] == ["ticket"]


async def test_a_read_only_tool_runs_without_a_card(tickets: Connected) -> None:
    agent = agent_calling(tickets.tools, ToolCall("tickets__lookup", {"ticket": "T-1"}))
    result = await agent.generate("what is T-1?")
    assert result.finish_reason == "stop"
    assert "T-1: printer on fire" in result.text
    assert tickets.calls() == [{"tool": "lookup", "args": {"ticket": "T-1"}}]


@pytest.mark.parametrize("tool", ["tickets__delete_ticket", "tickets__close_ticket"])
async def test_a_destructive_or_unannotated_tool_waits_and_runs_once_when_approved(
    tickets: Connected, tool: str
) -> None:
    agent = agent_calling(tickets.tools, ToolCall(tool, {"ticket": "T-2"}))
    paused = await agent.generate("get rid of T-2")
    assert paused.finish_reason == "suspended"
    assert tickets.calls() == []  # nothing reached the server before a person said yes

    final = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="U1")
    assert final.finish_reason == "stop"
    assert len(tickets.calls()) == 1
    assert tickets.calls()[0]["args"]["ticket"] == "T-2"


async def test_a_declined_call_never_reaches_the_server(tickets: Connected) -> None:
    agent = agent_calling(tickets.tools, ToolCall("tickets__delete_ticket", {"ticket": "T-1"}))
    paused = await agent.generate("delete T-1")
    final = await agent.decline_tool_call_generate(run_id=paused.run_id, decided_by="U1")
    assert final.finish_reason == "stop"
    assert tickets.calls() == []


async def test_arguments_the_schema_refuses_go_back_to_the_model_without_a_card(
    tickets: Connected,
) -> None:
    agent = agent_calling(tickets.tools, ToolCall("tickets__delete_ticket", {"ticket": 7}))
    result = await agent.generate("delete ticket seven")
    assert result.finish_reason == "stop"  # no card: the model was told instead
    assert "tickets__delete_ticket error" in result.text
    assert "ticket: 7 is not of type 'string'" in result.text
    assert tickets.calls() == []


async def test_an_error_result_is_a_tool_error_the_model_sees(tickets: Connected) -> None:
    agent = agent_calling(tickets.tools, ToolCall("tickets__broken", {"ticket": "T-1"}))
    result = await agent.generate("look at T-1")
    assert result.finish_reason == "stop"
    assert "tickets__broken error" in result.text
    assert "the ticket database is unreachable" in result.text


async def test_a_call_that_hangs_times_out_as_a_tool_error(tickets: Connected) -> None:
    agent = agent_calling(tickets.tools, ToolCall("tickets__slow", {"ticket": "T-1"}))
    result = await asyncio.wait_for(agent.generate("slow T-1"), 10)
    assert "tickets__slow error" in result.text
    assert "did not answer within 2 s" in result.text
    # The connection is still good afterwards.
    assert await tickets.tools.call("lookup", {"ticket": "T-2"}) == "T-2: VPN down"


async def test_a_new_tool_is_offered_once_the_server_says_its_list_changed(
    tickets: Connected,
) -> None:
    assert "tickets__export" not in tickets.tools.tools()
    assert await tickets.tools.call("add_export_tool", {}) == "export added"
    for _ in range(200):
        if "tickets__export" in tickets.tools.tools():
            break
        await asyncio.sleep(0.02)
    agent = agent_calling(tickets.tools, ToolCall("tickets__export", {"ticket": "T-1"}))
    result = await agent.generate("export T-1")
    assert "T-1.txt" in result.text


async def test_a_servers_question_pauses_the_call_and_the_answer_finishes_it(
    tickets: Connected,
) -> None:
    agent = agent_calling(tickets.tools, ToolCall("tickets__escalate", {"ticket": "T-1"}))
    paused = await agent.generate("escalate T-1")
    assert paused.finish_reason == "suspended"
    question = paused.suspend_payload
    assert question is not None
    assert question.kind == "suspension"
    assert question.suspend_payload["message"] == "Why should the ticket be escalated?"
    assert question.resume_schema is not None
    assert "reason" in question.resume_schema["properties"]

    with pytest.raises(ResumeDataInvalidError, match="reason"):
        await agent.resume_generate({"why": "no"}, run_id=paused.run_id)
    final = await agent.resume_generate({"reason": "customer is down"}, run_id=paused.run_id)
    assert final.finish_reason == "stop"
    assert "T-1 escalated: customer is down" in final.text


@pytest.mark.parametrize(("cancel", "action"), [(False, "decline"), (True, "cancel")])
async def test_declining_a_servers_question_tells_the_server_which(
    tickets: Connected, cancel: bool, action: str
) -> None:
    agent = agent_calling(tickets.tools, ToolCall("tickets__escalate", {"ticket": "T-1"}))
    paused = await agent.generate("escalate T-1")
    final = await agent.decline_tool_call_generate(
        run_id=paused.run_id, decided_by="U1", cancel=cancel
    )
    assert final.finish_reason == "stop"
    # The server heard the person's choice and answered it itself.
    assert f"not escalated ({action})" in final.text
    assert [c["tool"] for c in tickets.calls()] == ["escalate"]


async def test_a_question_of_several_fields_is_answered_with_typed_values(
    tickets: Connected,
) -> None:
    agent = agent_calling(tickets.tools, ToolCall("tickets__schedule", {"ticket": "T-1"}))
    paused = await agent.generate("schedule T-1")
    question = paused.suspend_payload
    assert question is not None
    assert question.resume_schema is not None
    assert list(question.resume_schema["properties"]) == ["day", "hour", "notify"]
    with pytest.raises(ResumeDataInvalidError, match="hour"):
        await agent.resume_generate({"day": "sunday", "hour": 30}, run_id=paused.run_id)
    final = await agent.resume_generate(
        {"day": "sunday", "hour": 4, "notify": True}, run_id=paused.run_id
    )
    assert "T-1 scheduled: sunday 04:00 UTC, customer told" in final.text


async def test_an_answer_through_another_replica_retries_the_call(
    http_server: HttpServer,
) -> None:
    """Nothing of the question lives in the bot's memory: another connection and agent on
    the same store (a replica, or the bot after a restart) answer it."""
    store = MemoryStore()
    first = McpTools(http_server_spec(http_server))
    await first.start(wait=20)
    call = ToolCall("tickets__escalate", {"ticket": "T-2"})
    try:
        paused = await Agent(
            id="desk", model=call_then_answer(call), tool_sources=[first], store=store
        ).generate("escalate T-2")
    finally:
        await first.aclose()
    assert paused.finish_reason == "suspended"

    second = McpTools(http_server_spec(http_server))
    await second.start(wait=20)
    try:
        replica = Agent(id="desk", model=call_then_answer(call), tool_sources=[second], store=store)
        final = await replica.resume_generate({"reason": "VPN for all"}, run_id=paused.run_id)
    finally:
        await second.aclose()
    assert "T-2 escalated: VPN for all" in final.text


async def test_an_idempotent_hint_marks_the_tool_safe_to_retry(tickets: Connected) -> None:
    tools = tickets.tools.tools()
    assert tools["tickets__assign"].idempotent
    assert tools["tickets__assign"].require_approval is True  # not read-only: still asked
    assert not tools["tickets__delete_ticket"].idempotent


async def test_http_requests_carry_the_configured_headers(http_server: HttpServer) -> None:
    wrong = McpTools(
        McpServer(name="tickets", url=http_server.url, headers={"Authorization": "Bearer no"})
    )
    await wrong.start(wait=20)
    try:
        with pytest.raises(Exception, match="unauthorized"):
            await wrong.call("lookup", {"ticket": "T-1"})
    finally:
        await wrong.aclose()


async def test_a_server_that_cannot_be_reached_at_start_is_one_clear_line() -> None:
    port = free_port()
    tools = McpTools(McpServer(name="tickets", url=f"http://127.0.0.1:{port}/mcp"))
    with pytest.raises(
        McpUnavailable, match=rf"MCP server tickets \(http://127.0.0.1:{port}/mcp\)"
    ):
        await tools.start(wait=10)
    await tools.aclose()


async def test_a_stdio_command_that_does_not_exist_is_one_clear_line(stdio_calls: Calls) -> None:
    tools = McpTools(McpServer(name="tickets", command="/nonexistent/mcp-server"))
    with pytest.raises(McpUnavailable, match="MCP server tickets"):
        await tools.start(wait=10)
    await tools.aclose()


async def test_a_lost_server_fails_calls_clearly_and_is_reconnected(
    tmp_path: Any,
) -> None:
    server = HttpServer(free_port(), Calls(tmp_path / "calls.jsonl"))
    server.start()
    tools = McpTools(http_server_spec(server, timeout=5.0), retry=(0.05, 0.2))
    try:
        await tools.start(wait=20)
        agent = agent_calling(tools, ToolCall("tickets__lookup", {"ticket": "T-1"}))
        server.kill()
        result = await agent.generate("what is T-1?")
        assert "tickets__lookup error" in result.text
        assert "tickets" in result.text

        await asyncio.to_thread(server.start)  # the loop runs on: the bot retries meanwhile
        for _ in range(500):
            with contextlib.suppress(McpError):
                await tools.call("lookup", {"ticket": "T-2"})
                break
            await asyncio.sleep(0.02)
        assert tools.state == "connected"
        again = await agent.generate("and now?")
        assert "T-1: printer on fire" in again.text
    finally:
        await tools.aclose()
        server.kill()


def annotated(**hints: Any) -> mt.Tool:
    annotations = mt.ToolAnnotations(**hints) if hints else None
    return mt.Tool(name="t", input_schema={"type": "object"}, annotations=annotations)


@pytest.mark.parametrize(
    ("mode", "hints", "override", "asks"),
    [
        ("hints", {"read_only_hint": True}, None, False),
        ("hints", {"read_only_hint": False}, None, True),
        ("hints", {"destructive_hint": False}, None, True),  # not read-only: a change
        ("hints", {}, None, True),  # no annotations: fail closed
        ("always", {"read_only_hint": True}, None, True),
        ("never", {"destructive_hint": True}, None, False),
        ("hints", {"read_only_hint": True}, True, True),
        ("always", {}, False, False),
    ],
)
def test_the_approval_rule_of_a_tool(
    mode: Any, hints: dict[str, Any], override: bool | None, asks: bool
) -> None:
    overrides = {"t": override} if override is not None else {}
    server = McpServer(name="s", url="http://x/mcp", require_approval=mode, tool_approval=overrides)
    assert server.needs_approval(annotated(**hints)) is asks


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"name": "a__b", "url": "http://x"}, "single '_'"),
        ({"name": "s"}, "exactly one of url and command"),
        ({"name": "s", "url": "http://x", "command": "y"}, "exactly one of url and command"),
        ({"name": "s", "url": "http://x", "timeout": 0}, "timeout must be positive"),
    ],
)
def test_a_server_spec_that_cannot_work_is_refused(options: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        McpServer(**options)


async def test_a_stdio_server_gets_only_the_environment_it_is_given(
    stdio_calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_SECRET_FOR_TEST", "s3cret")  # the bot's own, not the server's
    tools = McpTools(stdio_server(stdio_calls))
    await tools.start(wait=20)
    try:
        assert await tools.call("environment", {"name": "BOT_SECRET_FOR_TEST"}) == "unset"
        given = await tools.call("environment", {"name": "MCP_TEST_CALLS"})
        assert given == str(stdio_calls.path)
    finally:
        await tools.aclose()


async def test_a_server_that_never_answers_is_one_line_and_closes_promptly() -> None:
    silent = McpServer(
        name="tickets", command=sys.executable, args=["-c", "import time; time.sleep(120)"]
    )
    tools = McpTools(silent)
    with pytest.raises(McpUnavailable, match="no answer within 1 s"):
        await tools.start(wait=1)
    started = time.monotonic()
    await asyncio.wait_for(tools.aclose(), 30)
    assert time.monotonic() - started < 15  # not the SDK's connect timeout, nor forever
    assert tools.state == "closed"


@pytest.mark.parametrize("keyed", [True, False])
async def test_an_answer_after_the_server_restarted_needs_the_servers_own_key(
    stdio_calls: Calls, keyed: bool
) -> None:
    """A stdio server restarts with the bot: its sealed request_state opens again only
    under a key it keeps (``RequestStateSecurity(keys=...)``); else the call fails clearly."""
    env = {"MCP_TEST_STATE_KEY": "k" * 32} if keyed else {}
    store = MemoryStore()
    call = ToolCall("tickets__escalate", {"ticket": "T-1"})

    def spec() -> McpServer:
        server = stdio_server(stdio_calls)
        return dataclasses.replace(server, env={**server.env, **env})

    before = McpTools(spec())
    await before.start(wait=20)
    try:
        paused = await Agent(
            id="desk", model=call_then_answer(call), tool_sources=[before], store=store
        ).generate("escalate T-1")
    finally:
        await before.aclose()  # the server process ends with the bot
    after = McpTools(spec())
    await after.start(wait=20)
    try:
        replica = Agent(id="desk", model=call_then_answer(call), tool_sources=[after], store=store)
        final = await replica.resume_generate({"reason": "still down"}, run_id=paused.run_id)
    finally:
        await after.aclose()
    if keyed:
        assert "T-1 escalated: still down" in final.text
    else:
        assert "could not take the answer: the server no longer opens the state" in final.text
