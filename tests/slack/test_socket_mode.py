"""Socket Mode: the same events and clicks over Slack's WebSocket, acked by envelope."""

from __future__ import annotations

from adapters.slack.wire import APPROVE_ACTION
from agents import Store

from .conftest import StartBot
from .fake_slack import FakeSlack
from .harness import BOB, CHANNEL, block_actions, command_body, event_body, mention_event
from .scripted import Ran, build_agent
from .test_approvals import card_text, has_buttons


async def test_socket_mode_runs_a_whole_approval(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await serve(build_agent(store, ran), socket_mode=True)
    await slack.wait_for(lambda: bool(slack.sockets), what="the Socket Mode connection")
    assert slack.of("apps.connections.open")

    root = mention_event("deploy api")
    first = await slack.send_envelope("events_api", event_body(root))
    await slack.wait_for(lambda: first in slack.socket_acks, what="the event's ack")
    await slack.wait_for(lambda: any(has_buttons(m) for m in slack.messages.values()))
    card = next(m for m in slack.messages.values() if has_buttons(m))

    clicked = await slack.send_envelope(
        "interactive", block_actions(card, APPROVE_ACTION, user=BOB)
    )
    await slack.wait_for(lambda: clicked in slack.socket_acks, what="the click's ack")
    await slack.wait_for(lambda: card.updates == 1, what="the card update")
    await bot.idle()
    assert f"Approved by <@{BOB}>" in card_text(card)
    assert len(ran.deploys) == 1
    assert "deploy ok" in slack.in_thread(CHANNEL, root["ts"])[-1].text


async def test_socket_mode_retries_are_deduplicated(
    serve: StartBot, slack: FakeSlack, store: Store
) -> None:
    bot = await serve(build_agent(store), socket_mode=True)
    await slack.wait_for(lambda: bool(slack.sockets))
    root = mention_event("hello")
    body = event_body(root, event_id="EvSOCKET1")
    first = await slack.send_envelope("events_api", body)
    retried = await slack.send_envelope("events_api", body, retry=1)
    await slack.wait_for(lambda: {first, retried} <= slack.socket_acks.keys())
    await bot.idle()
    assert [m.text for m in slack.in_thread(CHANNEL, root["ts"])] == ["You said: hello"]


async def test_socket_mode_answers_approvals_through_its_response_url(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await serve(build_agent(store, ran), socket_mode=True)
    await slack.wait_for(lambda: bool(slack.sockets), what="the Socket Mode connection")

    sent = await slack.send_envelope("slash_commands", command_body(slack, user=BOB))
    await slack.wait_for(lambda: sent in slack.socket_acks, what="the command's ack")
    await slack.wait_for(lambda: bool(slack.answers_to(BOB)), what="the answer")
    await bot.idle()
    (answer,) = slack.answers_to(BOB)
    assert "Nothing waits for your decision" in "\n".join(
        b.get("text", {}).get("text", "") for b in answer.blocks
    )
