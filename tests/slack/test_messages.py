"""Messages in Slack: where the bot listens, what it ignores, threads, questions, dedupe."""

from __future__ import annotations

import pytest

from adapters.slack.wire import APPROVE_ACTION

from .fake_slack import BOT_ID, BOT_USER_ID, FakeSlack, Scripted
from .harness import (
    ALICE,
    BOB,
    CHANNEL,
    DM_CHANNEL,
    BotServer,
    mention_event,
    message_event,
    new_ts,
)
from .scripted import Ran
from .test_approvals import card_text, the_card


def texts_in(slack: FakeSlack, root: str, channel: str = CHANNEL) -> list[str]:
    return [m.text for m in slack.in_thread(channel, root)]


async def test_a_mention_starts_a_thread_under_the_message_without_the_mention(
    bot: BotServer, slack: FakeSlack
) -> None:
    event = mention_event("hello there")
    await bot.send_event(event)
    await bot.idle()
    assert texts_in(slack, event["ts"]) == ["You said: hello there"]


async def test_a_direct_message_is_answered_in_its_thread(bot: BotServer, slack: FakeSlack) -> None:
    event = message_event("hi bot", channel=DM_CHANNEL, channel_type="im")
    await bot.send_event(event)
    await bot.idle()
    assert texts_in(slack, event["ts"], DM_CHANNEL) == ["You said: hi bot"]


async def test_a_reply_in_a_thread_the_bot_is_in_continues_without_a_mention(
    bot: BotServer, slack: FakeSlack
) -> None:
    root = mention_event("first")
    await bot.send_event(root)
    await bot.idle()
    await bot.send_event(message_event("second", user=BOB, thread_ts=root["ts"]))
    await bot.idle()
    assert texts_in(slack, root["ts"]) == ["You said: first", "You said: second"]


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(
            message_event("a thread without the bot", thread_ts=new_ts()), id="other-thread"
        ),
        pytest.param(message_event("top level chatter"), id="top-level"),
        pytest.param(
            message_event("beep", bot_id="B0OTHER01", subtype="bot_message"), id="other-bot"
        ),
        pytest.param(message_event("me", user=BOT_USER_ID, bot_id=BOT_ID), id="itself"),
        pytest.param(
            message_event(
                "edited", subtype="message_changed", channel_type="im", channel=DM_CHANNEL
            ),
            id="edit",
        ),
        pytest.param(
            message_event("", subtype="message_deleted", channel_type="im", channel=DM_CHANNEL),
            id="deletion",
        ),
        pytest.param(message_event("joined", subtype="channel_join"), id="join"),
    ],
)
async def test_messages_not_for_the_bot_are_acknowledged_and_ignored(
    bot: BotServer, slack: FakeSlack, event: dict[str, object]
) -> None:
    assert await bot.send_event(event) == 200
    await bot.idle()
    assert slack.of("chat.postMessage") == []


async def test_a_reply_also_sent_to_the_channel_still_counts(
    bot: BotServer, slack: FakeSlack
) -> None:
    root = mention_event("first")
    await bot.send_event(root)
    await bot.idle()
    reply = message_event("broadcast", thread_ts=root["ts"], subtype="thread_broadcast")
    await bot.send_event(reply)
    await bot.idle()
    assert texts_in(slack, root["ts"]) == ["You said: first", "You said: broadcast"]


async def test_a_direct_message_with_a_file_is_answered(bot: BotServer, slack: FakeSlack) -> None:
    event = message_event("see file", channel=DM_CHANNEL, channel_type="im", subtype="file_share")
    await bot.send_event(event)
    await bot.idle()
    assert texts_in(slack, event["ts"], DM_CHANNEL) == ["You said: see file"]


async def test_a_retried_event_runs_once(bot: BotServer, slack: FakeSlack) -> None:
    event = mention_event("once please")
    await bot.send_event(event, event_id="EvRETRY01")
    assert await bot.send_event(event, event_id="EvRETRY01", retry=1) == 200
    assert await bot.send_event(event, event_id="EvRETRY01", retry=2) == 200
    await bot.idle()
    assert texts_in(slack, event["ts"]) == ["You said: once please"]


async def test_a_mention_delivered_as_app_mention_and_message_runs_once(
    bot: BotServer, slack: FakeSlack
) -> None:
    root = mention_event("start")
    await bot.send_event(root)
    await bot.idle()
    # In a thread the bot is in, the same message arrives as both events.
    ts = new_ts()
    mention = mention_event("again", ts=ts, thread_ts=root["ts"])
    plain = message_event(mention["text"], ts=ts, thread_ts=root["ts"])
    await bot.send_event(plain)
    await bot.send_event(mention)
    await bot.idle()
    assert texts_in(slack, root["ts"]) == ["You said: start", "You said: again"]


async def test_a_tool_question_is_asked_and_the_thread_reply_resumes_it(
    bot: BotServer, slack: FakeSlack, ran: Ran
) -> None:
    root = mention_event("release api")
    await bot.send_event(root)
    await bot.idle()
    (question,) = slack.posts_in(CHANNEL, root["ts"])  # below the live step that waits
    shown = card_text(question)
    assert "Which version of api should I release?" in shown
    assert "Reply in this thread" in shown

    await bot.send_event(message_event("1.4.2", thread_ts=root["ts"]))
    await bot.idle()
    assert ran.releases == [{"service": "api", "version": "1.4.2"}]
    assert "release ok" in texts_in(slack, root["ts"])[-1]
    assert f"Answered by <@{ALICE}>" in card_text(question)


