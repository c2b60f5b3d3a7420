"""Never, in this thread: "Decline, don't ask again here (1h)" declines a call and, for
that long, every later call of the tool in that thread, without a card."""

from __future__ import annotations

from dataclasses import replace

from bot import ApprovalCard, ChatBot, Click, Notice, texts
from bot.compose import compose
from bot.document import Button

from .helpers import OTHER_THREAD, THREAD, RecordingMessenger, message
from .test_grants import ask, grant
from .test_grants import wired as granting

POLICY = '[tools.refund]\nnever_for = ["1h"]\n'


def wired(policy: str = POLICY) -> tuple[ChatBot, RecordingMessenger, list[str]]:
    return granting(policy)


def never(card: ApprovalCard, duration: str = "1h", user: str = "U2") -> Click:
    return replace(grant(card, duration, user), action="never")


async def test_never_declines_this_call_and_later_ones_here_until_revoked() -> None:
    bot, messenger, ran = wired()
    await ask(bot, "A-1")
    (card,) = messenger.views(ApprovalCard)
    assert card.never_for == ("1h",)
    offered = [b for b in compose(card).actions if isinstance(b, Button) and b.action == "never"]
    assert [b.label for b in offered] == ["Decline, don't ask again here (1h)"]
    assert offered[0].confirm is not None

    result = await bot.on_click(never(card))
    assert result.accepted
    assert isinstance(result.card, ApprovalCard)
    assert (result.card.status, result.card.declined_for) == ("declined", "1h")
    await bot.drain()
    told = [n.text for n in messenger.views(Notice)]
    assert any("is not asked for again in this thread for 1h" in t for t in told)
    first = await bot.agent.get_run(card.run_id)
    assert "not to be asked again in this thread for 1h" in first.tool_results[-1].content

    # A later call of the tool here, by anyone, is declined without a card; the model
    # is told why, and the audit log says who declined it.
    await bot.on_message(message("A-2", user="U7"))
    await bot.drain()
    assert ran == []
    assert len(messenger.views(ApprovalCard)) == 1
    (said,) = [
        n for n in messenger.views(Notice) if n.text == texts.NEVER_RAN.format(tool="refund")
    ]
    assert [p.id for p in said.also] == ["U2"]
    audit = await bot.agent.audit(thread_id=THREAD.id)
    declined = [e for e in audit if e.event == "declined"]
    assert [(e.actor, e.tool_call_id == card.tool_call_id) for e in declined] == [
        ("U2", True),
        ("U2", False),
    ]
    assert "said not to ask again for refund in this thread" in (declined[-1].reason or "")

    # Another thread asks as usual.
    await ask(bot, "A-3", thread=OTHER_THREAD)
    assert len(messenger.views(ApprovalCard)) == 2

    # Ended from the approvals list (or "revoke" in the thread): asked again.
    ended = await bot.revoke_given(THREAD, "U2")
    assert ended == (texts.GRANTS_GIVEN_ENDED.format(count=1),)
    await ask(bot, "A-4")
    assert len(messenger.views(ApprovalCard)) == 3
    assert ran == []


async def test_revoke_in_the_thread_ends_a_standing_decline() -> None:
    bot, messenger, _ = wired()
    await ask(bot, "A-1")
    (card,) = messenger.views(ApprovalCard)
    await bot.on_click(never(card))
    await bot.drain()
    await ask(bot, "revoke")
    assert (
        "Ended 1 grant(s) or standing decline(s) in this thread" in messenger.views(Notice)[-1].text
    )
    await ask(bot, "A-2")
    assert len(messenger.views(ApprovalCard)) == 2


async def test_only_a_duration_the_policy_offers_declines_for_a_while() -> None:
    bot, messenger, _ = wired()
    await ask(bot, "A-1")
    (card,) = messenger.views(ApprovalCard)
    refused = await bot.on_click(never(card, "1d"))
    assert not refused.accepted
    assert "does not offer declining for a while" in (refused.message or "")

    plain, plain_messenger, _ = wired("[tools.refund]\n")
    await ask(plain, "A-1")
    (other,) = plain_messenger.views(ApprovalCard)
    assert other.never_for == ()
    assert not (await plain.on_click(never(other))).accepted


async def test_a_requester_who_may_not_approve_may_not_decline_for_everyone() -> None:
    bot, messenger, _ = wired('[tools.refund]\nnever_for = ["1h"]\napprovers = ["U9"]\n')
    await ask(bot, "A-1")
    (card,) = messenger.views(ApprovalCard)
    refused = await bot.on_click(never(card, user="U1"))  # their own request
    assert not refused.accepted
    assert await bot.agent.waiting_call(card.run_id, card.tool_call_id) is not None
    assert (await bot.on_click(never(card, user="U9"))).accepted
