"""The demo model on its own: requests it understands, routing, answers, extraction."""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
from pydantic import BaseModel

from agents import Message, Model, ToolCallPart, ToolResultPart
from agents.models.base import (
    ModelEvent,
    ModelFinish,
    ModelRequest,
    StructuredRequest,
    TextDelta,
    ToolCallEvent,
    ToolSpec,
)
from agents.models.demo import DemoModel, extract_fields

OWN_TOOLS = [
    ToolSpec(name=name, description="", input_schema={})
    for name in ("find_user", "delete_record", "deploy_service", "refund")
]


async def respond(messages: list[Message], tools: list[ToolSpec] | None = None) -> list[ModelEvent]:
    request = ModelRequest(
        system="", messages=messages, tools=OWN_TOOLS if tools is None else tools
    )
    return [event async for event in DemoModel().stream(request)]


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def calls_of(events: list[ModelEvent]) -> list[ToolCallPart]:
    return [e.call for e in events if isinstance(e, ToolCallEvent)]


def test_it_is_a_model() -> None:
    assert isinstance(DemoModel(), Model)
    assert DemoModel().name == "demo"


@pytest.mark.parametrize(
    ("text", "tool", "args"),
    [
        ("find user 12345", "find_user", {"user_id": "12345"}),
        ("Find user with ID 42", "find_user", {"user_id": "42"}),
        ("delete record abc-123", "delete_record", {"record_id": "abc-123"}),
        (
            "deploy api 1.4.2 to staging",
            "deploy_service",
            {"service": "api", "environment": "staging", "version": "1.4.2"},
        ),
        ("deploy web to staging", "deploy_service", {"service": "web", "environment": "staging"}),
        ("refund order A-1001 50", "refund", {"order_id": "A-1001", "amount": 50.0}),
        ("please refund order A-1003 $12.50", "refund", {"order_id": "A-1003", "amount": 12.5}),
    ],
)
async def test_a_request_becomes_a_call_of_its_tool(
    text: str, tool: str, args: dict[str, Any]
) -> None:
    events = await respond([Message.user(text)])
    assert [(c.tool_name, c.args) for c in calls_of(events)] == [(tool, args)]
    finish = events[-1]
    assert isinstance(finish, ModelFinish)
    assert finish.stop_reason == "tool_use"


async def test_call_ids_never_repeat() -> None:
    first = calls_of(await respond([Message.user("find user 1")]))
    second = calls_of(await respond([Message.user("find user 1")]))
    assert first[0].tool_call_id != second[0].tool_call_id


async def test_a_supervisor_delegates_the_text_to_the_agent_whose_description_fits() -> None:
    tools = [
        ToolSpec(name="agent-people", description="Looks up users.", input_schema={}),
        ToolSpec(name="agent-money", description="Handles refunds of orders.", input_schema={}),
    ]
    events = await respond([Message.user("refund order A-1 5")], tools)
    assert [(c.tool_name, c.args) for c in calls_of(events)] == [
        ("agent-money", {"task": "refund order A-1 5"})
    ]


async def test_a_description_naming_the_tool_wins_over_topic_words() -> None:
    tools = [
        ToolSpec(name="agent-a", description="Users, users and more users.", input_schema={}),
        ToolSpec(name="agent-b", description="Has find_user.", input_schema={}),
    ]
    events = await respond([Message.user("find user 7")], tools)
    assert calls_of(events)[0].tool_name == "agent-b"


async def test_without_a_fitting_tool_it_says_so() -> None:
    events = await respond([Message.user("delete record x-1")], tools=[])
    assert calls_of(events) == []
    assert "no tool or agent" in text_of(events)
    assert "delete record x-1" in text_of(events)


async def test_text_streams_word_by_word() -> None:
    events = await respond([Message.user("help")])
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 10
    assert all(len(d.text.split()) <= 1 for d in deltas)


