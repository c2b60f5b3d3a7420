"""Hostile input at the Slack edge: every answer is 2xx or 4xx, nothing changes unasked."""

from __future__ import annotations

import json

import pytest

from adapters.slack.wire import APPROVE_ACTION

from .fake_slack import BOT_USER_ID, FakeSlack
from .harness import (
    ALICE,
    BotServer,
    block_actions,
    event_body,
    mention_event,
    message_event,
    signed_headers,
)
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


@pytest.mark.parametrize("where", ["user", "channel", "text"])
async def test_lone_surrogates_are_refused_with_400_and_store_nothing(
    bot: BotServer, slack: FakeSlack, where: str
) -> None:
    event = mention_event("deploy api")
    event[where] = event[where] + "\ud800"
    body = json.dumps(event_body(event))  # escapes the surrogate as \\ud800
    status, _ = await bot.post(body)
    assert status == 400
    await bot.idle()
    assert slack.of("chat.postMessage") == []


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