async def test_a_reply_that_does_not_fit_is_asked_again(
    bot: BotServer, slack: FakeSlack, ran: Ran
) -> None:
    root = mention_event("release api")
    await bot.send_event(root)
    await bot.idle()
    await bot.send_event(message_event("banana", thread_ts=root["ts"]))
    await bot.idle()
    again = slack.in_thread(CHANNEL, root["ts"])[-1]
    title, warning = (block["text"]["text"] for block in again.shown[:2])
    assert title == "💬 `release` asks:"
    assert "did not fit" in warning, "what went wrong first, under the title"
    assert "Which version of api" in again.text
    assert ran.releases == []

    await bot.send_event(message_event("2.0.0", thread_ts=root["ts"]))
    await bot.idle()
    assert ran.releases == [{"service": "api", "version": "2.0.0"}]


async def test_a_status_shows_while_working_and_is_cleared(
    bot: BotServer, slack: FakeSlack
) -> None:
    event = mention_event("hello")
    await bot.send_event(event)
    await bot.idle()
    statuses = [c.args for c in slack.of("assistant.threads.setStatus")]
    assert [s["status"] for s in statuses] == ["is thinking…", ""]
    assert {(s["channel_id"], s["thread_ts"]) for s in statuses} == {(CHANNEL, event["ts"])}


async def test_a_refused_status_is_skipped_silently(bot: BotServer, slack: FakeSlack) -> None:
    slack.script("assistant.threads.setStatus", Scripted(error="not_allowed", times=1))
    first = mention_event("one")
    await bot.send_event(first)
    await bot.idle()
    await bot.send_event(mention_event("two"))
    await bot.idle()
    assert texts_in(slack, first["ts"]) == ["You said: one"]
    assert len(slack.of("assistant.threads.setStatus")) == 1, "not asked again in that channel"


async def test_a_long_answer_is_split_within_slack_limits(bot: BotServer, slack: FakeSlack) -> None:
    slack.refuse_streaming()  # posted whole
    event = mention_event("long")
    await bot.send_event(event)
    await bot.idle()
    posted = slack.in_thread(CHANNEL, event["ts"])
    assert len(posted) >= 2
    sections = [b["text"]["text"] for m in posted for b in m.shown if b["type"] == "section"]
    assert all(len(s) <= 3000 for s in sections)
    assert sum(s.count("All systems nominal.") for s in sections) == 40 * 20


async def test_a_rate_limited_post_is_retried(bot: BotServer, slack: FakeSlack) -> None:
    slack.refuse_streaming()  # posted whole
    slack.script("chat.postMessage", Scripted(status=429, retry_after=0))
    event = mention_event("hello")
    await bot.send_event(event)
    await bot.idle()
    assert texts_in(slack, event["ts"]) == ["You said: hello"]
    assert len(slack.of("chat.postMessage")) == 2


async def test_the_thread_goes_on_while_a_card_waits_and_the_card_still_decides(
    bot: BotServer, slack: FakeSlack, ran: Ran
) -> None:
    """A card waits -> "status of web?" is answered (the model told what waits) -> the
    card is approved -> the first call runs once, its answer naming its request."""
    root = mention_event("deploy api")
    await bot.send_event(root)
    await bot.idle()
    card = the_card(slack.in_thread(CHANNEL, root["ts"]))
    await bot.send_event(message_event("status of web?", user=BOB, thread_ts=root["ts"]))
    await bot.idle()
    assert texts_in(slack, root["ts"])[-1] == (
        "You said: status of web? (still waiting here: deploy)"
    )
    assert ran.deploys == []
    # Text never decides: a message that only says "approve" is told to use the card.
    await bot.send_event(message_event("approve", user=BOB, thread_ts=root["ts"]))
    await bot.idle()
    assert "only the Approve and Decline buttons" in texts_in(slack, root["ts"])[-1]
    assert ran.deploys == []

    assert await bot.press(card, APPROVE_ACTION, user=BOB) == 200
    await bot.idle()
    assert len(ran.deploys) == 1
    answer = texts_in(slack, root["ts"])[-1]
    assert answer.startswith("About “deploy api”:")
    assert "deploy ok" in answer
    assert len([t for t in texts_in(slack, root["ts"]) if "deploy ok" in t]) == 1
    assert f"Approved by <@{BOB}>" in card_text(card)


async def test_a_mention_while_a_question_waits_is_a_new_turn_and_a_reply_answers_it(
    bot: BotServer, slack: FakeSlack, ran: Ran
) -> None:
    root = mention_event("release web")
    await bot.send_event(root)
    await bot.idle()
    thread = root["ts"]
    await bot.send_event(mention_event("how is api", user=BOB, thread_ts=thread))
    await bot.idle()
    assert texts_in(slack, thread)[-1] == "You said: how is api (still waiting here: release)"
    assert ran.releases == []
    await bot.send_event(message_event("1.2.3", thread_ts=thread))
    await bot.idle()
    assert ran.releases == [{"service": "web", "version": "1.2.3"}]
    assert "release ok" in texts_in(slack, thread)[-1]
