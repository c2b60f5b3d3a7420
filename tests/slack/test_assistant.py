"""Slack's assistant view (apps created before agent messaging, ``test_agent_view``):
suggested prompts when a thread starts, its title from the first request (on whichever
replica it reaches), loading messages under the status while the bot works."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.assistant import PROMPTS_LIMIT, TITLE_LIMIT, title_of
from adapters.slack.texts import LOADING_MESSAGES
from agents import Store
from bot import SuggestedPrompt
from tests.stores.conftest import DURABLE_KINDS, store_url

from .conftest import StartBot
from .fake_slack import FakeSlack
from .harness import (
    DM_CHANNEL,
    BotServer,
    assistant_started_event,
    event_body,
    message_event,
    new_ts,
    replicas_on,
)
from .scripted import Ran, build_agent

PROMPTS = (
    SuggestedPrompt(title="Deploy api", message="deploy api"),
    SuggestedPrompt(title="Say hello", message="hello"),
)


def in_thread(text: str, root: str) -> dict[str, Any]:
    """``message.im``: a request in the assistant thread ``root``."""
    return message_event(text, channel=DM_CHANNEL, channel_type="im", thread_ts=root)


async def test_a_started_assistant_thread_gets_the_prompts(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await serve(build_agent(store, ran), prompts=PROMPTS)
    root = new_ts()
    assert await bot.send_event(assistant_started_event(root)) == 200
    await bot.idle()
    assert slack.prompts[(DM_CHANNEL, root)] == [
        {"title": "Deploy api", "message": "deploy api"},
        {"title": "Say hello", "message": "hello"},
    ]
    (call,) = slack.of("assistant.threads.setSuggestedPrompts")
    assert call.args["channel_id"] == DM_CHANNEL
    assert call.args["thread_ts"] == root


async def test_no_prompts_configured_means_no_call(bot: BotServer, slack: FakeSlack) -> None:
    assert await bot.send_event(assistant_started_event(new_ts())) == 200
    await bot.idle()
    assert slack.of("assistant.threads.setSuggestedPrompts") == []
    assert slack.prompts == {}


async def test_more_prompts_than_slack_shows_are_cut_to_its_limit(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    many = tuple(SuggestedPrompt(title=f"Ask {i}", message=f"ask {i}") for i in range(6))
    bot = await serve(build_agent(store, ran), prompts=many)
    root = new_ts()
    await bot.send_event(assistant_started_event(root))
    await bot.idle()
    assert [p["title"] for p in slack.prompts[(DM_CHANNEL, root)]] == [
        f"Ask {i}" for i in range(PROMPTS_LIMIT)
    ]


async def test_a_retried_start_is_acked_and_so_is_a_malformed_one(
    bot: BotServer, slack: FakeSlack
) -> None:
    root = new_ts()
    event = assistant_started_event(root)
    assert await bot.send_event(event, event_id="EvSTART1") == 200
    assert await bot.send_event(event, event_id="EvSTART1", retry=1) == 200
    broken = {"type": "assistant_thread_started", "event_ts": "1.0"}
    status, _ = await bot.post(json.dumps(event_body(broken)))
    assert status == 200, "Slack would only send it again (test_hostile)"


async def test_the_first_request_in_an_assistant_thread_sets_its_title(
    bot: BotServer, slack: FakeSlack
) -> None:
    root = new_ts()
    await bot.send_event(assistant_started_event(root))
    await bot.idle()
    await bot.send_event(in_thread("hello there\nand some more lines", root))
    await bot.idle()
    await bot.send_event(in_thread("a second request", root))
    await bot.idle()
    assert slack.titles == {(DM_CHANNEL, root): "hello there"}
    assert len(slack.of("assistant.threads.setTitle")) == 1


async def test_a_dm_thread_the_assistant_view_did_not_start_gets_no_title(
    bot: BotServer, slack: FakeSlack
) -> None:
    # A reply in a thread: only a message that starts its thread (agent messaging's)
    # or the first in a started assistant thread titles it.
    await bot.send_event(in_thread("hello", new_ts()))
    await bot.idle()
    assert slack.of("assistant.threads.setTitle") == []


def test_a_long_request_makes_a_short_one_line_title() -> None:
    title = title_of("  deploy   " + "the api service " * 20 + "\nsecond line")
    assert len(title) <= TITLE_LIMIT
    assert title.startswith("deploy the api service")
    assert title.endswith("…")
    assert "\n" not in title
    assert title_of(" \n\t") == ""


async def test_the_status_while_working_carries_loading_messages(
    bot: BotServer, slack: FakeSlack
) -> None:
    root = new_ts()
    await bot.send_event(assistant_started_event(root))
    await bot.send_event(in_thread("hello", root))
    await bot.idle()
    statuses = [c.args for c in slack.of("assistant.threads.setStatus")]
    assert statuses, "a status while the agent works"
    working = statuses[0]
    assert (working["channel_id"], working["thread_ts"]) == (DM_CHANNEL, root)
    assert working["status"]
    assert working["loading_messages"] == list(LOADING_MESSAGES)
    cleared = [s for s in statuses if not s["status"]]
    assert all("loading_messages" not in s for s in cleared)


@pytest.fixture(params=DURABLE_KINDS)
async def replicas(
    request: pytest.FixtureRequest, slack: FakeSlack, tmp_path: Path
) -> AsyncIterator[list[BotServer]]:
    """Three replicas, each with its own handle on one durable store."""
    async with (
        store_url(request.param, tmp_path) as url,
        replicas_on(slack, url, build_agent, count=3) as bots,
    ):
        yield bots


async def test_a_thread_started_on_one_replica_is_titled_by_the_one_its_first_request_reaches(
    replicas: list[BotServer], slack: FakeSlack
) -> None:
    a, b, c = replicas
    root = new_ts()
    assert await a.send_event(assistant_started_event(root)) == 200
    await a.idle()
    await a.close()  # whatever titles the thread, replica A plays no part in it

    assert await b.send_event(in_thread("hello there", root)) == 200
    await b.idle()
    assert slack.titles == {(DM_CHANNEL, root): "hello there"}, "titled by B"

    assert await c.send_event(in_thread("a second request", root)) == 200
    await c.idle()
    assert await b.send_event(in_thread("a third request", root)) == 200
    await b.idle()
    assert slack.titles == {(DM_CHANNEL, root): "hello there"}
    assert len(slack.of("assistant.threads.setTitle")) == 1, "titled once, on any replica"


async def test_a_store_failure_reading_the_thread_is_logged_and_the_request_still_answered(
    replicas: list[BotServer],
    slack: FakeSlack,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, b, _ = replicas
    root = new_ts()
    await a.send_event(assistant_started_event(root))
    await a.idle()

    async def store_down(key: str) -> str | None:
        raise ConnectionError("the store is down")

    monkeypatch.setattr(b.bot.chat, "note", store_down)
    with caplog.at_level(logging.WARNING, logger="adapters.slack.assistant"):
        assert await b.send_event(in_thread("hello there", root)) == 200
        await b.idle()

    assert "could not read whether" in caplog.text
    assert slack.of("assistant.threads.setTitle") == [], "B could not tell it started"
    assert slack.in_thread(DM_CHANNEL, root), "the request is answered all the same"
