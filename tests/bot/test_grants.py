"""Standing grants: "Approve for this thread (1h)" approves a call and, for that long,
the same tool's later calls in the thread by the same requester, without cards."""

from __future__ import annotations

from typing import Any

import pytest

from bot import ApprovalCard, ApprovalPolicy, ChatBot, Click, Notice, Person, PolicyError

from .helpers import OTHER_THREAD, THREAD, RecordingMessenger, message, refund_agent

POLICY = '[tools.refund]\ngrant_for = ["1h", "1d"]\n'


def wired(policy: str = POLICY) -> tuple[ChatBot, RecordingMessenger, list[str]]:
    ran: list[str] = []
    bot = ChatBot(refund_agent(ran), policy=ApprovalPolicy.from_toml(policy))
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    return bot, messenger, ran


def grant(card: ApprovalCard, duration: str, user: str = "U2") -> Click:
    return Click(
        thread=THREAD,
        user_id=user,
        run_id=card.run_id,
        tool_call_id=card.tool_call_id,
        action="grant",
        grant_for=duration,
    )


async def ask(bot: ChatBot, text: str, **kw: Any) -> None:
    await bot.on_message(message(text, user="U1", **kw))
    await bot.drain()


async def test_a_grant_approves_this_call_and_later_ones_here_without_cards() -> None:
    bot, messenger, ran = wired()
    await ask(bot, "A-1")
    (card,) = messenger.views(ApprovalCard)
    assert card.grant_for == ("1h", "1d")
    result = await bot.on_click(grant(card, "1h"))
    assert result.accepted
    assert isinstance(result.card, ApprovalCard)
    assert result.card.granted_for == "1h"
    await bot.drain()
    assert ran == ["A-1"]

    await ask(bot, "A-2")
    assert ran == ["A-1", "A-2"]
    assert len(messenger.views(ApprovalCard)) == 1  # no new card
    (ran_under,) = [n for n in messenger.views(Notice) if "under your grant" in n.text]
    assert ran_under.people == (Person(id="U2"),)
    audit = await bot.agent.engine.store.list_audit(thread_id=THREAD.id)
    assert [(e.event, e.actor) for e in audit][-1] == ("granted", "U2")

    # Another thread, or another requester, asks as usual.
    await ask(bot, "A-3", thread=OTHER_THREAD)
    await bot.on_message(message("A-4", user="U7"))
    await bot.drain()
    assert ran == ["A-1", "A-2"]
    assert len(messenger.views(ApprovalCard)) == 3


async def test_revoke_ends_the_threads_grants() -> None:
    bot, messenger, ran = wired()
    await ask(bot, "A-1")
    (card,) = messenger.views(ApprovalCard)
    await bot.on_click(grant(card, "1d"))
    await bot.drain()
    await ask(bot, "revoke")
    assert (
        "Ended 1 grant(s) or standing decline(s) in this thread" in messenger.views(Notice)[-1].text
    )
    await ask(bot, "A-2")
    assert ran == ["A-1"]
    assert len(messenger.views(ApprovalCard)) == 2


async def test_only_a_duration_the_policy_offers_grants() -> None:
    bot, messenger, ran = wired()
    await ask(bot, "A-1")
    (card,) = messenger.views(ApprovalCard)
    refused = await bot.on_click(grant(card, "1y"))
    assert not refused.accepted
    assert (
        refused.message == "This request can't be approved for the thread; approve it on its own."
    )
    assert ran == []


async def test_without_grant_for_a_card_offers_no_grant() -> None:
    bot, messenger, _ = wired(policy="")
    await ask(bot, "A-1")
    (card,) = messenger.views(ApprovalCard)
    assert card.grant_for == ()
    assert not (await bot.on_click(grant(card, "1h"))).accepted


def test_no_grant_with_a_quorum_or_when_the_policy_says_so() -> None:
    policy = ApprovalPolicy.from_toml(
        '[default]\ngrant_for = ["1h"]\n[tools.refund]\ngrant = false\n'
        '[tools.wipe]\nquorum = 2\napprovers = ["U2", "U3"]\n'
    )
    assert policy.rule("refund").grant_for == ()
    assert policy.rule("wipe").grant_for == ()
    assert policy.rule("other").grant_for == ("1h",)


def test_grants_asked_for_a_quorum_tool_stop_the_bot() -> None:
    with pytest.raises(PolicyError, match=r"tools\.wipe\.grant_for"):
        ApprovalPolicy.from_toml(
            '[tools.wipe]\nquorum = 2\napprovers = ["U2", "U3"]\ngrant_for = ["1h"]\n'
        )
