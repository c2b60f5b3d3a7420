"""AnthropicModel against a local fake Messages API, through the real SDK client."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import anthropic
import httpx2
import pytest

import agents.models.anthropic as anthropic_module
from agents.messages import Message, TextPart, ToolCallPart, ToolResultPart
from agents.models.anthropic import (
    DEFAULT_MODEL,
    USER_MESSAGES,
    AnthropicModel,
    Problem,
    to_anthropic_messages,
)
from agents.models.base import (
    Model,
    ModelError,
    ModelEvent,
    ModelFinish,
    ModelRequest,
    StopReason,
    StructuredRequest,
    TextDelta,
    ToolCallEvent,
    ToolSpec,
)
from agents.usage import Usage

from .fake_anthropic import (
    FakeAnthropic,
    Reply,
    Text,
    ToolUse,
    error_reply,
    message_reply,
    overloaded_reply,
    raw_stream_reply,
    sse,
    stream_reply,
)

DEPLOY_TOOL = ToolSpec(
    name="deploy",
    description="Deploy a service to an environment.",
    input_schema={
        "type": "object",
        "properties": {"service": {"type": "string"}, "env": {"type": "string"}},
        "required": ["service", "env"],
    },
)
HELLO = ModelRequest(system="You are a release bot.", messages=[Message.user("hello")])


@pytest.fixture
async def model(fake: FakeAnthropic) -> AsyncIterator[AnthropicModel]:
    claude = AnthropicModel(api_key="test-key", base_url=fake.base_url, max_retries=2, timeout=5.0)
    yield claude
    await claude.aclose()


async def collect(model: Model, request: ModelRequest) -> list[ModelEvent]:
    return [event async for event in model.stream(request)]


def deploy_request(*messages: Message) -> ModelRequest:
    return ModelRequest(system="You deploy things.", messages=messages, tools=[DEPLOY_TOOL])


async def collect_into(seen: list[ModelEvent], model: Model, request: ModelRequest) -> None:
    """Collect events into ``seen`` so that a test can see what came before an error."""
    async for event in model.stream(request):
        seen.append(event)


async def test_text_arrives_as_separate_deltas(fake: FakeAnthropic, model: AnthropicModel) -> None:
    fake.script(
        stream_reply(Text(pieces=["Hel", "lo, ", "world"]), input_tokens=31, output_tokens=4)
    )

    events = await collect(model, HELLO)

    assert events == [
        TextDelta(text="Hel"),
        TextDelta(text="lo, "),
        TextDelta(text="world"),
        ModelFinish(
            stop_reason="end_turn", usage=Usage(input_tokens=31, output_tokens=4, requests=1)
        ),
    ]
    [sent] = fake.requests
    assert sent.body == {
        "model": DEFAULT_MODEL,
        "max_tokens": 4096,
        "system": [
            {
                "type": "text",
                "text": "You are a release bot.",
                "cache_control": {"type": "ephemeral"},
            }
        ],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        "stream": True,
    }
    assert sent.headers["authorization"] == "Bearer test-key"
    assert sent.headers["anthropic-version"]


async def test_each_delta_is_yielded_before_the_rest_of_the_stream_arrives(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    rest_of_stream = asyncio.Event()
    reply = stream_reply(Text(pieces=["first", " second"]))
    # message_start, ping, content_block_start and the first delta go out; then the fake waits.
    fake.script(dataclasses.replace(reply, hold=rest_of_stream, hold_after=4))
    events = model.stream(HELLO)

    async with asyncio.timeout(5):
        first = await anext(events)
    rest_of_stream.set()
    rest = [event async for event in events]

    assert first == TextDelta(text="first")
    assert rest[0] == TextDelta(text=" second")
    assert isinstance(rest[-1], ModelFinish)


async def test_empty_system_is_not_sent(fake: FakeAnthropic, model: AnthropicModel) -> None:
    fake.script(stream_reply(Text(pieces=["ok"])))

    await collect(model, ModelRequest(system="", messages=[Message.user("hi")]))

    assert "system" not in fake.requests[0].body


async def test_one_tool_call_is_assembled_from_json_pieces(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    args = {"service": "billing", "env": "production"}
    fake.script(
        stream_reply(
            Text(pieces=["Deploying ", "now."]),
            ToolUse(id="toolu_01", name="deploy", input=args, pieces=4),
            stop_reason="tool_use",
        )
    )

    events = await collect(model, deploy_request(Message.user("ship billing")))

    assert events[:3] == [
        TextDelta(text="Deploying "),
        TextDelta(text="now."),
        ToolCallEvent(call=ToolCallPart(tool_call_id="toolu_01", tool_name="deploy", args=args)),
    ]
    assert isinstance(events[3], ModelFinish)
    assert events[3].stop_reason == "tool_use"
    assert fake.requests[0].body["tools"] == [
        {
            "name": "deploy",
            "description": "Deploy a service to an environment.",
            "input_schema": DEPLOY_TOOL.input_schema,
            "cache_control": {"type": "ephemeral"},  # the tool list is a cached prefix
        }
    ]


async def test_several_tool_calls_in_one_turn_arrive_in_order(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    fake.script(
        stream_reply(
            ToolUse(id="toolu_a", name="deploy", input={"service": "api", "env": "staging"}),
            ToolUse(
                id="toolu_b", name="deploy", input={"service": "web", "env": "staging"}, pieces=7
            ),
            ToolUse(id="toolu_c", name="status", input={}),
            stop_reason="tool_use",
        )
    )

    events = await collect(model, deploy_request(Message.user("ship api and web")))

    calls = [event.call for event in events if isinstance(event, ToolCallEvent)]
    assert calls == [
        ToolCallPart(
            tool_call_id="toolu_a", tool_name="deploy", args={"service": "api", "env": "staging"}
        ),
        ToolCallPart(
            tool_call_id="toolu_b", tool_name="deploy", args={"service": "web", "env": "staging"}
        ),
        ToolCallPart(tool_call_id="toolu_c", tool_name="status", args={}),
    ]
    assert events[-1] == ModelFinish(
        stop_reason="tool_use", usage=Usage(input_tokens=25, output_tokens=9, requests=1)
    )


async def test_round_trip_answers_the_original_tool_use_id(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    args = {"service": "billing", "env": "production"}
    fake.script(
        stream_reply(
            Text(pieces=["On it."]),
            ToolUse(id="toolu_01", name="deploy", input=args),
            stop_reason="tool_use",
        ),
        stream_reply(Text(pieces=["Deployed."])),
    )
    ask = Message.user("ship billing")
    first = await collect(model, deploy_request(ask))
    [call] = [event.call for event in first if isinstance(event, ToolCallEvent)]
    answer = Message(role="assistant", parts=[TextPart(text="On it."), call])
    result = Message(
        role="user",
        parts=[
            ToolResultPart(
                tool_call_id=call.tool_call_id, tool_name="deploy", content='{"ok": true}'
            )
        ],
    )

    second = await collect(model, deploy_request(ask, answer, result))

    assert second[0] == TextDelta(text="Deployed.")
    assert fake.requests[1].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "ship billing"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "On it."},
                {"type": "tool_use", "id": "toolu_01", "name": "deploy", "input": args},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": '{"ok": true}',
                    "is_error": False,
                }
            ],
        },
    ]


async def test_decline_is_sent_as_an_error_tool_result(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    fake.script(stream_reply(Text(pieces=["Understood, not deploying."])))
    call = ToolCallPart(
        tool_call_id="toolu_9", tool_name="deploy", args={"service": "db", "env": "prod"}
    )
    decline = ToolResultPart(
        tool_call_id="toolu_9",
        tool_name="deploy",
        content="Declined by @alice: not today",
        is_error=True,
    )

    await collect(
        model,
        deploy_request(
            Message.user("ship db"),
            Message(role="assistant", parts=[call]),
            Message(role="user", parts=[decline]),
        ),
    )

    [result] = fake.requests[0].body["messages"][2]["content"]
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_9",
        "content": "Declined by @alice: not today",
        "is_error": True,
    }


def test_tool_results_lead_their_user_turn_and_same_role_turns_merge() -> None:
    call = ToolCallPart(tool_call_id="toolu_1", tool_name="deploy", args={})
    result = ToolResultPart(tool_call_id="toolu_1", tool_name="deploy", content="", is_error=True)

    params = to_anthropic_messages(
        [
            Message.user("ship it"),
            Message(role="assistant", parts=[TextPart(text=""), call]),
            Message(role="user", parts=[TextPart(text="also, hurry")]),
            Message(role="user", parts=[result]),
        ]
    )

    assert params == [
        {"role": "user", "content": [{"type": "text", "text": "ship it"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "deploy", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "The tool call failed.",
                    "is_error": True,
                },
                {"type": "text", "text": "also, hurry"},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("api_reason", "reason"),
    [
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("refusal", "refusal"),
        ("pause_turn", "pause_turn"),
        ("model_context_window_exceeded", "max_tokens"),
    ],
)
async def test_stop_reason_and_usage_are_mapped(
    fake: FakeAnthropic, model: AnthropicModel, api_reason: str, reason: StopReason
) -> None:
    fake.script(
        stream_reply(
            Text(pieces=["Once upon"]),
            stop_reason=api_reason,
            input_tokens=1200,
            output_tokens=4096,
        )
    )

    events = await collect(model, HELLO)

    assert events[-1] == ModelFinish(
        stop_reason=reason,
        usage=Usage(input_tokens=1200, output_tokens=4096, requests=1),
    )


async def test_overload_then_success_is_retried_by_the_sdk(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    fake.script(overloaded_reply(), stream_reply(Text(pieces=["fine now"])))

    events = await collect(model, HELLO)

    assert events[0] == TextDelta(text="fine now")
    assert [r.headers["x-stainless-retry-count"] for r in fake.requests] == ["0", "1"]
    assert fake.requests[0].body == fake.requests[1].body


async def test_persistent_overload_tells_people_claude_is_overloaded(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    fake.script(overloaded_reply(), overloaded_reply(), overloaded_reply())

    with pytest.raises(ModelError) as caught:
        await collect(model, HELLO)

    assert (
        caught.value.user_message == "Claude is overloaded right now; please try again in a minute."
    )
    assert "overloaded_error" in str(caught.value)
    assert len(fake.requests) == 3  # the first try and max_retries=2


@pytest.mark.parametrize(
    ("status", "error_type", "problem", "attempts"),
    [
        (401, "authentication_error", "auth", 1),
        (403, "permission_error", "permission", 1),
        (404, "not_found_error", "not_found", 1),
        (400, "invalid_request_error", "invalid_request", 1),
        (429, "rate_limit_error", "rate_limited", 3),
        (500, "api_error", "server", 3),
    ],
)
async def test_api_errors_become_model_errors_with_a_user_message(
    fake: FakeAnthropic,
    model: AnthropicModel,
    status: int,
    error_type: str,
    problem: Problem,
    attempts: int,
) -> None:
    fake.script(*[error_reply(status, error_type, "nope") for _ in range(attempts)])

    with pytest.raises(ModelError) as caught:
        await collect(model, HELLO)

    assert caught.value.user_message == USER_MESSAGES[problem]
    assert len(fake.requests) == attempts
    assert fake.unused_replies == 0


async def test_credentials_rejected_has_its_own_message(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    fake.script(error_reply(401, "authentication_error", "invalid x-api-key"))

    with pytest.raises(ModelError) as caught:
        await collect(model, HELLO)

    assert caught.value.user_message == "The bot's Anthropic credentials were rejected."


_START = stream_reply(Text(pieces=["partial"])).sse_chunks
assert _START is not None
_HEAD = list(_START[:4])  # message_start, ping, content_block_start, one text delta


@pytest.mark.parametrize(
    ("chunks", "drop", "problem"),
    [
        pytest.param(
            [*_HEAD, b"event: content_block_delta\ndata: {not json\n\n"],
            False,
            "malformed",
            id="bad-json",
        ),
        pytest.param(_HEAD, False, "malformed", id="no-message-stop"),
        pytest.param(
            [
                *_HEAD,
                sse(
                    "error",
                    {
                        "type": "error",
                        "error": {"type": "overloaded_error", "message": "Overloaded"},
                    },
                ),
            ],
            False,
            "overloaded",
            id="error-event",
        ),
        pytest.param(_HEAD, True, "connection", id="dropped-connection"),
    ],
)
async def test_broken_stream_raises_model_error(
    fake: FakeAnthropic, model: AnthropicModel, chunks: list[bytes], drop: bool, problem: Problem
) -> None:
    fake.script(raw_stream_reply(*chunks, drop_connection=drop))

    seen: list[ModelEvent] = []

    async def consume() -> None:
        async for event in model.stream(HELLO):
            seen.append(event)

    with pytest.raises(ModelError) as caught:
        await consume()

    assert caught.value.user_message == USER_MESSAGES[problem]
    assert seen == [TextDelta(text="partial")]
    assert not any(isinstance(event, ModelFinish) for event in seen)


async def test_tool_input_that_is_not_json_raises_model_error(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    def delta(partial: str) -> bytes:
        return sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": partial},
            },
        )

    fake.script(
        raw_stream_reply(
            *_HEAD[:2],
            sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {
                        "type": "tool_use",
                        "id": "toolu_x",
                        "name": "deploy",
                        "input": {},
                    },
                },
            ),
            delta('{"service": "bil'),
            delta("ling"),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        )
    )

    with pytest.raises(ModelError) as caught:
        await collect(model, deploy_request(Message.user("ship")))

    assert caught.value.user_message == USER_MESSAGES["malformed"]
    assert "not JSON" in str(caught.value)


@pytest.mark.parametrize("api_reason", ["max_tokens", "model_context_window_exceeded"])
async def test_a_tool_call_cut_off_by_the_length_limit_says_the_answer_was_too_long(
    fake: FakeAnthropic, model: AnthropicModel, api_reason: str
) -> None:
    fake.script(
        stream_reply(
            Text(pieces=["Deploying."]),
            ToolUse(
                id="toolu_cut",
                name="deploy",
                input={},
                sent_json='{"service": "billing", "env": "prod',
            ),
            stop_reason=api_reason,
        )
    )
    seen: list[ModelEvent] = []

    with pytest.raises(ModelError) as caught:
        await collect_into(seen, model, deploy_request(Message.user("ship billing")))

    assert caught.value.user_message == USER_MESSAGES["too_long"]
    assert "too long" in caught.value.user_message
    assert "length limit" in caught.value.user_message
    assert f"stop_reason={api_reason}" in str(caught.value)
    assert "not JSON" in str(caught.value)
    # The text before the cut arrived; the broken call never did.
    assert seen == [TextDelta(text="Deploying.")]


async def test_unparsable_tool_input_with_another_stop_reason_is_garbled(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    fake.script(
        stream_reply(
            ToolUse(id="toolu_ok", name="deploy", input={"service": "api", "env": "staging"}),
            ToolUse(id="toolu_bad", name="deploy", input={}, sent_json='{"service": web}'),
            stop_reason="tool_use",
        )
    )
    seen: list[ModelEvent] = []

    with pytest.raises(ModelError) as caught:
        await collect_into(seen, model, deploy_request(Message.user("ship api and web")))

    assert caught.value.user_message == USER_MESSAGES["malformed"]
    assert "toolu_bad" not in repr(seen)
    assert not any(isinstance(event, ModelFinish) for event in seen)


async def test_unreachable_api_raises_model_error() -> None:
    claude = AnthropicModel(api_key="k", base_url="http://127.0.0.1:9", max_retries=0, timeout=2.0)

    with pytest.raises(ModelError) as caught:
        await collect(claude, HELLO)

    assert caught.value.user_message == USER_MESSAGES["connection"]
    await claude.aclose()


async def test_abandoned_stream_leaves_the_client_usable(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    fake.script(stream_reply(Text(pieces=["a", "b", "c"])), stream_reply(Text(pieces=["again"])))

    events = model.stream(HELLO)
    assert await anext(events) == TextDelta(text="a")
    await events.aclose()

    assert (await collect(model, HELLO))[0] == TextDelta(text="again")


async def test_structured_forces_the_tool_and_returns_its_input(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    schema = {
        "type": "object",
        "properties": {"approve": {"type": "boolean"}},
        "required": ["approve"],
    }
    fake.script(
        message_reply(
            ToolUse(id="toolu_s", name="extract", input={"approve": True}), stop_reason="tool_use"
        )
    )

    data = await model.structured(
        StructuredRequest(system="Extract.", messages=[Message.user("yes, go")], schema=schema)
    )

    assert data == {"approve": True}
    [sent] = fake.requests
    assert sent.body["tool_choice"] == {"type": "tool", "name": "extract"}
    assert sent.body["tools"] == [
        {
            "name": "extract",
            "description": "Extract the requested data from the conversation.",
            "input_schema": schema,
        }
    ]
    assert "stream" not in sent.body


async def test_structured_without_the_tool_call_raises_model_error(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    fake.script(message_reply(Text(pieces=["I would rather chat."])))

    with pytest.raises(ModelError) as caught:
        await model.structured(
            StructuredRequest(system="", messages=[Message.user("x")], schema={})
        )

    assert caught.value.user_message == USER_MESSAGES["no_structured_answer"]


async def test_structured_with_a_garbled_body_raises_model_error(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    fake.script(Reply(raw_body=b'{"id": "msg_1", "content": [tru'))

    with pytest.raises(ModelError) as caught:
        await model.structured(
            StructuredRequest(system="", messages=[Message.user("x")], schema={})
        )

    assert caught.value.user_message == USER_MESSAGES["malformed"]


async def test_structured_errors_become_model_errors(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    fake.script(overloaded_reply(), overloaded_reply(), overloaded_reply())

    with pytest.raises(ModelError) as caught:
        await model.structured(
            StructuredRequest(system="", messages=[Message.user("x")], schema={})
        )

    assert caught.value.user_message == USER_MESSAGES["overloaded"]


async def test_guard_blocks_a_real_host_before_any_request() -> None:
    sent: list[httpx2.Request] = []

    def record(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(500)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(record))
    client = anthropic.AsyncAnthropic(
        api_key="k", base_url="https://api.anthropic.com", http_client=http
    )
    claude = AnthropicModel(client=client)

    with pytest.raises(RuntimeError, match="blocked"):
        await collect(claude, HELLO)
    with pytest.raises(RuntimeError, match="blocked"):
        await claude.structured(
            StructuredRequest(system="", messages=[Message.user("x")], schema={})
        )

    assert sent == []
    await client.close()


async def test_from_env_reads_key_host_and_model(
    fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    monkeypatch.setenv("BOT_MODEL", "claude-haiku-5-5")
    fake.script(stream_reply(Text(pieces=["hi"])), stream_reply(Text(pieces=["hi"])))

    from_env = AnthropicModel.from_env()
    overridden = AnthropicModel.from_env("claude-opus-5-5")
    await collect(from_env, HELLO)
    await collect(overridden, HELLO)

    assert from_env.name == "anthropic:claude-haiku-5-5"
    assert [r.body["model"] for r in fake.requests] == ["claude-haiku-5-5", "claude-opus-5-5"]
    assert fake.requests[0].headers["authorization"] == "Bearer env-key"
    await from_env.aclose()
    await overridden.aclose()


_CREDENTIAL_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CONFIG_DIR",
    "ANTHROPIC_IDENTITY_TOKEN",
    "ANTHROPIC_IDENTITY_TOKEN_FILE",
    "ANTHROPIC_FEDERATION_RULE_ID",
)


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No credential anywhere the SDK looks: env cleared, an empty home directory."""
    for name in _CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.mark.usefixtures("no_credentials")
