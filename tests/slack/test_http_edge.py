"""The HTTP edge: signatures, malformed payloads, acks, URL verification."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler

from adapters.slack.wire import (
    APPROVE_ACTION,
    DECLINE_VIEW,
    decode_button_value,
    encode_button_value,
)
from agents import Agent, FunctionModel, Message, ModelResponse, Store
from agents.models.base import ModelRequest

from .conftest import StartBot
from .fake_slack import TOKEN, FakeSlack
from .harness import (
    BOB,
    SIGNING_SECRET,
    BotServer,
    block_actions,
    button,
    event_body,
    mention_event,
    message_event,
    signed_headers,
    view_submission,
)
from .scripted import Ran, build_agent
from .test_approvals import ask_for_deploy, has_buttons


async def test_a_forged_signature_is_refused_with_401(bot: BotServer, slack: FakeSlack) -> None:
    body = json.dumps(event_body(mention_event("deploy api")))
    forged = signed_headers(body, secret="not-the-secret")
    status, _ = await bot.post(body, headers=forged)
    assert status == 401
    await bot.idle()
    assert slack.of("chat.postMessage") == []


async def test_a_stale_timestamp_is_refused_with_401(bot: BotServer, slack: FakeSlack) -> None:
    body = json.dumps(event_body(mention_event("deploy api")))
    stale = signed_headers(body, timestamp=int(time.time()) - 301)
    status, _ = await bot.post(body, headers=stale)
    assert status == 401
    await bot.idle()
    assert slack.of("chat.postMessage") == []


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="no-headers"),
        pytest.param(
            {"X-Slack-Request-Timestamp": "soon", "X-Slack-Signature": "v0=00"}, id="bad-ts"
        ),
        pytest.param({"X-Slack-Request-Timestamp": str(int(time.time()))}, id="no-signature"),
    ],
)
async def test_requests_without_a_valid_signature_get_401(
    bot: BotServer, headers: dict[str, str]
) -> None:
    body = json.dumps(event_body(mention_event("hi")))
    status, _ = await bot.post(body, headers=headers or {"X-Other": "1"})
    assert status == 401


async def test_unparsable_bodies_get_401_unsigned_and_400_signed(bot: BotServer) -> None:
    body = '{"type": "event_callback", "event": '
    status, _ = await bot.post(body, headers=signed_headers(body, secret="wrong"))
    assert status == 401
    status, text = await bot.post(body)
    assert (status, text) == (400, "malformed payload")


def _interaction(payload: Any) -> str:
    return urlencode({"payload": json.dumps(payload)})


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        pytest.param(
            "payload=%7Bnot-json", "application/x-www-form-urlencoded", id="form-bad-json"
        ),
        pytest.param("[1, 2, 3]", "application/json", id="json-array"),
        pytest.param("{}", "application/json", id="no-type"),
        pytest.param(
            _interaction({"type": "block_actions", "user": {"id": BOB}}),
            "application/x-www-form-urlencoded",
            id="action-without-container",
        ),
        pytest.param(
            _interaction({"type": "view_submission", "user": {"id": BOB}, "view": 3}),
            "application/x-www-form-urlencoded",
            id="view-not-object",
        ),
    ],
)
async def test_malformed_payloads_get_400_with_a_short_text(
    bot: BotServer, slack: FakeSlack, body: str, content_type: str
) -> None:
    status, text = await bot.post(body, content_type=content_type)
    assert status == 400
    assert len(text) < 40
    assert "Traceback" not in text
    await bot.idle()
    assert slack.of("chat.postMessage") == []


@pytest.mark.parametrize(
    "body",
    [
        pytest.param('{"type": "event_callback"}', id="no-event"),
        pytest.param(
            json.dumps({**event_body(mention_event("x")), "event": "not an object"}),
            id="event-not-object",
        ),
        pytest.param(
            json.dumps(event_body({"type": "app_mention", "text": "hi", "ts": "1.2"})),
            id="mention-without-user-and-channel",
        ),
        pytest.param(
            json.dumps(event_body({"type": "app_home_opened", "tab": "messages", "user": BOB})),
            id="messages-tab-without-channel",
        ),
        pytest.param(
            json.dumps(event_body({"type": "app_context_changed", "context": {}})),
            id="context-of-nobody",
        ),
    ],
)
async def test_malformed_events_are_acknowledged_ignored_and_logged(
    bot: BotServer, slack: FakeSlack, body: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Slack resends an event answered with anything but a 2xx, then drops it (and, when
    # most of an app's events fail, turns its events off).
    with caplog.at_level(logging.WARNING, logger="adapters.slack.app"):
        status, _ = await bot.post(body)
        await bot.idle()
    assert status == 200
    assert [c.method for c in slack.calls if c.method != "auth.test"] == []
    (logged,) = caplog.records
    assert logged.getMessage().startswith("acknowledged and ignored a malformed event")


async def test_an_action_that_is_not_ours_gets_400_and_changes_nothing(
    bot: BotServer, slack: FakeSlack
) -> None:
    # A button value the bot never issued is answered privately: see test_hostile.
    card = await ask_for_deploy(bot, slack)
    unknown = block_actions(card, APPROVE_ACTION)
    unknown["actions"][0]["action_id"] = "something_else"
    status, text = await bot.interact(unknown)
    assert (status, text) == (400, "unknown action")
    await bot.idle()
    assert card.updates == 0
    assert has_buttons(card)


async def test_a_decline_modal_with_foreign_metadata_gets_400(bot: BotServer) -> None:
    view = {"callback_id": DECLINE_VIEW, "private_metadata": '{"run": "r"}', "type": "modal"}
    status, text = await bot.interact(view_submission(view, user=BOB, reason=None))
    assert (status, text) == (400, "malformed view metadata")


async def test_an_old_cards_button_clicked_from_another_thread_changes_nothing(
    bot: BotServer, slack: FakeSlack
) -> None:
    card = await ask_for_deploy(bot, slack)
    # The button value of a card from before buttons carried their asking, pressed on
    # a message in some other thread: no copy of the card, no ask to match. (A value
    # with the card's ask decides from anywhere in the workspace, as an inbox's does.)
    old = decode_button_value(button(card, APPROVE_ACTION)["value"])
    value = encode_button_value(old.run, old.call)
    elsewhere = block_actions(card, APPROVE_ACTION, user=BOB, value=value)
    elsewhere["container"] |= {"thread_ts": "1500000000.000100", "message_ts": "1500000001.000100"}
    elsewhere["message"] |= {"thread_ts": "1500000000.000100", "ts": "1500000001.000100"}
    status, _ = await bot.interact(elsewhere)
    assert status == 200
    await bot.idle()
    assert card.updates == 0
    assert has_buttons(card)
    (ephemeral,) = slack.of("chat.postEphemeral")
    assert ephemeral.args["user"] == BOB
    assert ephemeral.args["thread_ts"] == "1500000000.000100"


async def test_url_verification_answers_the_challenge(bot: BotServer) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "abc123", "token": "legacy"})
    status, text = await bot.post(body)
    assert status == 200
    assert "abc123" in text


async def test_other_events_and_interactions_are_acknowledged(bot: BotServer) -> None:
    body = json.dumps(event_body({"type": "reaction_added", "user": BOB, "reaction": "+1"}))
    status, _ = await bot.post(body)
    assert status == 200
    status, _ = await bot.interact({"type": "view_closed", "user": {"id": BOB}})
    assert status == 200


async def test_a_body_that_is_not_utf8_is_refused(bot: BotServer) -> None:
    async with bot.session.post(
        bot.url,
        data=b"\xff\xfe{",
        headers={"Content-Type": "application/json", **signed_headers("x")},
    ) as resp:
        assert resp.status == 401


async def test_events_are_acknowledged_while_the_agent_is_still_working(
    serve: StartBot, slack: FakeSlack, store: Store
) -> None:
    gate = asyncio.Event()

    async def slow(messages: list[Message], request: ModelRequest) -> ModelResponse:
        await gate.wait()
        return ModelResponse(text="finally")

    bot = await serve(Agent(id="slow", model=FunctionModel(slow), store=store))
    event = message_event("hi", channel="D0DM00002", channel_type="im")
    assert await asyncio.wait_for(bot.send_event(event), timeout=2) == 200
    assert slack.of("chat.postMessage") == []
    gate.set()
    await bot.idle()
    assert [m.text for m in slack.in_thread("D0DM00002", event["ts"])] == ["finally"]


async def test_a_request_the_bot_cannot_keep_is_left_unacked_with_503(
    bot: BotServer, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def down(*args: object, **kwargs: object) -> str | None:
        raise ConnectionError("store down")

    monkeypatch.setattr("bot.intake.BUFFER_LIMIT", 0)  # nothing can wait in memory either
    monkeypatch.setattr(bot.bot.chat, "enqueue", down)
    status, text = await bot.post(json.dumps(event_body(mention_event("hello"))))
    assert status == 503  # Slack sends it again later
    assert "send this again" in text
    await bot.idle()
    assert slack.of("chat.postMessage") == []


async def test_a_click_the_bot_cannot_keep_is_left_unacked_with_503(
    bot: BotServer, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    card = await ask_for_deploy(bot, slack)

    async def down(*args: object, **kwargs: object) -> str | None:
        raise ConnectionError("store down")

    monkeypatch.setattr("bot.intake.BUFFER_LIMIT", 0)
    monkeypatch.setattr(bot.bot.chat, "enqueue", down)
    status, text = await bot.interact(block_actions(card, APPROVE_ACTION, user=BOB))
    assert status == 503  # the presser's Slack says it failed; they press again
    assert "send this again" in text
    await bot.idle()
    assert card.updates == 0
    assert has_buttons(card)


async def test_starting_the_adapter_logs_no_warning(
    serve: StartBot,
    slack: FakeSlack,
    store: Store,
    ran: Ran,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Configured as in production: Bolt reads SLACK_BOT_TOKEN itself, and warned that
    # it went unused when the adapter gave it a client of its own.
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
    for name in ("SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    caplog.set_level(logging.DEBUG)

    bot = await serve(build_agent(store, ran))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []

    assert await bot.send_event(mention_event("hello")) == 200  # Bolt's first auth.test
    await bot.idle()
    from_slack = [r for r in caplog.records if r.name.startswith(("slack_bolt", "slack_sdk"))]
    assert from_slack, "Bolt's logs are seen"
    assert [r.getMessage() for r in from_slack if r.levelno >= logging.WARNING] == []
    assert bot.adapter.client is bot.adapter.app.client, "one client, at the configured URL"
    assert [c.method for c in slack.calls][:1] == ["auth.test"]
    handlers = bot.adapter.client.retry_handlers
    assert any(isinstance(h, AsyncRateLimitErrorRetryHandler) for h in handlers)
