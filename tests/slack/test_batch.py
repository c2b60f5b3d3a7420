"""One card for a batch in Slack: the deploys one model turn asks for, on one card
(``batch = true``), each decided by its own buttons or all at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.wire import APPROVE_ACTION, APPROVE_ALL_ACTION, DECLINE_ALL_ACTION
from agents import Store
from bot import ApprovalPolicy, BatchCard
from bot.batches import Batches
from bot.chat_state import CardPlace
from tests.stores.conftest import DURABLE_KINDS, store_url

from .conftest import StartBot
from .fake_slack import FakeSlack, Posted
from .harness import BOB, CHANNEL, BotServer, block_actions, mention_event, replicas_on
from .scripted import Ran, build_agent
from .test_approvals import card_text, has_buttons

BATCHED = ApprovalPolicy.from_toml("[tools.deploy]\nbatch = true\n")


async def ask(bot: BotServer, slack: FakeSlack) -> tuple[str, Posted]:
    """Ask for three deploys in one turn; the one card they share."""
    root = mention_event("deploy api web worker")
    assert await bot.send_event(root) == 200
    await bot.idle()
    (card,) = [m for m in slack.in_thread(CHANNEL, root["ts"]) if has_buttons(m)]
    return root["ts"], card


def actions(card: Posted) -> list[list[tuple[str, str]]]:
    """Each actions block's buttons: (action id, label)."""
    return [
        [(e["action_id"], e["text"]["text"]) for e in block["elements"]]
        for block in card.shown
        if block["type"] == "actions"
    ]


def press(card: Posted, action_id: str, *, line: int) -> dict[str, Any]:
    """Press the ``action_id`` button of actions block ``line`` as Bob."""
    blocks = [b for b in card.shown if b["type"] == "actions"]
    (button,) = [e for e in blocks[line]["elements"] if e["action_id"] == action_id]
    return block_actions(card, action_id, user=BOB, value=button["value"])


async def test_one_card_for_three_calls_each_decided_alone_then_all(
    serve: StartBot, store: Store, slack: FakeSlack
) -> None:
    ran = Ran()
    bot = await serve(build_agent(store, ran), policy=BATCHED)
    thread, card = await ask(bot, slack)
    text = card_text(card)
    assert "Approval needed: 3 calls" in text
    for service in ("api", "web", "worker"):
        assert f"service: {service}" in text
    lines = actions(card)
    assert len(lines) == 4, "each call's own buttons, then Approve all and Decline all"
    assert [a for a, _ in lines[0]][:2] == [APPROVE_ACTION, "approval_decline"]
    assert lines[-1] == [
        (APPROVE_ALL_ACTION, "Approve all (3)"),
        (DECLINE_ALL_ACTION, "Decline all (3)"),
    ]

    assert await bot.interact(press(card, APPROVE_ACTION, line=1)) == (200, "")
    await bot.idle()
    assert [d["service"] for d in ran.deploys] == ["web"]
    assert actions(card)[-1][0] == (APPROVE_ALL_ACTION, "Approve all (2)")
    assert len(actions(card)) == 3, "the approved call has no buttons left"
    assert f"Approved by <@{BOB}>" in card_text(card)

    assert await bot.interact(press(card, APPROVE_ALL_ACTION, line=-1)) == (200, "")
    await bot.idle()
    assert sorted(d["service"] for d in ran.deploys) == ["api", "web", "worker"]
    assert not has_buttons(card)
    answers = [m.text for m in slack.in_thread(CHANNEL, thread) if "deploy ok" in m.text]
    assert len(answers) == 1, "the run goes on once, when its last call is decided"


@pytest.fixture(params=DURABLE_KINDS)
async def replicas(
    request: pytest.FixtureRequest, slack: FakeSlack, tmp_path: Path, ran: Ran
) -> AsyncIterator[list[BotServer]]:
    """Two replicas, each with its own handle on one durable store."""
    agent = partial(build_agent, ran=ran)
    async with (
        store_url(request.param, tmp_path) as url,
        replicas_on(slack, url, agent, policy=BATCHED) as bots,
    ):
        yield bots


async def test_two_calls_decided_at_once_on_two_replicas_both_show(
    replicas: list[BotServer], slack: FakeSlack, ran: Ran, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each replica redraws the card from its kept state under the card's lock: neither
    decision's line is lost to the other's redraw (each read is slowed, so without the
    lock both would read the card before either kept its line)."""
    read = Batches.of

    async def slow(self: Batches, place: CardPlace) -> BatchCard | None:
        found = await read(self, place)
        await asyncio.sleep(0.2)
        return found

    monkeypatch.setattr(Batches, "of", slow)
    a, b = replicas
    root = mention_event("deploy api web")
    assert await a.send_event(root) == 200
    await a.idle()
    (card,) = [m for m in slack.in_thread(CHANNEL, root["ts"]) if has_buttons(m)]
    first, second = press(card, APPROVE_ACTION, line=0), press(card, APPROVE_ACTION, line=1)
    answers = await asyncio.gather(a.interact(first), b.interact(second))
    assert [*answers] == [(200, ""), (200, "")]
    await a.idle()
    await b.idle()
    assert sorted(d["service"] for d in ran.deploys) == ["api", "web"]
    assert card_text(card).count(f"Approved by <@{BOB}>") == 2
    assert not has_buttons(card)