async def test_missing_credentials_raise_model_error_at_request(fake: FakeAnthropic) -> None:
    claude = AnthropicModel(base_url=fake.base_url)

    with pytest.raises(ModelError) as caught:
        await collect(claude, HELLO)

    assert caught.value.user_message == USER_MESSAGES["no_credentials"]
    assert fake.requests == []
    await claude.aclose()


def test_broken_credential_config_raises_model_error_at_construction(
    no_credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(no_credentials / "missing"))

    with pytest.raises(ModelError) as caught:
        AnthropicModel()

    assert caught.value.user_message == USER_MESSAGES["no_credentials"]


async def test_prompt_cache_reads_and_writes_are_counted(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    reply = stream_reply(Text(pieces=["ok"]), input_tokens=12, output_tokens=2)
    assert reply.sse_chunks is not None
    start = reply.sse_chunks[0].replace(
        b'"output_tokens": 1}',
        b'"output_tokens": 1, "cache_read_input_tokens": 2048, "cache_creation_input_tokens": 96}',
    )
    assert start != reply.sse_chunks[0]
    fake.script(dataclasses.replace(reply, sse_chunks=[start, *reply.sse_chunks[1:]]))

    events = await collect(model, deploy_request(Message.user("deploy api")))

    finish = events[-1]
    assert isinstance(finish, ModelFinish)
    assert finish.usage == Usage(
        input_tokens=12, output_tokens=2, requests=1, cache_read_tokens=2048, cache_write_tokens=96
    )


def overloaded_in_stream(*head: bytes) -> Reply:
    """A 200 stream that reports an overload after ``head``."""
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    return raw_stream_reply(*head, sse("error", error))


async def test_an_overload_inside_the_stream_is_retried_when_nothing_was_said(
    fake: FakeAnthropic, model: AnthropicModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(anthropic_module, "STREAM_RETRY_FIRST", 0.01)
    fake.script(
        overloaded_in_stream(_HEAD[0]),  # message_start, then the error: nothing said yet
        stream_reply(Text(pieces=["fine now"])),
    )

    events = await collect(model, HELLO)

    assert events[0] == TextDelta(text="fine now")
    assert len(fake.requests) == 2
    assert fake.requests[0].body == fake.requests[1].body


async def test_an_overload_inside_the_stream_after_text_is_not_retried(
    fake: FakeAnthropic, model: AnthropicModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(anthropic_module, "STREAM_RETRY_FIRST", 0.01)
    fake.script(overloaded_in_stream(*_HEAD), stream_reply(Text(pieces=["again"])))
    seen: list[ModelEvent] = []

    with pytest.raises(ModelError) as caught:
        await collect_into(seen, model, HELLO)

    assert seen == [TextDelta(text="partial")]  # said once, never twice
    assert caught.value.user_message == USER_MESSAGES["overloaded"]
    assert len(fake.requests) == 1


async def test_a_persistent_overload_inside_the_stream_stops_after_the_retries(
    fake: FakeAnthropic, model: AnthropicModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(anthropic_module, "STREAM_RETRY_FIRST", 0.01)
    fake.script(*(overloaded_in_stream(_HEAD[0]) for _ in range(3)))

    with pytest.raises(ModelError) as caught:
        await collect(model, HELLO)

    assert caught.value.user_message == USER_MESSAGES["overloaded"]
    assert len(fake.requests) == 3  # the first try and max_retries=2


@pytest.mark.parametrize(
    ("message", "problem", "logged"),
    [
        ("prompt is too long: 210000 tokens > 200000 maximum", "conversation_too_long", False),
        ("tools.0.name: String should match pattern", "invalid_request", True),
    ],
)
async def test_a_400_names_its_cause(
    fake: FakeAnthropic,
    model: AnthropicModel,
    caplog: pytest.LogCaptureFixture,
    message: str,
    problem: Problem,
    logged: bool,
) -> None:
    fake.script(error_reply(400, "invalid_request_error", message))

    with pytest.raises(ModelError) as caught:
        await collect(model, HELLO)

    assert caught.value.user_message == USER_MESSAGES[problem]
    bugs = [r for r in caplog.records if r.levelname == "ERROR" and "bug" in r.getMessage()]
    assert bool(bugs) is logged
