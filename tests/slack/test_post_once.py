"""Each marked post carries its mark in Slack's message metadata, and the messenger finds
it again by reading the thread (or channel) back: what work taken over after a crash
does before it posts again (``tests/slack/test_crash.py`` kills a real process there)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import SlackMessenger
from adapters.slack.messenger import FIND_MARGIN, FIND_PAGES
from adapters.slack.wire import POST_EVENT
from bot import Destination, Person, Posted, Reply, answer_mark
from bot.views import card_mark

from .fake_slack import TOKEN, FakeSlack, Scripted
from .harness import BOB, CHANNEL, DM_CHANNEL
from .test_routing import APPROVERS, card, origin

SINCE = datetime.now(UTC) - timedelta(minutes=1)


@pytest.fixture
def messenger(slack: FakeSlack) -> SlackMessenger:
    return SlackMessenger(AsyncWebClient(token=TOKEN, base_url=slack.url))


async def test_a_marked_card_carries_its_mark_and_is_found_in_its_thread(
    messenger: SlackMessenger, slack: FakeSlack
) -> None:
    shown = card()
    mark = card_mark(shown)
    ref = await messenger.post(origin(), shown, mark=mark)
    (posted,) = slack.in_thread(CHANNEL, origin().root)
    assert posted.metadata == {
        "event_type": POST_EVENT,
        "event_payload": {"run": "run-1", "post": "card", "call": "call-1", "ask": shown.ask},
    }
    found = await messenger.find_post(origin(), mark, since=SINCE)
    assert found == Posted(thread=origin(), ref=ref)
    (read,) = slack.of("conversations.replies")
    assert read.args["ts"] == origin().root
    assert read.args["include_all_metadata"] in ("1", "true")
    assert float(read.args["oldest"]) == pytest.approx(SINCE.timestamp() - FIND_MARGIN)


async def test_another_post_another_thread_or_no_mark_is_not_found(
    messenger: SlackMessenger, slack: FakeSlack
) -> None:
    mark = card_mark(card())
    await messenger.post(origin(), card())  # unmarked (before this change, or a notice)
    await messenger.post(origin(), card(), mark=card_mark(card(ask="call-1@later")))
    await messenger.post(origin("1600000000.000200"), card(), mark=mark)
    assert await messenger.find_post(origin(), mark, since=SINCE) is None


async def test_only_the_bots_own_messages_are_believed(
    messenger: SlackMessenger, slack: FakeSlack
) -> None:
    mark = card_mark(card())
    await messenger.post(origin(), card(), mark=mark)
    (posted,) = slack.in_thread(CHANNEL, origin().root)
    posted.bot_id = "B0SOMEONE"  # another app copying the bot's metadata
    assert await messenger.find_post(origin(), mark, since=SINCE) is None


async def test_a_long_answer_carries_its_mark_on_its_last_message(
    messenger: SlackMessenger, slack: FakeSlack
) -> None:
    mark = answer_mark("run-1")
    await messenger.post(origin(), Reply(text="word " * 9000, feedback="run-1"), mark=mark)
    *parts, last = slack.in_thread(CHANNEL, origin().root)
    assert parts
    assert all(p.metadata is None for p in parts)
    assert last.metadata is not None
    found = await messenger.find_post(origin(), mark, since=SINCE)
    assert found is not None
    assert found.ref["ts"] == last.ts


async def test_a_streamed_answer_is_marked_as_it_ends(
    messenger: SlackMessenger, slack: FakeSlack
) -> None:
    live = await messenger.start_live(origin(), Person(id=BOB))
    assert live is not None
    await live.write("Done.")
    await live.finish(feedback="run-1")
    (streamed,) = slack.streamed(CHANNEL, origin().root)
    found = await messenger.find_post(origin(), answer_mark("run-1"), since=SINCE)
    assert found == Posted(thread=origin(), ref={"channel": CHANNEL, "ts": streamed.ts})


async def test_text_before_a_card_is_no_answer(messenger: SlackMessenger, slack: FakeSlack) -> None:
    live = await messenger.start_live(origin(), Person(id=BOB))
    assert live is not None
    await live.write("Let me check.")
    await live.finish(stop="run-1")
    (streamed,) = slack.streamed(CHANNEL, origin().root)
    assert streamed.metadata is None


async def test_cards_sent_elsewhere_are_found_where_they_went(
    messenger: SlackMessenger, slack: FakeSlack
) -> None:
    mark = card_mark(card())
    channel = await messenger.post_elsewhere(
        origin(), Destination(channel=APPROVERS), card(), mark=mark
    )
    direct = await messenger.post_elsewhere(origin(), Destination(user_id=BOB), card(), mark=mark)
    for to, posted in (
        (Destination(channel=APPROVERS), channel),
        (Destination(user_id=BOB), direct),
    ):
        assert await messenger.find_post(origin(), mark, since=SINCE, to=to) == posted
    assert len(slack.of("conversations.history")) == 2
    pointer = card_mark(card(), pointer=True)
    assert await messenger.find_post(origin(), pointer, since=SINCE) is None
    assert (
        await messenger.find_post(origin(), mark, since=SINCE, to=Destination(channel=DM_CHANNEL))
        is None
    )


async def test_a_refused_read_finds_nothing_so_the_post_is_made_again(
    messenger: SlackMessenger, slack: FakeSlack
) -> None:
    mark = card_mark(card())
    await messenger.post(origin(), card(), mark=mark)
    slack.script("conversations.replies", Scripted(error="missing_scope"))
    assert await messenger.find_post(origin(), mark, since=SINCE) is None


async def test_a_long_thread_is_read_a_bounded_number_of_pages(
    messenger: SlackMessenger, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("adapters.slack.messenger.FIND_LIMIT", 2)
    chatter = [await messenger.post(origin(), Reply(text="chatter")) for _ in range(2 * FIND_PAGES)]
    mark = answer_mark("run-1")
    await messenger.post(origin(), Reply(text="Done.", feedback="run-1"), mark=mark)
    assert await messenger.find_post(origin(), mark, since=SINCE) is None
    assert len(slack.of("conversations.replies")) == FIND_PAGES

    del slack.messages[(CHANNEL, chatter[0]["ts"])]  # one fewer: it is on the last page read
    assert await messenger.find_post(origin(), mark, since=SINCE) is not None
