"""An MCP server's tools through Slack: the example config's ticket desk, the demo model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.wire import APPROVE_ACTION, DECLINE_ACTION
from agents import Agent, Store
from agents.models.demo import DemoModel
from bot.config import load_config
from tests.examples.conftest import EXAMPLE_CONFIG

from .conftest import StartBot
from .fake_slack import FakeSlack, Posted
from .harness import BOB, CHANNEL, BotServer, mention_event, message_event, view_submission
from .test_approvals import card_text, has_buttons


def status(tickets: Path, ticket: str) -> str:
    """A ticket's status, read from the server's own file."""
    return str(json.loads(tickets.read_text())[ticket]["status"])


@pytest.fixture
async def desk(
    serve: StartBot, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[BotServer, Path]]:
    tickets = tmp_path / "tickets.json"
    monkeypatch.setenv("OPS_DB_PATH", str(tmp_path / "ops.db"))
    monkeypatch.setenv("TICKETS_DB", str(tickets))
    loaded = await load_config(EXAMPLE_CONFIG, DemoModel(), store)
    agent: Agent = loaded.agent
    try:
        yield await serve(agent), tickets
    finally:
        await loaded.aclose()


async def card_for(bot: BotServer, slack: FakeSlack, text: str) -> tuple[dict[str, Any], Posted]:
    """Mention the bot with ``text``; the thread's root event and the card it posts."""
    root = mention_event(text)
    await bot.send_event(root)
    await slack.wait_for(lambda: any(has_buttons(m) for m in slack.messages.values()))
    return root, next(m for m in slack.messages.values() if has_buttons(m))


def answers(slack: FakeSlack, root: str) -> str:
    return "\n".join(m.text for m in slack.in_thread(CHANNEL, root))


async def test_a_read_only_mcp_tool_answers_without_a_card(
    desk: tuple[BotServer, Path], slack: FakeSlack
) -> None:
    bot, _ = desk
    root = mention_event("show ticket T-100")
    await bot.send_event(root)
    await bot.idle()
    assert "Printer on floor 3 is on fire" in answers(slack, root["ts"])
    assert not any(has_buttons(m) for m in slack.messages.values())


async def test_an_mcp_tool_that_changes_data_runs_once_its_card_is_approved(
    desk: tuple[BotServer, Path], slack: FakeSlack
) -> None:
    bot, tickets = desk
    root, card = await card_for(bot, slack, "close ticket T-101")
    assert "`close_ticket (MCP server tickets)`" in card_text(card)
    assert "ops › tickets" in card_text(card)
    assert "T-101" in card_text(card)
    assert status(tickets, "T-101") == "open"  # nothing ran before the approval

    await bot.press(card, APPROVE_ACTION, user=BOB)
    await bot.idle()
    assert f"Approved by <@{BOB}>" in card_text(card)
    assert status(tickets, "T-101") == "closed"
    assert "Closed T-101" in answers(slack, root["ts"])


async def test_a_declined_mcp_call_never_reaches_the_server(
    desk: tuple[BotServer, Path], slack: FakeSlack
) -> None:
    bot, tickets = desk
    _, card = await card_for(bot, slack, "close ticket T-100")
    await bot.press(card, DECLINE_ACTION, user=BOB)
    await slack.wait_for(lambda: bool(slack.of("views.open")))
    view = slack.of("views.open")[0].args["view"]
    await bot.interact(view_submission(view, user=BOB, reason="still burning"))
    await bot.idle()
    assert "Declined by" in card_text(card)
    assert status(tickets, "T-100") == "open"


async def test_an_mcp_servers_question_is_asked_in_the_thread_after_the_approval(
    desk: tuple[BotServer, Path], slack: FakeSlack
) -> None:
    bot, tickets = desk
    root, card = await card_for(bot, slack, "reopen ticket T-102")
    assert "`reopen_ticket (MCP server tickets)`" in card_text(card)
    await bot.press(card, APPROVE_ACTION, user=BOB)
    await bot.idle()
    assert "Why should the ticket be reopened?" in answers(slack, root["ts"])
    assert status(tickets, "T-102") == "closed"  # the call waits for the answer

    await bot.send_event(message_event("the laptop died again", thread_ts=root["ts"]))
    await bot.idle()
    assert status(tickets, "T-102") == "open"
    assert json.loads(tickets.read_text())["T-102"]["reopened_because"] == ("the laptop died again")
    assert "Reopened T-102" in answers(slack, root["ts"])
