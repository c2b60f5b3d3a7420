"""Telling whoever asked that someone else decided their card."""

from __future__ import annotations

from bot import Notice
from tests.agents.helpers import Counter

from .helpers import click, restart_requested


async def test_an_approval_by_someone_else_tells_the_requester_before_the_answer() -> None:
    bot, messenger, card = await restart_requested(Counter())
    await bot.on_click(click(card, user="U2"))
    await bot.drain()

    notices = [n for n in messenger.views(Notice) if n.to is not None and n.to.id == "U1"]
    assert [n.text for n in notices] == [
        "your request to run `restart_service` was approved; it runs now."
    ]
    views = [view for _, view, _ in messenger.posts]
    assert views.index(notices[0]) < len(views) - 1  # the run's answer comes after it


async def test_a_decline_with_a_reason_tells_the_requester_why() -> None:
    bot, messenger, card = await restart_requested(Counter())
    await bot.on_click(click(card, user="U2", action="decline", reason="not during the sale"))
    await bot.drain()

    (notice,) = [n for n in messenger.views(Notice) if n.to is not None and n.to.id == "U1"]
    assert notice.text == (
        "your request to run `restart_service` was declined, so it did not run. "
        "Reason: not during the sale"
    )


async def test_deciding_ones_own_request_tells_nobody() -> None:
    bot, messenger, card = await restart_requested(Counter())
    await bot.on_click(click(card, user="U1"))
    await bot.drain()
    assert not [n for n in messenger.views(Notice) if n.to is not None]
