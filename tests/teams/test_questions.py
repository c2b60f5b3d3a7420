"""A tool's question in Teams: an Adaptive Card with a form, Send, Decline and Cancel.

Driven end to end over HTTP with real RS256 channel tokens (checked by the SDK
against a local OpenID endpoint) and a real MCP server asking the questions
(``tests/mcp/tickets_server.py``: ``escalate`` asks one thing, ``schedule`` three).
Only the bot's outbound Bot Framework token is made up: it would come from Entra.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.teams import cards
from adapters.teams import texts as teams_texts
from agents import FunctionModel, MemoryStore, Message, ModelResponse, ToolCall
from agents.models.base import ModelRequest
from agents.models.demo import extract_fields
from bot import texts as core_texts
from bot.config import load_config
from bot.policy import ApprovalPolicy
from tests.mcp.conftest import ROOT, SERVER_MODULE, Calls

from . import activities as act
from .conftest import MakeBot
from .fake_connector import FakeConnector
from .signed import BOT_TOKEN, SignedBot, signed_settings, token_for

SCHEDULE = "When should the maintenance run?"
ESCALATE = "Why should the ticket be escalated?"


def desk_model() -> FunctionModel:
    """``escalate T-1`` and ``schedule T-1`` call the server's tools; results are reported."""

    def respond(messages: list[Message], request: ModelRequest) -> ModelResponse:
        last = messages[-1]
        if last.tool_results:
            summary = "; ".join(
                f"{r.tool_name} {'error' if r.is_error else 'ok'}: {r.content}"
                for r in last.tool_results
            )
            return ModelResponse(text=f"Done. {summary}")
        verb, _, ticket = last.text.partition(" ")
        if verb in ("escalate", "schedule"):
            return ModelResponse(tool_calls=[ToolCall(f"tickets__{verb}", {"ticket": ticket})])
        return ModelResponse(text=f"You said: {last.text}")

    def from_reply(messages: list[Message], schema: dict[str, Any]) -> dict[str, Any]:
        return extract_fields(messages[-1].text, schema)

    return FunctionModel(respond, structured_handler=from_reply)


def config(calls: Calls) -> str:
    return f"""
[bot]
root = "desk"

[agents.desk]
mcp = ["tickets"]
auto_resume = true

[mcp.tickets]
command = "{sys.executable}"
args = ["-m", "{SERVER_MODULE}", "stdio"]
cwd = "{ROOT}"
env = {{ MCP_TEST_CALLS = "{calls.path}" }}
"""


def card_text(card: dict[str, Any]) -> list[str]:
    return [e["text"] for e in card["body"] if e["type"] == "TextBlock"]


def inputs(card: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in card["body"] if e["type"].startswith("Input.")]


def actions(card: dict[str, Any]) -> list[tuple[str, str]]:
    return [(a["title"], a["verb"]) for a in card.get("actions", [])]


@dataclass
class Desk(SignedBot):
    """The bot with the ticket desk, and a thread per question asked in the channel."""

    calls: Calls


MakeDesk = Callable[..., Awaitable[Desk]]


