"""Questions of the team's other agents: ``POST /v1/questions`` and MCP ``ask``, asked
in a thread of the client's channel, answered by a reply there or with the form."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from adapters.slack.wire import ANSWER_ACTION
from agents import Store
from bot import ApprovalPolicy

from .conftest import StartBot
from .fake_slack import FakeSlack, Posted
from .harness import ALICE, BOB, BotServer, message_event
from .scripted import Ran, build_agent
from .test_client_api import CI_CHANNEL, CLIENTS, TOKEN
from .test_client_mcp import mcp_client, structured
from .test_questions import submission


@pytest.fixture
async def bot(serve: StartBot, store: Store, ran: Ran, slack: FakeSlack) -> BotServer:
    slack.add_channel(CI_CHANNEL, name="deploys")
    return await serve(build_agent(store, ran), policy=ApprovalPolicy(), clients=CLIENTS)


async def post_question(
    bot: BotServer, body: dict[str, Any], *, wait: float = 0, key: str = "q1"
) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": key}
    url = bot.server.make_url(f"/v1/questions?wait={wait}")
    async with bot.session.post(url, data=json.dumps(body), headers=headers) as response:
        return response.status, await response.json()


async def get_question(bot: BotServer, question: str, wait: float = 0) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    url = bot.server.make_url(f"/v1/questions/{question}?wait={wait}")
    async with bot.session.get(url, headers=headers) as response:
        assert response.status == 200
        found: dict[str, Any] = await response.json()
        return found


async def the_question(slack: FakeSlack) -> Posted:
    def asked() -> list[Posted]:
        return [
            m
            for m in slack.messages.values()
            if m.thread_ts and any(b.get("type") == "actions" for b in m.blocks)
        ]

    await slack.wait_for(lambda: bool(asked()), what="the question")
    (question,) = asked()
    return question


async def test_a_reply_in_the_thread_answers_the_question(bot: BotServer, slack: FakeSlack) -> None:
    status, asked = await post_question(bot, {"question": "Which region?"})
    assert (status, asked["status"]) == (201, "pending")
    question = await the_question(slack)
    assert "Which region?" in question.text or any(
        "Which region?" in json.dumps(b) for b in question.blocks
    )
    (header,) = slack.top_level(CI_CHANNEL)
    assert header.text.startswith("ci asks:")
    reply = message_event("eu-west-1", user=ALICE, channel=CI_CHANNEL, thread_ts=header.ts)
    assert await bot.send_event(reply) == 200
    answered = await get_question(bot, asked["id"], wait=10)
    assert answered["status"] == "answered"
    assert answered["answer"] == {"answer": "eu-west-1"}
    assert answered["answered_by"] == ALICE


async def test_a_form_answers_a_question_with_a_schema_and_the_post_waits_for_it(
    bot: BotServer, slack: FakeSlack
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "enum": ["eu", "us"]},
            "replicas": {"type": "integer"},
        },
        "required": ["region", "replicas"],
    }
    asking = asyncio.create_task(
        post_question(bot, {"question": "Where, how many?", "schema": schema}, wait=20)
    )
    question = await the_question(slack)
    assert await bot.press(question, ANSWER_ACTION, user=BOB) == 200
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    view = slack.of("views.open")[0].args["view"]
    status, _ = await bot.interact(submission(view, {"region": "us", "replicas": "3"}, user=BOB))
    assert status == 200
    status, answered = await asyncio.wait_for(asking, 15)
    assert (status, answered["status"]) == (201, "answered")
    assert answered["answer"] == {"region": "us", "replicas": 3}


async def test_a_schema_no_form_can_ask_is_refused(bot: BotServer, slack: FakeSlack) -> None:
    for schema in (
        {"type": "array"},
        {"type": "object", "properties": {"tags": {"type": "array"}}},
        {"type": "object", "properties": {"x": {"type": "nonsense"}}},
        {"type": "object", "properties": {"anything": True}},
    ):
        status, body = await post_question(bot, {"question": "?", "schema": schema}, key="bad")
        assert (status, body["field"]) == (400, "schema"), schema
    assert slack.messages == {}


async def test_mcp_ask_waits_for_the_answer(bot: BotServer, slack: FakeSlack) -> None:
    async with mcp_client(bot) as client:
        asking = asyncio.create_task(client.call_tool("ask", {"question": "Ship it today?"}))
        await the_question(slack)
        (header,) = slack.top_level(CI_CHANNEL)
        reply = message_event("yes, after 3pm", user=BOB, channel=CI_CHANNEL, thread_ts=header.ts)
        assert await bot.send_event(reply) == 200
        answered = structured(await asyncio.wait_for(asking, 15))
    assert (answered["status"], answered["answer"]) == ("answered", {"answer": "yes, after 3pm"})
