"""Teams' limits on what the bot sends: 429 with ``Retry-After``, a bad moment (5xx, no
answer in time). Every send path waits as long as Teams asks, tries again a bounded
while, keeps the order of posts in a conversation, and loses nothing it does not say
it lost (``Undeliverable``)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import replace

import pytest

from adapters.teams.convert import PLATFORM
from adapters.teams.limits import RetryPolicy
from bot import Destination, Notice, ThreadKey, Undeliverable

from . import activities as act
from .conftest import TEST_LIMITS, MakeBot, TeamsBot
from .fake_connector import Attempt, FakeConnector


def in_thread(root: str) -> str:
    return f"{act.CHANNEL};messageid={root}"


def assert_never_early(attempts: list[Attempt], *, backoff: float) -> None:
    """No write came before the ``Retry-After`` of the 429 before it, nor sooner than
    ``backoff`` after a 5xx."""
    for before, after in itertools.pairwise(attempts):
        if before.status == 429 and before.retry_after is not None:
            assert after.at - before.at >= before.retry_after, (before, after)
        elif before.status >= 500:
            assert after.at - before.at >= backoff, (before, after)


def thread_of(root: str) -> ThreadKey:
    return ThreadKey(platform=PLATFORM, workspace=act.TENANT, channel=act.CHANNEL, root=root)


async def answered(teams: TeamsBot, connector: FakeConnector) -> tuple[str, ThreadKey]:
    """A channel thread the bot has answered in (so it may post there): its root, its key."""
    root = act.next_id()
    await teams.post(act.channel_post(connector.url, "hello", activity_id=root, mention=True))
    await teams.bot.drain()
    assert connector.texts(in_thread(root)), connector.calls
    return root, thread_of(root)


@pytest.fixture
async def teams(make_bot: MakeBot) -> TeamsBot:
    return await make_bot()


async def test_a_throttled_card_waits_for_retry_after_and_is_posted_once(
    teams: TeamsBot, connector: FakeConnector
) -> None:
    connector.fail_next(429, retry_after="0.3", times=2)
    connector.fail_next(503)
    root = act.next_id()

    answer = await teams.post(
        act.channel_post(connector.url, "deploy api", activity_id=root, mention=True)
    )
    await teams.bot.drain()

    assert answer.status == 200
    assert len(connector.cards(in_thread(root))) == 1
    attempts = connector.attempts_in(in_thread(root))
    assert [a.status for a in attempts] == [429, 429, 503, 200]
    assert_never_early(attempts, backoff=TEST_LIMITS.first_wait)


async def test_posts_made_together_arrive_in_order_and_none_before_its_turn(
    teams: TeamsBot, connector: FakeConnector
) -> None:
    root, thread = await answered(teams, connector)
    connector.fail_next(429, retry_after="0.2", times=2)
    connector.fail_next(503)
    notes = [f"note {i}" for i in range(5)]
    sent_before = len(connector.attempts_in(in_thread(root)))

    await asyncio.gather(
        *(teams.adapter.messenger.post(thread, Notice(text=note)) for note in notes)
    )

    attempts = connector.attempts_in(in_thread(root))[sent_before:]
    assert [(a.status, a.text) for a in attempts] == [
        (429, "note 0"),
        (429, "note 0"),
        (503, "note 0"),
        *((200, note) for note in notes),
    ]
    assert connector.texts(in_thread(root))[-5:] == notes
    assert_never_early(attempts, backoff=TEST_LIMITS.first_wait)


async def test_a_retry_after_beyond_the_budget_is_undeliverable_and_nothing_is_resent(
    teams: TeamsBot, connector: FakeConnector
) -> None:
    root, thread = await answered(teams, connector)
    connector.fail_next(429, retry_after="3600")
    sent_before = len(connector.attempts_in(in_thread(root)))

    started = time.monotonic()
    with pytest.raises(Undeliverable, match="3600"):
        await teams.adapter.messenger.post(thread, Notice(text="too soon"))
    # The thread is closed for as long as Teams said: the next post is not tried either.
    with pytest.raises(Undeliverable):
        await teams.adapter.messenger.post(thread, Notice(text="still too soon"))

    assert time.monotonic() - started < 1.0  # given up at once, not after waiting
    assert len(connector.attempts_in(in_thread(root))) == sent_before + 1


async def test_a_service_that_stays_down_is_tried_within_the_budget_then_undeliverable(
    teams: TeamsBot, connector: FakeConnector
) -> None:
    root, thread = await answered(teams, connector)
    teams.adapter.limits.policy = replace(TEST_LIMITS, budget=1.0)
    connector.fail_next(503, times=1_000)
    sent_before = len(connector.attempts_in(in_thread(root)))

    started = time.monotonic()
    with pytest.raises(Undeliverable, match="503"):
        await teams.adapter.messenger.post(thread, Notice(text="anyone?"))
    took = time.monotonic() - started

    attempts = connector.attempts_in(in_thread(root))[sent_before:]
    assert took < 1.0 + TEST_LIMITS.longest_wait  # no try starts past the budget
    assert 3 <= len(attempts) <= 10
    gaps = [b.at - a.at for a, b in itertools.pairwise(attempts)]
    for failures, gap in enumerate(gaps, start=1):
        assert gap >= TEST_LIMITS.backoff(failures)  # 0.05, 0.1, 0.2, 0.4, 0.4…


async def test_a_call_without_an_answer_in_time_is_tried_again(
    teams: TeamsBot, connector: FakeConnector
) -> None:
    teams.adapter.limits.policy = replace(TEST_LIMITS, attempt_timeout=0.3)
    connector.fail_next(503, delay=1.5)  # hangs well past the attempt's time-out
    root = act.next_id()

    await teams.post(act.channel_post(connector.url, "deploy api", activity_id=root, mention=True))
    await teams.bot.drain()

    assert len(connector.cards(in_thread(root))) == 1
    assert [a.status for a in connector.attempts_in(in_thread(root))] == [503, 200]


async def test_a_card_update_and_a_new_chat_honour_retry_after_too(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    root = act.next_id()
    await teams.post(act.channel_post(connector.url, "deploy api", activity_id=root, mention=True))
    await teams.bot.drain()
    (posted,) = connector.cards(in_thread(root))
    assert posted.card is not None
    connector.fail_next(429, retry_after="0.2")
    sent_before = len(connector.attempts_in(in_thread(root)))

    click = act.execute(
        connector.url,
        posted.card,
        "approve",
        conversation=act.channel_conversation(root),
        card_id=posted.response_id,
    )
    assert (await teams.post(click)).status == 200
    await teams.bot.drain()

    assert teams.deployed == ["api"]
    assert len(connector.updates()) == 1
    attempts = connector.attempts_in(in_thread(root))[sent_before:]
    assert attempts[0].status == 429
    assert_never_early(attempts, backoff=TEST_LIMITS.first_wait)

    connector.fail_next(429, retry_after="0.2")
    await teams.adapter.messenger.post_elsewhere(
        thread_of(root), Destination(user_id="aad-bob"), Notice(text="for Bob")
    )
    (created,) = connector.created
    assert [a.status for a in connector.attempts_in("")] == [429, 200]
    assert_never_early(connector.attempts_in(""), backoff=TEST_LIMITS.first_wait)
    assert connector.texts(created.conversation_id) == ["for Bob"]


async def test_calls_waiting_on_a_limit_are_counted(
    teams: TeamsBot, connector: FakeConnector
) -> None:
    _, thread = await answered(teams, connector)
    limits = teams.adapter.limits
    assert (limits.waiting, limits.throttled) == (0, 0)
    connector.fail_next(429, retry_after="0.5")

    post = asyncio.create_task(teams.adapter.messenger.post(thread, Notice(text="soon")))
    deadline = time.monotonic() + 5
    while limits.waiting == 0:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    assert limits.waiting == 1
    assert await waiting_in_metrics(teams) == 1.0
    await post

    assert (limits.waiting, limits.throttled) == (0, 1)
    assert await waiting_in_metrics(teams) == 0.0


async def waiting_in_metrics(teams: TeamsBot) -> float:
    """What ``GET /metrics`` says of Teams calls waiting on a limit."""
    async with teams.session.get(f"{teams.url}/metrics") as response:
        text = await response.text()
    series = 'approval_bot_platform_calls_waiting{platform="teams"}'
    (line,) = [line for line in text.splitlines() if line.startswith(series)]
    return float(line.split()[-1])


async def test_a_reply_in_the_turn_waits_a_little_and_else_is_logged_once(
    teams: TeamsBot, connector: FakeConnector, caplog: pytest.LogCaptureFixture
) -> None:
    root = act.next_id()
    await teams.post(act.channel_post(connector.url, "deploy api", activity_id=root, mention=True))
    await teams.bot.drain()
    (posted,) = connector.cards(in_thread(root))
    assert posted.card is not None
    conversation = act.channel_conversation(root)

    def submit(verb: str, user: dict[str, str]) -> dict[str, object]:
        assert posted.card is not None
        return act.submit(
            connector.url,
            posted.card,
            verb,
            conversation=conversation,
            card_id=posted.response_id,
            user=user,
        )

    assert (await teams.post(submit("approve", act.BOB))).status == 200
    await teams.bot.drain()

    # Already approved: the bot says so in a reply, which is throttled a moment.
    connector.fail_next(429, retry_after="0.2")
    assert (await teams.post(submit("decline", act.CAROL))).status == 200
    assert any("already approved" in text for text in connector.texts(in_thread(root)))

    # Throttled for longer than a request may wait: answered, the reply not sent early.
    replies = len(connector.texts(in_thread(root)))
    connector.fail_next(429, retry_after="30")
    caplog.clear()
    started = time.monotonic()
    assert (await teams.post(submit("decline", act.CAROL))).status == 200
    assert time.monotonic() - started < TEST_LIMITS.reply_budget + 1.0
    assert len(connector.texts(in_thread(root))) == replies
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in said] == ["adapters.teams.turns"]
    assert not said[0].exc_info


async def test_a_throttled_stream_waits_for_retry_after_and_shows_the_answer(
    teams: TeamsBot, connector: FakeConnector
) -> None:
    connector.fail_next(429, retry_after="0.2", times=2)
    chat = act.chat_conversation()

    await teams.post(act.message(connector.url, "hello there", conversation=chat))
    await teams.bot.drain()

    attempts = connector.attempts_in(act.PERSONAL_CHAT)
    assert [a.status for a in attempts[:2]] == [429, 429]
    assert_never_early(attempts, backoff=TEST_LIMITS.first_wait)
    shown = [c.text for c in connector.messages(act.PERSONAL_CHAT)]
    assert any("You said: hello there" in text for text in shown), shown


def test_the_default_policy_lets_a_card_wait_about_a_minute() -> None:
    policy = RetryPolicy()
    assert policy.budget == 60.0
    assert 1.0 <= policy.first_wait <= policy.longest_wait < policy.budget
    assert policy.reply_budget <= 5.0  # Teams gives a request about 15 s in all
