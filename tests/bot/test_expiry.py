"""The expiry sweep: cards marked expired, requesters told, runs finished."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from agents import MemoryStore
from bot import ApprovalCard, ChatBot, Notice, Person, Prompt, Reply
from tests.agents.helpers import Counter, after_the_lease

from .helpers import THREAD, RecordingMessenger, click, message, restart_agent, weather_agent

LATER = datetime.now(UTC) + timedelta(days=2)


async def test_an_expired_card_is_updated_the_requester_told_and_the_run_finished() -> None:
    ran = Counter()
    bot = ChatBot(restart_agent(ran))
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("restart the api", user="U1"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)
    assert await bot.sweep_expired() == 0  # nothing is due yet
    assert await bot.sweep_expired(now=LATER) == 1
    await bot.drain()
    ((thread, ref, updated),) = messenger.updates
    assert (thread, ref) == (THREAD, messenger.ref_of(card))
    assert isinstance(updated, ApprovalCard)
    assert updated.status == "expired"
    (notice,) = messenger.views(Notice)
    assert notice.to == Person(id="U1")
    assert notice.text.startswith("nobody decided on `restart_service` in time")
    assert "`restart_service`" in notice.text
    assert "expired" in notice.text
    assert "expired" in messenger.views(Reply)[-1].text
    assert ran.count == 0
    assert await bot.agent.list_suspended_runs(thread_id=THREAD.id) == []
    assert bot.metrics.value("approval_bot_decisions_total", outcome="expired") == 1


async def test_a_click_after_the_sweep_says_it_expired() -> None:
    bot = ChatBot(restart_agent(Counter()))
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("restart"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)
    await bot.sweep_expired(now=LATER)
    await bot.drain()
    refused = await bot.on_click(click(card))
    assert not refused.accepted
    assert refused.message == "This request expired; nothing was run."


async def test_an_unanswered_question_expires_with_a_notice() -> None:
    bot = ChatBot(weather_agent())
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("weather?", user="U7"))
    await bot.drain()
    (question,) = messenger.views(Prompt)
    assert await bot.sweep_expired(now=LATER) == 1
    await bot.drain()
    # The question loses its buttons: it says it expired.
    ((_, ref, updated),) = messenger.updates
    assert ref == messenger.ref_of(question)
    assert isinstance(updated, Prompt)
    assert updated.status == "expired"
    (notice,) = messenger.views(Notice)
    assert notice.to == Person(id="U7")
    assert notice.text.startswith("the question from `weather` expired")
    assert "`weather`" in notice.text


async def test_each_expired_run_is_swept_once_across_two_bots_on_one_store() -> None:
    store = MemoryStore()
    first = ChatBot(restart_agent(Counter(), store))
    second = ChatBot(restart_agent(Counter(), store), chat=first.chat)  # one deployment
    messengers = [RecordingMessenger(), RecordingMessenger()]
    first.register("test", messengers[0])
    second.register("test", messengers[1])
    await first.on_message(message("restart"))
    await first.drain()
    counts = [await first.sweep_expired(now=LATER), await second.sweep_expired(now=LATER)]
    await first.drain()
    await second.drain()
    assert counts == [1, 0]


async def test_the_sweeper_expires_cards_on_its_own_until_the_bot_closes() -> None:
    from bot import ApprovalPolicy

    policy = ApprovalPolicy.from_toml("[default]\nexpires_in = 0.2")
    bot = ChatBot(restart_agent(Counter()), policy=policy)
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("restart the api"))
    await bot.drain()
    bot.start_sweeper(0.05)
    deadline = asyncio.get_running_loop().time() + 5
    while not messenger.updates:
        assert asyncio.get_running_loop().time() < deadline, "the sweeper never expired the card"
        await asyncio.sleep(0.02)
    ((_, _, updated),) = messenger.updates
    assert isinstance(updated, ApprovalCard)
    assert updated.status == "expired"
    await bot.aclose()
    assert bot._sweeper is None


async def test_a_crash_mid_tool_is_reported_in_the_thread_after_a_restart() -> None:
    store = MemoryStore()
    ran = Counter()
    before = ChatBot(restart_agent(ran, store))
    before.register("test", RecordingMessenger())
    await before.on_message(message("restart the api", user="U1"))
    await before.drain()
    (waiting,) = await before.agent.list_suspended_runs(thread_id=THREAD.id)
    # The decision is claimed, then the process dies before the tool's outcome is saved.
    await before.agent.approve_tool_call(run_id=waiting.run_id, decided_by="U2")

    # Restarted on the same (durable) state: the store and the chat state.
    after = ChatBot(restart_agent(ran, store), chat=before.chat)
    messenger = RecordingMessenger()
    after.register("test", messenger)
    assert await after.recover_interrupted() == 0  # its heartbeat lasts a lease
    assert await after.recover_interrupted(after_the_lease()) == 1
    await after.drain()
    (notice,) = messenger.views(Notice)
    assert notice.to == Person(id="U1")
    assert notice.text.startswith("The bot stopped while restart_service was running")
    assert ran.count == 0
    assert await after.recover_interrupted(after_the_lease()) == 0