def after_call(call: ToolCallPart, content: str, *, is_error: bool = False) -> list[Message]:
    return [
        Message.user("x"),
        Message(role="assistant", parts=[call]),
        Message(
            role="user",
            parts=[
                ToolResultPart(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    content=content,
                    is_error=is_error,
                )
            ],
        ),
    ]


async def test_it_answers_from_the_result_it_got() -> None:
    call = ToolCallPart(tool_call_id="c1", tool_name="find_user", args={"user_id": "9"})
    content = json.dumps({"id": "9", "name": "Zed", "records": ["r-1", "r-2"], "note": None})
    text = text_of(await respond(after_call(call, content)))
    assert text == "User 9: name: Zed; records: r-1, r-2."


async def test_errors_and_declines_are_reported_as_such() -> None:
    call = ToolCallPart(tool_call_id="c1", tool_name="delete_record", args={"record_id": "r-1"})
    declined = after_call(call, "Tool call was not approved by the user", is_error=True)
    assert text_of(await respond(declined)) == (
        "I could not delete record r-1. Tool call was not approved by the user."
    )


async def test_a_sub_agents_answer_is_relayed_as_it_is() -> None:
    call = ToolCallPart(tool_call_id="d1", tool_name="agent-records", args={"task": "t"})
    assert text_of(await respond(after_call(call, "User 9: name: Zed."))) == "User 9: name: Zed."


async def test_an_unknown_tools_result_is_shown_plainly() -> None:
    call = ToolCallPart(tool_call_id="c1", tool_name="weather", args={})
    text = text_of(await respond(after_call(call, '{"city": "Oslo", "sky": "clear"}')))
    assert text == "weather returned: city: Oslo; sky: clear."


async def test_structured_reads_only_the_reply_after_the_auto_resume_prompt() -> None:
    request = StructuredRequest(
        system="",
        messages=[Message.user('The tool asked: {"message": "Which?"}\nThe user replied: 2.0.1')],
        schema={"properties": {"version": {"type": "string"}}},
    )
    assert await DemoModel().structured(request) == {"version": "2.0.1"}


BOOKING = {
    "properties": {
        "date": {"type": "string"},
        "seats": {"type": "integer"},
        "terrace": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
        "size": {"enum": ["small", "large"]},
    }
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("date: 2026-12-24, seats: 4", {"date": "2026-12-24", "seats": 4}),
        ("4 seats on Friday", {"date": "4 seats on Friday", "seats": 4}),
        (
            "Friday, terrace yes, large",
            {"date": "Friday, terrace yes, large", "terrace": True, "size": "large"},
        ),
        # Two numbers and no label: no guess, so validation can ask again.
        ("24 December, 2 people", {"date": "24 December, 2 people"}),
    ],
)
def test_extract_fields_by_simple_rules(text: str, expected: dict[str, Any]) -> None:
    assert extract_fields(text, BOOKING) == expected


def test_two_text_fields_without_labels_are_left_out() -> None:
    schema = {"properties": {"city": {"type": "string"}, "country": {"type": "string"}}}
    assert extract_fields("Lisbon, Portugal", schema) == {}
    assert extract_fields("city: Lisbon; country: Portugal", schema) == {
        "city": "Lisbon",
        "country": "Portugal",
    }


def test_pydantic_schemas_with_optional_and_enum_fields_are_understood() -> None:
    class Size(enum.Enum):
        SMALL = "small"
        LARGE = "large"

    class Order(BaseModel):
        size: Size | None = None
        quantity: int

    schema = Order.model_json_schema()
    assert extract_fields("a large one, quantity 3", schema) == {"size": "large", "quantity": 3}


async def test_a_note_of_what_the_person_looks_at_is_not_part_of_the_request() -> None:
    noted = "[The person is looking at the channel <#C0OPS>.]\n\n"
    assert text_of(await respond([Message.user(noted + "help")])).startswith(
        text_of(await respond([Message.user("help")]))
    )
    events = await respond([Message.user(noted + "nonsense")])
    assert "looking at" not in text_of(events)
