"""Reminders and escalations: a card left undecided pings its approvers once, then adds
the escalation's people, across replicas and restarts (the chat state hands each out once)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agents import open_store
from bot import ApprovalCard, ApprovalPolicy, ChatBot, Notice, Person, PolicyError
from tests.agents.helpers import Counter

from .helpers import RecordingMessenger, click, message, restart_agent

POLICY = """
[tools.restart_service]
approvers = ["U2", "U3"]
remind_after = "10m"
escalate_after = "1s"
escalate_to = ["U9"]
"""


async def carded(bot: ChatBot, messenger: RecordingMessenger) -> ApprovalCard:
    await bot.on_message(message("restart the api", user="U1"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)
    return card


def wired(store_url: str, ran: Counter) -> tuple[ChatBot, RecordingMessenger]:
    policy = ApprovalPolicy.from_toml(POLICY)
    bot = ChatBot(restart_agent(ran, store=open_store(store_url)), policy=policy)
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    return bot, messenger


async def test_a_reminder_pings_the_approvers_once_and_an_escalation_adds_people(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    ran = Counter()
    bot, messenger = wired(url, ran)
    other, other_messenger = wired(url, ran)  # a replica on the same store
    try:
        card = await carded(bot, messenger)
        now = datetime.now(UTC)
        assert await bot.send_reminders(now) == 0  # nothing is due yet

        # Past escalate_after (1 s): U9 is told, once, across both replicas.
        later = now + timedelta(seconds=2)
        sent = await asyncio.gather(bot.send_reminders(later), other.send_reminders(later))
        assert sorted(sent) == [0, 1]
        (escalated,) = messenger.views(Notice) + other_messenger.views(Notice)
        assert escalated.people == (Person(id="U9"),)
        assert "you may now decide it too" in escalated.text

        # U9 was not an approver; now they are.
        await asyncio.sleep(1.1)
        result = await bot.on_click(click(card, user="U9"))
        assert result.accepted
        await bot.drain()
        assert ran.count == 1

        # The reminder was due later, but the call is decided: none goes out.
        assert await bot.send_reminders(now + timedelta(minutes=11)) == 0
    finally:
        for each in (bot, other):
            await each.aclose()
            await each.agent.engine.store.close()


async def test_the_reminder_names_every_approver(tmp_path: Path) -> None:
    ran = Counter()
    bot, messenger = wired(f"sqlite:///{tmp_path / 'bot.db'}", ran)
    try:
        await carded(bot, messenger)
        now = datetime.now(UTC)
        assert await bot.send_reminders(now + timedelta(minutes=11)) == 2  # escalation too
        reminder = next(n for n in messenger.views(Notice) if "reminder" in n.text)
        assert reminder.text.startswith("reminder: `restart_service` is still waiting")
        assert {p.id for p in reminder.people} == {"U2", "U3", "U9"}
        assert await bot.send_reminders(now + timedelta(minutes=30)) == 0
    finally:
        await bot.aclose()
        await bot.agent.engine.store.close()


async def test_someone_not_yet_escalated_to_may_not_decide() -> None:
    policy = ApprovalPolicy.from_toml(POLICY.replace('"1s"', '"1h"'))
    bot = ChatBot(restart_agent(Counter()), policy=policy)
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    card = await carded(bot, messenger)
    refused = await bot.on_click(click(card, user="U9"))
    assert not refused.accepted


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        ('escalate_after = "1h"', "escalate_after: needs escalate_to"),
        ('escalate_to = ["U9"]', "escalate_to: needs escalate_after"),
    ],
)
def test_half_an_escalation_stops_the_bot(section: str, problem: str) -> None:
    with pytest.raises(PolicyError, match=problem):
        ApprovalPolicy.from_toml(f"[tools.restart_service]\n{section}\n")
