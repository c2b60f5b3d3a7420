"""The approval service as an MCP server: the ``mcp`` SDK's client over streamable HTTP
against the bot's ``/mcp``, decided by Slack clicks at the HTTP edge."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import TextContent

from adapters.slack.wire import APPROVE_ACTION, DECLINE_ACTION, EDIT_ACTION
from agents import Store
from bot import ApprovalPolicy
from bot import mcp_server as mcp_module

from .conftest import StartBot
from .fake_slack import FakeSlack
from .harness import ALICE, BOB, BotServer, view_submission
from .scripted import Ran, build_agent
from .test_approvals import card_text
from .test_client_api import CI_CHANNEL, CLIENTS, TOKEN, the_card
from .test_edit import prefilled
from .test_questions import submission

BASH = {"command": "rm -rf build", "description": "clean"}


@asynccontextmanager
async def mcp_client(bot: BotServer, token: str | None = TOKEN) -> AsyncIterator[Client]:
    """The SDK's client, connected to the bot's ``/mcp`` with ``token``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30)) as http:
        url = str(bot.server.make_url("/mcp"))
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


def text_of(result: Any) -> str:
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    data = result.structured_content
    assert isinstance(data, dict)
    return data


@pytest.fixture
async def bot(serve: StartBot, store: Store, ran: Ran, slack: FakeSlack) -> BotServer:
    slack.add_channel(CI_CHANNEL, name="deploys")
    policy = ApprovalPolicy.from_toml('[tools.ci__Bash]\napprovers = ["U0BOB0001"]\n')
    return await serve(build_agent(store, ran), policy=policy, clients=CLIENTS)


async def test_request_approval_waits_with_progress_until_a_click_decides(
    bot: BotServer, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_module, "PROGRESS_EVERY", 0.1)
    notes: list[float] = []

    async def noted(progress: float, total: float | None, message: str | None) -> None:
        notes.append(progress)

    async with mcp_client(bot) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools >= {"request_approval", "get_decision", "notify", "approval_prompt"}
        asking = asyncio.create_task(
            client.call_tool(
                "request_approval",
                {"tool": "deploy", "args": {"service": "api"}, "summary": "Ship it"},
                progress_callback=noted,
            )
        )
        card = await the_card(slack)
        await asyncio.sleep(1.5)  # more than a poll (``POLL``) after the card: noted
        assert not asking.done()
        assert await bot.press(card, APPROVE_ACTION, user=ALICE) == 200
        decided = structured(await asyncio.wait_for(asking, 10))
    assert (decided["status"], decided["decided_by"]) == ("approved", ALICE)
    assert decided["args"] == {"service": "api"}
    assert notes, "progress notifications while it waited"


async def test_a_request_not_decided_in_time_is_pending_then_get_decision_reads_it(
    bot: BotServer, slack: FakeSlack
) -> None:
    async with mcp_client(bot) as client:
        pending = structured(
            await client.call_tool(
                "request_approval",
                {"tool": "deploy", "args": {"service": "api"}, "wait_seconds": 0.3},
            )
        )
        assert pending["status"] == "pending"
        card = await the_card(slack)
        waiting = asyncio.create_task(
            client.call_tool("get_decision", {"id": pending["id"], "wait_seconds": 20})
        )
        await asyncio.sleep(0.2)
        assert await bot.press(card, APPROVE_ACTION, user=BOB) == 200
        decided = structured(await asyncio.wait_for(waiting, 10))
        assert (decided["id"], decided["status"]) == (pending["id"], "approved")
        unknown = await client.call_tool("get_decision", {"id": "appr_nope"})
        assert unknown.is_error


async def test_approval_prompt_allows_with_the_edited_input(
    bot: BotServer, slack: FakeSlack
) -> None:
    async with mcp_client(bot) as client:
        asking = asyncio.create_task(
            client.call_tool(
                "approval_prompt",
                {"tool_name": "Bash", "input": BASH, "tool_use_id": "toolu_01"},
            )
        )
        card = await the_card(slack)
        assert "Bash (run by ci)" in card_text(card)
        assert await bot.press(card, EDIT_ACTION, user=BOB) == 200
        await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
        view = slack.of("views.open")[0].args["view"]
        assert prefilled(view) == BASH
        edited = submission(view, {**prefilled(view), "command": "rm -rf build/tmp"}, user=BOB)
        status, _ = await bot.interact(edited)
        assert status == 200
        answer = json.loads(text_of(await asyncio.wait_for(asking, 10)))
    assert answer == {
        "behavior": "allow",
        "updatedInput": {"command": "rm -rf build/tmp", "description": "clean"},
    }


async def test_approval_prompt_denies_saying_who_and_why(bot: BotServer, slack: FakeSlack) -> None:
    async with mcp_client(bot) as client:
        asking = asyncio.create_task(
            client.call_tool("approval_prompt", {"tool_name": "Bash", "input": BASH})
        )
        card = await the_card(slack)
        assert await bot.press(card, DECLINE_ACTION, user=BOB) == 200
        await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
        opened = slack.of("views.open")[0].args["view"]
        status, _ = await bot.interact(view_submission(opened, user=BOB, reason="not in CI"))
        assert status == 200
        answer = json.loads(text_of(await asyncio.wait_for(asking, 10)))
    assert answer == {"behavior": "deny", "message": f"Declined by {BOB}: not in CI"}


async def test_approval_prompt_denies_a_tool_the_client_may_not_ask_about(
    bot: BotServer, slack: FakeSlack
) -> None:
    async with mcp_client(bot) as client:
        result = await client.call_tool(
            "approval_prompt", {"tool_name": "WebFetch", "input": {"url": "https://x"}}
        )
    answer = json.loads(text_of(result))
    assert answer["behavior"] == "deny"
    assert "may not ask about WebFetch" in answer["message"]
    assert [m for m in slack.messages.values() if m.channel == CI_CHANNEL] == []


async def test_notify_says_it_in_the_clients_channel(bot: BotServer, slack: FakeSlack) -> None:
    async with mcp_client(bot) as client:
        result = await client.call_tool("notify", {"text": "Deploy of v2 finished"})
    assert not result.is_error
    (said,) = slack.top_level(CI_CHANNEL)
    assert said.text == "ci: Deploy of v2 finished"


async def test_mcp_without_a_clients_token_is_refused(bot: BotServer) -> None:
    async with bot.session.post(
        bot.server.make_url("/mcp"),
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    ) as response:
        assert response.status == 401
    with pytest.raises(ExceptionGroup) as raised:  # the SDK's task groups wrap its error
        async with mcp_client(bot, token="wrong-token-0123456789") as client:
            await client.list_tools()
    assert raised.group_contains(MCPError, depth=2)
