"""👍 / 👎 under a finished answer: Slack's feedback buttons, streamed or posted whole;
a press is kept once per person and rating (audit log, metrics) and thanked privately."""

from __future__ import annotations

import time
from typing import Any

from adapters.slack.wire import FEEDBACK_ACTION
from agents import Store

from .fake_slack import TEAM_ID, FakeSlack, Posted
from .harness import ALICE, BOB, CHANNEL, BotServer, mention_event


def feedback_element(posted: Posted) -> dict[str, Any]:
    element: dict[str, Any]
    (element,) = [
        e
        for block in posted.blocks
        if block["type"] == "context_actions"
        for e in block["elements"]
        if e["type"] == "feedback_buttons"
    ]
    return element


def press(posted: Posted, helpful: bool, *, user: str = BOB) -> dict[str, Any]:
    """What Slack sends when ``user`` presses 👍 (or 👎) under an answer."""
    side = "positive_button" if helpful else "negative_button"
    value = feedback_element(posted)[side]["value"]
    return {
        "type": "block_actions",
        "user": {"id": user, "team_id": TEAM_ID},
        "team": {"id": TEAM_ID},
        "trigger_id": f"trigger-{time.monotonic_ns()}",
        "container": {
            "type": "message",
            "message_ts": posted.ts,
            "channel_id": posted.channel,
            "is_ephemeral": False,
            "thread_ts": posted.thread_ts,
        },
        "message": {"ts": posted.ts, "thread_ts": posted.thread_ts, "text": posted.text},
        "actions": [
            {
                "type": "feedback_buttons",
                "action_id": FEEDBACK_ACTION,
                "block_id": "f1",
                "value": value,
                "action_ts": str(time.time()),
            }
        ],
    }


async def answered(bot: BotServer, slack: FakeSlack) -> Posted:
    event = mention_event("hello there", user=ALICE)
    assert await bot.send_event(event) == 200
    await bot.idle()
    (answer,) = slack.in_thread(CHANNEL, event["ts"])
    return answer


async def test_a_streamed_answer_ends_with_feedback_buttons_that_are_kept_once(
    bot: BotServer, slack: FakeSlack, store: Store
) -> None:
    answer = await answered(bot, slack)
    (stop,) = slack.of("chat.stopStream")
    assert stop.args["blocks"][0]["type"] == "context_actions"
    element = feedback_element(answer)
    assert element["positive_button"]["text"]["text"] == "👍"

    for _ in range(2):  # pressed twice: kept once
        status, _ = await bot.interact(press(answer, helpful=True))
        assert status == 200
        await bot.idle()
    status, _ = await bot.interact(press(answer, helpful=False, user=ALICE))
    assert status == 200
    await bot.idle()

    feedback = [(e.actor, e.result) for e in await store.list_audit() if e.event == "feedback"]
    assert feedback == [(BOB, "helpful"), (ALICE, "unhelpful")]
    thanked = [c.args for c in slack.of("chat.postEphemeral")]
    assert [args["user"] for args in thanked] == [BOB, BOB, ALICE]
    assert all("rating of this answer is noted" in args["text"] for args in thanked)
    assert not slack.problems


async def test_an_answer_posted_whole_has_the_buttons_too(
    bot: BotServer, slack: FakeSlack, store: Store
) -> None:
    slack.refuse_streaming("not_allowed")
    answer = await answered(bot, slack)
    assert answer.started_with is None  # posted whole
    assert feedback_element(answer)["negative_button"]["text"]["text"] == "👎"
    status, _ = await bot.interact(press(answer, helpful=False))
    assert status == 200
    await bot.idle()
    assert [e.result for e in await store.list_audit() if e.event == "feedback"] == ["unhelpful"]


async def test_a_feedback_value_the_bot_never_issued_is_a_bad_request(
    bot: BotServer, slack: FakeSlack, store: Store
) -> None:
    answer = await answered(bot, slack)
    forged = press(answer, helpful=True)
    forged["actions"][0]["value"] = "great"
    status, _ = await bot.interact(forged)
    assert status == 400
    assert [e for e in await store.list_audit() if e.event == "feedback"] == []
