"""Stop under the text before a card: it ends the run for whoever asked (or may decide
what it waits for), the card shows it stopped; anyone else is told privately."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.slack.wire import (
    APPROVE_ACTION,
    STOP_ACTION,
    decode_button_value,
    decode_stop_value,
    encode_stop_value,
)
from agents import Store
from bot import ApprovalPolicy
from tests.stores.conftest import STORE_KINDS, opened

from .conftest import StartBot
from .fake_slack import FakeSlack, Posted
from .harness import ALICE, BOB, CHANNEL, BotServer, block_actions, find_button, mention_event
from .scripted import Ran, build_agent
from .test_approvals import card_text, has_buttons


def find_buttons(blocks: list[dict[str, Any]], action_id: str) -> list[dict[str, Any]]:
    """Every button with ``action_id`` among ``blocks``."""
    return [
        element
        for block in blocks
        if block["type"] == "actions"
        for element in block["elements"]
        if element.get("action_id") == action_id
    ]


def stop_buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every Stop button among ``blocks``."""
    return find_buttons(blocks, STOP_ACTION)


def run_of(card: Posted) -> str:
    """The run a card's Approve button decides."""
    return decode_button_value(find_button(card.blocks, APPROVE_ACTION)["value"]).run


async def status_of(store: Store, run_id: str) -> str:
    """The run's status in the store."""
    snap = await store.load_run(run_id)
    assert snap is not None
    return snap.status


async def deploy_requested(bot: BotServer, slack: FakeSlack) -> tuple[Posted, Posted]:
    """Alice asks for a deploy; the message with Stop before the card, and the card."""
    event = mention_event("deploy api", user=ALICE)
    assert await bot.send_event(event) == 200
    await bot.idle()
    posted = slack.in_thread(CHANNEL, event["ts"])
    (card,) = [m for m in posted if has_buttons(m)]
    (before,) = [m for m in posted if stop_buttons(m.blocks)]
    assert posted.index(before) < posted.index(card)
    return before, card


async def test_the_text_before_a_card_offers_stop_for_its_run(
    bot: BotServer, slack: FakeSlack
) -> None:
    slack.refuse_streaming("not_allowed")
    before, card = await deploy_requested(bot, slack)
    assert before.started_with is None  # posted whole
    (stop,) = stop_buttons(before.blocks)
    assert stop["value"] == run_of(card)
    assert stop["text"]["text"] == "Stop"
    assert stop["style"] == "danger"
    assert "Nothing more runs for it" in stop["confirm"]["text"]["text"]


async def test_a_streamed_text_before_a_card_ends_with_stop(
    bot: BotServer, slack: FakeSlack
) -> None:
    before, card = await deploy_requested(bot, slack)
    assert before.started_with is not None
    (stream_end,) = [c for c in slack.of("chat.stopStream") if c.args.get("ts") == before.ts]
    (stop,) = stop_buttons(stream_end.args["blocks"])
    assert stop["value"] == run_of(card)
    card_posted = next(
        c
        for c in slack.of("chat.postMessage")
        if find_buttons(c.args.get("blocks") or [], APPROVE_ACTION)
    )
    assert slack.calls.index(stream_end) < slack.calls.index(card_posted)


async def test_a_finished_answer_offers_no_stop(bot: BotServer, slack: FakeSlack) -> None:
    event = mention_event("hello there", user=ALICE)
    assert await bot.send_event(event) == 200
    await bot.idle()
    (answer,) = slack.in_thread(CHANNEL, event["ts"])
    assert stop_buttons(answer.blocks) == []


async def test_stop_pressed_by_the_requester_stops_the_run(
    bot: BotServer, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    before, card = await deploy_requested(bot, slack)
    run_id = run_of(card)
    status, _ = await bot.interact(block_actions(before, STOP_ACTION, user=ALICE))
    assert status == 200
    await bot.idle()

    assert card.updates == 1
    assert "Stopped" in card_text(card)
    assert not has_buttons(card)
    posted = slack.in_thread(CHANNEL, card.thread_ts or "")
    (notice,) = posted[posted.index(card) + 1 :]
    assert "stopped as you asked" in notice.text
    assert await status_of(store, run_id) == "stopped"
    assert ran.deploys == []
    assert slack.of("chat.postEphemeral") == []


async def test_stop_pressed_again_says_nothing_is_left_to_stop(
    bot: BotServer, slack: FakeSlack
) -> None:
    before, _ = await deploy_requested(bot, slack)
    for _ in range(2):
        assert (await bot.interact(block_actions(before, STOP_ACTION, user=ALICE)))[0] == 200
        await bot.idle()
    (told,) = slack.of("chat.postEphemeral")
    assert told.args["user"] == ALICE
    assert "nothing to stop" in told.args["text"]


async def test_stop_pressed_by_someone_else_is_refused_privately(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    policy = ApprovalPolicy.from_toml('[tools.deploy]\napprovers = ["U0LEAD001"]\n')
    bot = await serve(build_agent(store, ran), policy=policy)
    before, card = await deploy_requested(bot, slack)
    status, _ = await bot.interact(block_actions(before, STOP_ACTION, user=BOB))
    assert status == 200
    await bot.idle()

    (told,) = slack.of("chat.postEphemeral")
    assert told.args["user"] == BOB
    assert "Only whoever asked" in told.args["text"]
    assert has_buttons(card)
    assert card.updates == 0
    assert await status_of(store, run_of(card)) == "paused"


async def test_a_stop_value_the_bot_never_issued_is_a_bad_request(
    bot: BotServer, slack: FakeSlack, store: Store
) -> None:
    before, card = await deploy_requested(bot, slack)
    for forged in ("", "not a run", '{"run": "x"}', "x" * 300):
        status, _ = await bot.interact(block_actions(before, STOP_ACTION, user=ALICE, value=forged))
        assert status == 400
    await bot.idle()
    assert await status_of(store, run_of(card)) == "paused"
    assert has_buttons(card)


def test_stop_names_a_run_started_from_an_intake_entry_on_a_cluster() -> None:
    # Such a run is named after its entry: a shard, a slash, a stream id.
    run_id = "run_inbox_6/1796000000000-0"
    assert decode_stop_value(encode_stop_value(run_id)) == run_id


@pytest.mark.parametrize("kind", STORE_KINDS)
async def test_stop_is_offered_and_the_stream_closed_on_every_store(
    kind: str, serve: StartBot, slack: FakeSlack, tmp_path: Path
) -> None:
    """On every store (a cluster's run ids name their shard group: ``.../...``) the
    streamed text before a card ends with Stop for its run, and Stop stops it."""
    async with opened(kind, tmp_path) as store:
        bot = await serve(build_agent(store, Ran()))
        before, card = await deploy_requested(bot, slack)
        run_id = run_of(card)
        assert ("/" in run_id) == (kind == "cluster")  # named after its intake entry
        (stream_end,) = [c for c in slack.of("chat.stopStream") if c.args.get("ts") == before.ts]
        (stop,) = stop_buttons(stream_end.args["blocks"])
        assert decode_stop_value(stop["value"]) == run_id
        assert await bot.press(before, STOP_ACTION, user=ALICE) == 200
        await bot.idle()
        assert await status_of(store, run_id) == "stopped"
        assert not has_buttons(card)
