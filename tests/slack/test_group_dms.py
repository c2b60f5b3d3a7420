"""Group DMs (``mpim``): several people and the bot, so the bot answers as in a channel.

A message there is for the bot when it mentions the bot (whether Slack sends it as
``message.mpim`` only, or as ``app_mention`` too), or when it replies in a thread the
bot is in; people talking among themselves are left alone.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapters.slack.blocks import BAR_COLORS
from adapters.slack.convert import MessageIn, parse, to_incoming
from adapters.slack.wire import APPROVE_ACTION

from .fake_slack import BOT_USER_ID, TEAM_ID, FakeSlack
from .harness import (
    ALICE,
    BOB,
    GROUP_DM,
    BotServer,
    event_body,
    mention_event,
    message_event,
    new_ts,
)
from .scripted import Ran
from .test_approvals import card_text, has_buttons


def group_message(text: str, **extra: Any) -> dict[str, Any]:
    """``message.mpim``: someone writes in the group DM."""
    return message_event(text, channel=GROUP_DM, channel_type="mpim", **extra)


def to_bot(text: str, **extra: Any) -> dict[str, Any]:
    """``message.mpim`` that mentions the bot first."""
    return group_message(f"<@{BOT_USER_ID}> {text}", **extra)


def texts_in(slack: FakeSlack, root: str) -> list[str]:
    return [m.text for m in slack.in_thread(GROUP_DM, root)]


async def test_a_mention_in_a_group_dm_is_answered_in_its_thread(
    bot: BotServer, slack: FakeSlack
) -> None:
    event = to_bot("hello all")
    assert await bot.send_event(event) == 200
    await bot.idle()
    assert texts_in(slack, event["ts"]) == ["You said: hello all"]


async def test_a_mention_arriving_as_app_mention_and_message_mpim_runs_once(
    bot: BotServer, slack: FakeSlack
) -> None:
    ts = new_ts()
    await bot.send_event(mention_event("once", ts=ts, channel=GROUP_DM))
    await bot.send_event(to_bot("once", ts=ts))
    await bot.idle()
    assert texts_in(slack, ts) == ["You said: once"]


async def test_people_talking_among_themselves_in_a_group_dm_are_left_alone(
    bot: BotServer, slack: FakeSlack
) -> None:
    chatter = group_message("lunch at noon?", user=BOB)
    assert await bot.send_event(chatter) == 200
    elsewhere = group_message("sure", thread_ts=chatter["ts"], user=ALICE)
    assert await bot.send_event(elsewhere) == 200, "a thread the bot is not in"
    await bot.idle()
    assert slack.of("chat.postMessage") == []


async def test_a_reply_in_the_bots_thread_continues_without_a_mention(
    bot: BotServer, slack: FakeSlack
) -> None:
    root = to_bot("first")
    await bot.send_event(root)
    await bot.idle()
    await bot.send_event(group_message("second", user=BOB, thread_ts=root["ts"]))
    await bot.idle()
    assert texts_in(slack, root["ts"]) == ["You said: first", "You said: second"]


async def test_a_mention_in_someone_elses_thread_brings_the_bot_in(
    bot: BotServer, slack: FakeSlack
) -> None:
    chatter = group_message("should we deploy?", user=BOB)
    await bot.send_event(chatter)
    await bot.send_event(to_bot("what do you think", thread_ts=chatter["ts"]))
    await bot.idle()
    assert texts_in(slack, chatter["ts"]) == ["You said: what do you think"]


async def test_a_card_in_a_group_dm_is_approved_there(
    bot: BotServer, slack: FakeSlack, ran: Ran
) -> None:
    root = to_bot("deploy api")
    await bot.send_event(root)
    await bot.idle()
    (card,) = [m for m in slack.in_thread(GROUP_DM, root["ts"]) if has_buttons(m)]

    assert await bot.press(card, APPROVE_ACTION, user=BOB) == 200
    await bot.idle()
    assert [d["service"] for d in ran.deploys] == ["api"]
    assert f"Approved by <@{BOB}>" in card_text(card)
    assert card.colors == [BAR_COLORS["done"]]
    assert any("deploy ok" in t for t in texts_in(slack, root["ts"]))


@pytest.mark.parametrize(
    ("text", "thread_ts", "expected"),
    [
        (f"<@{BOT_USER_ID}> deploy", None, ("deploy", False)),
        (f"so <@{BOT_USER_ID}|approval-bot> deploy", None, ("so deploy", False)),
        ("lunch?", None, None),
        (f"ask <@{BOT_USER_ID}2> later", None, None),
        ("1.4.2", "1700.1", ("1.4.2", True)),
        (f"<@{BOT_USER_ID}> 1.4.2", "1700.1", ("1.4.2", False)),
    ],
)
def test_a_group_dm_message_is_for_the_bot_when_it_mentions_it_or_follows_its_thread(
    text: str, thread_ts: str | None, expected: tuple[str, bool] | None
) -> None:
    """``(text, only if the bot follows the thread)``, or ``None`` when not for the bot."""
    parsed = parse(event_body(group_message(text, ts="1700.9", thread_ts=thread_ts)))
    assert isinstance(parsed, MessageIn)
    message = to_incoming(parsed, workspace=TEAM_ID, bot_user_id=BOT_USER_ID)
    if expected is None:
        assert message is None
        return
    assert message is not None
    assert (message.text, message.only_if_followed) == expected
    assert message.thread.id == f"slack:{TEAM_ID}:{GROUP_DM}:{thread_ts or '1700.9'}"
