"""Hostile input at the Slack edge: every answer is 2xx or 4xx, nothing changes unasked,
and an event Slack signed is acknowledged, however malformed (Slack would only send it
again, then drop it)."""

from __future__ import annotations

import json
import logging
from urllib.parse import urlencode

import pytest

from adapters.slack.wire import APPROVE_ACTION
from agents import Store

from .conftest import StartBot
from .fake_slack import BOT_USER_ID, FakeSlack, Scripted
from .harness import (
    ALICE,
    DM_CHANNEL,
    BotServer,
    block_actions,
    event_body,
    mention_event,
    message_event,
    signed_headers,
)
from .scripted import build_agent
from .test_approvals import ask_for_deploy, has_buttons


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("levels", [10_000, 100_000])
async def test_json_nested_too_deep_is_refused_with_400(
    bot: BotServer, slack: FakeSlack, levels: int
) -> None:
    status, _ = await bot.post(deep(levels))
    assert status == 400
    inside = json.dumps(event_body(mention_event("hi")))[:-1] + ', "x": ' + deep(levels) + "}"
    status, _ = await bot.post(inside)
    assert status == 400
    await bot.idle()
    assert slack.of("chat.postMessage") == []


@pytest.mark.parametrize("timestamp", ["\u00b2\u00b2", "\u2460", "١٢٣", " 1", "-1", "", "1" * 5000])
async def test_a_malformed_timestamp_header_is_a_401(bot: BotServer, timestamp: str) -> None:
    body = json.dumps(event_body(mention_event("hi")))
    headers = {**signed_headers(body), "X-Slack-Request-Timestamp": timestamp}
    status, _ = await bot.post(body, headers=headers)
    assert status == 401


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("kind", ["mention", "direct"])
async def test_a_lone_surrogate_in_a_messages_text_is_acked_and_the_message_answered(
    bot: BotServer, slack: FakeSlack, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    if kind == "mention":
        event = mention_event("hello \ud800there")
    else:
        event = message_event("hello \ud800there", channel=DM_CHANNEL, channel_type="im")
    body = json.dumps(event_body(event))  # escapes the surrogate as \\ud800
    with caplog.at_level(logging.WARNING):
        status, _ = await bot.post(body)
        await bot.idle()
    assert status == 200
    (answer,) = slack.in_thread(event["channel"], event["ts"])
    assert answer.text == "You said: hello \ufffdthere"
    assert len(warnings(caplog)) == 1, warnings(caplog)


@pytest.mark.parametrize("where", ["user", "channel", "ts"])
async def test_a_lone_surrogate_in_an_id_is_acked_and_the_event_ignored(
    bot: BotServer, slack: FakeSlack, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    event = mention_event("deploy api")
    event[where] = event[where] + "\ud800"
    body = json.dumps(event_body(event))
    with caplog.at_level(logging.WARNING):
        status, _ = await bot.post(body)
        await bot.idle()
    assert status == 200
    assert slack.of("chat.postMessage") == []
    assert slack.of("chat.startStream") == []
    assert warnings(caplog) == ["acknowledged and ignored a malformed event app_mention"]


async def test_a_bare_assistant_thread_started_is_acked_and_ignored(
    bot: BotServer, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    bare = {"type": "assistant_thread_started", "event_ts": "1700000000.000100"}
    with caplog.at_level(logging.WARNING):
        status, _ = await bot.post(json.dumps(event_body(bare)))
        await bot.idle()
    assert status == 200
    assert [c.method for c in slack.calls if c.method != "auth.test"] == []
    assert warnings(caplog) == [
        "acknowledged and ignored a malformed event assistant_thread_started"
    ]


async def test_a_lone_surrogate_in_an_interaction_is_still_refused_with_400(
    bot: BotServer, slack: FakeSlack
) -> None:
    # Slack does not resend an interaction: the person who pressed sees the refusal.
    card = await ask_for_deploy(bot, slack)
    pressed = block_actions(card, APPROVE_ACTION, user=ALICE)
    pressed["user"]["id"] += "\ud800"
    status, _ = await bot.post(
        urlencode({"payload": json.dumps(pressed)}),
        content_type="application/x-www-form-urlencoded",
    )
    assert status == 400
    await bot.idle()
    assert card.updates == 0
    assert has_buttons(card)


@pytest.mark.parametrize(
    "escape", ["%5Cud800", "%5cud800", "%5C%75d800", "%5c%75%64%38%30%30", "\\ud800"]
)
async def test_a_lone_surrogate_in_an_interaction_is_refused_however_the_form_spells_it(
    bot: BotServer, slack: FakeSlack, escape: str
) -> None:
    card = await ask_for_deploy(bot, slack)
    pressed = block_actions(card, APPROVE_ACTION, user=ALICE)
    pressed["user"]["id"] += "SURROGATE"
    body = urlencode({"payload": json.dumps(pressed)}).replace("SURROGATE", escape)
    status, _ = await bot.post(body, content_type="application/x-www-form-urlencoded")
    assert status == 400
    await bot.idle()
    assert card.updates == 0


async def test_forged_and_unparsable_events_are_still_refused(bot: BotServer) -> None:
    body = json.dumps(event_body(mention_event("hello \ud800there")))
    status, _ = await bot.post(body, headers=signed_headers(body, secret="not-the-secret"))
    assert status == 401
    cut = body[: len(body) // 2]
    status, _ = await bot.post(cut)
    assert status == 400


async def test_the_bot_never_answers_its_own_messages(bot: BotServer, slack: FakeSlack) -> None:
    root = mention_event("deploy api")
    await bot.send_event(root)
    await bot.idle()
    before = len(slack.of("chat.postMessage"))
    for own in (
        message_event("deploy api", user=BOT_USER_ID, thread_ts=root["ts"]),
        message_event("deploy api", thread_ts=root["ts"], bot_id="B0BOT0001"),
        message_event("deploy api", thread_ts=root["ts"], subtype="bot_message"),
    ):
        assert await bot.send_event(own) == 200
    await bot.idle()
    assert len(slack.of("chat.postMessage")) == before


async def test_a_button_value_the_bot_never_issued_is_answered_privately(
    bot: BotServer, slack: FakeSlack
) -> None:
    card = await ask_for_deploy(bot, slack)
    for value in ("not json", '{"run": "x"}', '{"run": "", "call": "c"}', "[]"):
        status, _ = await bot.interact(block_actions(card, APPROVE_ACTION, value=value, user=ALICE))
        assert status == 200
    await bot.idle()
    told = [c.args["text"] for c in slack.of("chat.postEphemeral")]
    assert len(told) == 4
    assert all("not a valid approval card" in t for t in told)
    assert card.updates == 0
    assert has_buttons(card)


async def test_a_token_slack_refuses_gets_no_5xx_for_any_request(
    serve: StartBot, store: Store, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    # The bot token was revoked (or mistyped) before the bot started: every Web API
    # call says invalid_auth.
    for method in ("auth.test", "chat.postMessage", "chat.postEphemeral"):
        slack.script(method, Scripted(error="invalid_auth", times=1000))
    bot = await serve(build_agent(store))
    statuses = [
        await bot.send_event(mention_event("deploy api")),
        await bot.send_event(message_event("hello", channel=DM_CHANNEL)),
        (await bot.command("", user=ALICE))[0],
    ]
    await bot.idle()
    assert all(status < 500 for status in statuses), statuses
    assert "Traceback" not in caplog.text