@pytest.fixture
async def make_desk(
    make_bot: MakeBot,
    connector: FakeConnector,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[MakeDesk]:
    """Start the desk bot (with a policy, when given) behind real Bot Framework auth."""

    async with token_for(connector, monkeypatch) as token, AsyncExitStack() as started:

        async def make(policy: str | None = None) -> Desk:
            calls = Calls(tmp_path / "calls.jsonl")
            path = tmp_path / "bot.toml"
            path.write_text(config(calls))
            loaded = await load_config(path, desk_model(), MemoryStore())
            started.push_async_callback(loaded.aclose)
            teams = await make_bot(
                agent=loaded.agent,
                policy=ApprovalPolicy.from_toml(policy) if policy is not None else None,
                settings=signed_settings(),
            )
            started.push_async_callback(teams.close)  # before its MCP server goes
            return Desk(teams=teams, connector=connector, token=token, calls=calls)

        yield make


async def test_a_question_asks_with_a_form_unless_it_asks_for_one_free_text(
    make_desk: MakeDesk, connector: FakeConnector
) -> None:
    desk = await make_desk()

    schedule = await desk.ask("schedule T-1")
    assert card_text(schedule.card) == [
        "💬 **schedule (MCP server tickets)** asks:",
        SCHEDULE,
        core_texts.QUESTION_FORM_HINT,
    ]
    assert [(i["type"], i["id"], i["label"]) for i in inputs(schedule.card)] == [
        ("Input.ChoiceSet", "field:day", "Day"),
        ("Input.Number", "field:hour", "Hour (UTC)"),
        ("Input.Toggle", "field:notify", "Tell the customer"),
    ]
    day, hour, notify = inputs(schedule.card)
    assert [c["value"] for c in day["choices"]] == ["saturday", "sunday"]
    assert day["isRequired"]
    assert hour["isRequired"]
    assert "isRequired" not in notify
    assert (notify["valueOn"], notify["valueOff"]) == ("true", "false")
    assert actions(schedule.card) == [
        ("Send", "answer"),
        ("Decline", "decline"),
        ("Cancel", "cancel"),
    ]

    escalate = await desk.ask("escalate T-1")
    assert card_text(escalate.card)[:2] == ["💬 **escalate (MCP server tickets)** asks:", ESCALATE]
    assert inputs(escalate.card) == []
    assert card_text(escalate.card)[-1] == "Reply in this thread to answer (**reason**)."
    assert actions(escalate.card) == [("Decline", "decline"), ("Cancel", "cancel")]

    assert desk.calls() == []  # nothing ran: both wait for a person
    assert {c.authorization for c in connector.calls} == {f"Bearer {BOT_TOKEN}"}
    unsigned = act.channel_post(connector.url, "schedule T-2", mention=True)
    assert (await desk.teams.post(unsigned)).status == 401


async def test_send_runs_the_tool_once_with_typed_values_and_the_card_says_who_answered(
    make_desk: MakeDesk,
) -> None:
    desk = await make_desk()
    question = await desk.ask("schedule T-1")

    answer = await question.press("answer", values={"day": "sunday", "hour": "4", "notify": "true"})

    assert answer.body["type"] == cards.CONTENT_TYPE
    answered = answer.body["value"]
    assert "✅ Answered by Bob" in card_text(answered)
    assert "actions" not in answered
    assert inputs(answered) == []
    assert [card_text(c)[-1] for c in question.updates()] == ["✅ Answered by Bob"]
    assert desk.calls() == [{"tool": "schedule", "args": {"ticket": "T-1"}}]
    assert "T-1 scheduled: sunday 04:00 UTC, customer told" in question.texts()[-1]


@pytest.mark.parametrize("hour", ["30", "soon"])
async def test_an_answer_that_does_not_fit_is_told_to_the_clicker_and_the_question_waits(
    make_desk: MakeDesk, hour: str
) -> None:
    desk = await make_desk()
    question = await desk.ask("schedule T-1")

    refused = await question.press("answer", values={"day": "saturday", "hour": hour})

    assert refused.body["type"] == "application/vnd.microsoft.activity.message"
    said = refused.body["value"]
    assert said.startswith("That answer does not fit: ")
    assert "hour" in said
    assert said.endswith("Please correct it and send it again.")
    assert question.updates() == []
    assert desk.calls() == []

    fixed = await question.press("answer", values={"day": "saturday", "hour": "23"})
    assert "✅ Answered by Bob" in card_text(fixed.body["value"])
    assert "T-1 scheduled: saturday 23:00 UTC" in question.texts()[-1]
    assert len(desk.calls()) == 1


@pytest.mark.parametrize(
    ("request_text", "verb", "title", "result"),
    [
        ("schedule T-1", "decline", "❌ Declined by Bob", "not scheduled (decline)"),
        ("schedule T-1", "cancel", "🚫 Cancelled by Bob", "not scheduled (cancel)"),
        ("escalate T-1", "decline", "❌ Declined by Bob", "not escalated (decline)"),
        ("escalate T-1", "cancel", "🚫 Cancelled by Bob", "not escalated (cancel)"),
    ],
)
async def test_decline_and_cancel_are_heard_by_the_server_and_the_card_says_who(
    make_desk: MakeDesk, request_text: str, verb: str, title: str, result: str
) -> None:
    desk = await make_desk()
    question = await desk.ask(request_text)

    # No values: the form's required inputs do not hold up a Decline or Cancel.
    answer = await question.press(verb)

    assert title in card_text(answer.body["value"])
    assert "actions" not in answer.body["value"]
    assert [card_text(c)[-1] for c in question.updates()] == [title]
    assert result in question.texts()[-1]
    assert [c["tool"] for c in desk.calls()] == [request_text.split()[0]]


async def test_the_submit_fallback_answers_the_form_and_updates_the_card_for_everyone(
    make_desk: MakeDesk,
) -> None:
    desk = await make_desk()
    question = await desk.ask("schedule T-2")

    await question.submit("answer", values={"day": "saturday", "hour": "7", "notify": "false"})

    assert [card_text(c)[-1] for c in question.updates()] == ["✅ Answered by Bob"]
    assert "T-2 scheduled: saturday 07:00 UTC" in question.texts()[-1]
    assert "customer told" not in question.texts()[-1]
    assert desk.calls() == [{"tool": "schedule", "args": {"ticket": "T-2"}}]


async def test_a_reply_in_the_thread_answers_a_single_question_and_its_card_says_so(
    make_desk: MakeDesk, connector: FakeConnector
) -> None:
    desk = await make_desk()
    question = await desk.ask("escalate T-1")

    await desk.post(
        act.channel_post(connector.url, "the whole floor is offline", root=question.root)
    )
    await desk.teams.bot.drain()

    assert "T-1 escalated: the whole floor is offline" in question.texts()[-1]
    (answered,) = question.updates()
    assert "✅ Answered by Alice" in card_text(answered)
    assert "actions" not in answered


async def test_someone_the_policy_does_not_allow_is_refused_and_nothing_changes(
    make_desk: MakeDesk,
) -> None:
    desk = await make_desk('[tools.tickets__schedule]\napprovers = ["aad-carol"]\n')
    question = await desk.ask("schedule T-1")
    posted_before = len(desk.connector.messages())
    not_allowed = {
        "statusCode": 200,
        "type": "application/vnd.microsoft.activity.message",
        "value": core_texts.POLICY_NOT_APPROVER.format(tool="tickets__schedule"),
    }

    sent = await question.press("answer", values={"day": "sunday", "hour": "4"})
    declined = await question.press("decline")

    assert sent.body == not_allowed
    assert declined.body == not_allowed
    assert question.updates() == []
    assert desk.calls() == []
    assert len(desk.connector.messages()) == posted_before

    allowed = await question.press("answer", user=act.CAROL, values={"day": "sunday", "hour": "4"})
    assert "✅ Answered by Carol" in card_text(allowed.body["value"])
    assert "T-1 scheduled: sunday 04:00 UTC" in question.texts()[-1]


@pytest.mark.parametrize("value", [{"nested": 1}, [4], {"hour": "4"}])
async def test_form_values_that_are_not_plain_are_not_supported_and_change_nothing(
    make_desk: MakeDesk, value: Any
) -> None:
    desk = await make_desk()
    question = await desk.ask("schedule T-1")
    values = {"day": "sunday", "hour": value}

    pressed = await question.press("answer", values=values)
    submitted = await question.submit("answer", values=values)

    assert pressed.body == {
        "statusCode": 200,
        "type": "application/vnd.microsoft.activity.message",
        "value": teams_texts.ACTION_NOT_SUPPORTED,
    }
    assert submitted.body is None  # a message activity: the answer is a reply
    assert question.texts()[-1] == teams_texts.ACTION_NOT_SUPPORTED
    assert question.updates() == []
    assert desk.calls() == []
