"""AnthropicModel driven by an ``agents.Agent``, against the fake Messages API.

The run loop, the approval round trip and the error chunks, with the real SDK
client underneath: what the fake records is what Claude would have been sent.
"""

from __future__ import annotations

from typing import Any

import pytest

from agents import (
    Agent,
    Chunk,
    ErrorChunk,
    FinishChunk,
    MemoryStore,
    TextDeltaChunk,
    ToolCallApprovalChunk,
    tool,
)
from agents.models.anthropic import USER_MESSAGES, AnthropicModel

from .fake_anthropic import (
    FakeAnthropic,
    Text,
    ToolUse,
    overloaded_reply,
    raw_stream_reply,
    stream_reply,
)

SHIP = {"service": "billing", "env": "production"}
OVERLOADED = "Claude is overloaded right now; please try again in a minute."


@pytest.fixture
def deployed() -> list[dict[str, str]]:
    """What the gated tool actually did."""
    return []


@pytest.fixture
def agent(claude: AnthropicModel, deployed: list[dict[str, str]]) -> Agent:
    @tool(require_approval=True)
    async def deploy(service: str, env: str) -> dict[str, Any]:
        """Deploy a service to an environment."""
        deployed.append({"service": service, "env": env})
        return {"deployed": service, "env": env}

    return Agent(
        id="releases",
        instructions="You deploy things.",
        model=claude,
        tools=[deploy],
        store=MemoryStore(),
    )


def ship_then(*final: str) -> tuple[Any, Any]:
    """Claude's first answer (a gated tool call) and its answer after the tool result."""
    return (
        stream_reply(
            Text(pieces=["On it."]),
            ToolUse(id="toolu_ship_01", name="deploy", input=SHIP),
            stop_reason="tool_use",
            message_id="msg_1",
        ),
        stream_reply(Text(pieces=list(final)), message_id="msg_2"),
    )


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of the last user turn of a recorded request."""
    last = body["messages"][-1]
    assert last["role"] == "user"
    return [block for block in last["content"] if block["type"] == "tool_result"]


async def test_approval_round_trip_answers_the_original_tool_use_id(
    fake: FakeAnthropic, agent: Agent, deployed: list[dict[str, str]]
) -> None:
    fake.script(*ship_then("Deployed ", "billing."))

    first = await agent.generate("ship billing to production", thread_id="t1")

    assert first.finish_reason == "suspended"
    assert first.suspend_payload is not None
    assert first.suspend_payload.kind == "approval"
    assert first.suspend_payload.tool_call_id == "toolu_ship_01"
    assert first.suspend_payload.args == SHIP
    assert len(fake.requests) == 1  # the conversation stays open while the call waits
    assert deployed == []
    assert fake.requests[0].body["tools"][0]["name"] == "deploy"

    final = await agent.approve_tool_call_generate(run_id=first.run_id, decided_by="alice")

    assert final.finish_reason == "stop"
    assert final.text.endswith("Deployed billing.")
    assert deployed == [SHIP]
    assert len(fake.requests) == 2
    messages = fake.requests[1].body["messages"]
    assert messages[0] == {
        "role": "user",
        "content": [{"type": "text", "text": "ship billing to production"}],
    }
    assert messages[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "On it."},
            {"type": "tool_use", "id": "toolu_ship_01", "name": "deploy", "input": SHIP},
        ],
    }
    [result] = tool_results(fake.requests[1].body)
    assert result["tool_use_id"] == "toolu_ship_01"
    assert result["is_error"] is False
    assert '"deployed": "billing"' in result["content"]
    assert fake.unused_replies == 0


async def test_decline_is_sent_as_an_error_tool_result(
    fake: FakeAnthropic, agent: Agent, deployed: list[dict[str, str]]
) -> None:
    fake.script(*ship_then("Understood, I did not deploy."))

    first = await agent.generate("ship billing to production")
    final = await agent.decline_tool_call_generate(run_id=first.run_id, reason="code freeze")

    assert deployed == []
    assert final.finish_reason == "stop"
    assert final.text.endswith("Understood, I did not deploy.")
    [result] = tool_results(fake.requests[1].body)
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_ship_01",
        "content": "Tool call was not approved by the user. Reason: code freeze",
        "is_error": True,
    }


async def test_the_approval_chunk_arrives_in_the_stream(fake: FakeAnthropic, agent: Agent) -> None:
    fake.script(*ship_then("Done."))

    stream = await agent.stream("ship billing to production")
    chunks = [chunk async for chunk in stream]

    assert [c.text for c in chunks if isinstance(c, TextDeltaChunk)] == ["On it."]
    [approval] = [c for c in chunks if isinstance(c, ToolCallApprovalChunk)]
    assert approval.payload.tool_call_id == "toolu_ship_01"
    assert isinstance(chunks[-1], FinishChunk)
    assert chunks[-1].finish_reason == "suspended"


async def run_to_the_end(agent: Agent, text: str) -> tuple[list[Chunk], Any]:
    stream = await agent.stream(text)
    chunks = [chunk async for chunk in stream]
    return chunks, await stream.result()


async def test_overload_then_success_is_invisible_to_the_agent(
    fake: FakeAnthropic, agent: Agent
) -> None:
    fake.script(overloaded_reply(), stream_reply(Text(pieces=["Hello."])))

    chunks, result = await run_to_the_end(agent, "hi")

    assert not [c for c in chunks if isinstance(c, ErrorChunk)]
    assert result.finish_reason == "stop"
    assert result.text == "Hello."
    assert len(fake.requests) == 2


async def test_persistent_overload_ends_in_an_error_chunk(
    fake: FakeAnthropic, agent: Agent
) -> None:
    fake.script(overloaded_reply(), overloaded_reply())

    chunks, result = await run_to_the_end(agent, "hi")

    [error] = [c for c in chunks if isinstance(c, ErrorChunk)]
    assert error.error == OVERLOADED == USER_MESSAGES["overloaded"]
    assert error.agent_path == ("releases",)
    assert result.finish_reason == "error"
    assert result.error == OVERLOADED
    assert len(fake.requests) == 2  # the first try and max_retries=1
    assert fake.unused_replies == 0


async def test_persistent_overload_after_an_approval_ends_in_an_error_chunk(
    fake: FakeAnthropic, agent: Agent, deployed: list[dict[str, str]]
) -> None:
    first_reply, _ = ship_then()
    fake.script(first_reply, overloaded_reply(), overloaded_reply())
    first = await agent.generate("ship billing to production")

    stream = await agent.approve_tool_call(run_id=first.run_id)
    chunks = [chunk async for chunk in stream]
    result = await stream.result()

    assert deployed == [SHIP]  # the tool ran; only the answer about it failed
    assert [c.error for c in chunks if isinstance(c, ErrorChunk)] == [OVERLOADED]
    assert result.finish_reason == "error"


def _head() -> list[bytes]:
    chunks = stream_reply(Text(pieces=["partial"])).sse_chunks
    assert chunks is not None
    return list(chunks[:4])  # message_start, ping, content_block_start, one text delta


@pytest.mark.parametrize(
    ("chunks", "drop"),
    [
        pytest.param(
            [*_head(), b"event: content_block_delta\ndata: {not json\n\n"], False, id="bad-json"
        ),
        pytest.param(_head(), False, id="no-message-stop"),
        pytest.param(_head(), True, id="dropped-connection"),
    ],
)
async def test_a_broken_stream_ends_in_an_error_chunk(
    fake: FakeAnthropic, agent: Agent, chunks: list[bytes], drop: bool
) -> None:
    fake.script(raw_stream_reply(*chunks, drop_connection=drop))

    got, result = await run_to_the_end(agent, "hi")

    [error] = [c for c in got if isinstance(c, ErrorChunk)]
    expected = USER_MESSAGES["connection" if drop else "malformed"]
    assert error.error == expected
    assert result.finish_reason == "error"
    assert result.error == expected


async def test_a_garbled_tool_input_tells_people_it_was_garbled(
    fake: FakeAnthropic, agent: Agent, deployed: list[dict[str, str]]
) -> None:
    fake.script(
        stream_reply(
            ToolUse(id="toolu_bad", name="deploy", input={}, sent_json='{"service": billing}'),
            stop_reason="tool_use",
        )
    )

    got, result = await run_to_the_end(agent, "ship billing to production")

    assert [c.error for c in got if isinstance(c, ErrorChunk)] == [
        "Claude's answer arrived garbled; please try again."
    ]
    assert not [c for c in got if isinstance(c, ToolCallApprovalChunk)]
    assert result.finish_reason == "error"
    assert deployed == []


async def test_a_tool_call_cut_off_by_max_tokens_says_the_answer_was_too_long(
    fake: FakeAnthropic, agent: Agent, deployed: list[dict[str, str]]
) -> None:
    fake.script(
        stream_reply(
            Text(pieces=["On it."]),
            ToolUse(id="toolu_cut", name="deploy", input={}, sent_json='{"service": "bill'),
            stop_reason="max_tokens",
        )
    )

    got, result = await run_to_the_end(agent, "ship billing to production")

    [error] = [c for c in got if isinstance(c, ErrorChunk)]
    assert error.error == USER_MESSAGES["too_long"]
    assert "too long" in error.error
    assert "garbled" not in error.error
    assert not [c for c in got if isinstance(c, ToolCallApprovalChunk)]
    assert result.finish_reason == "error"
    assert deployed == []
