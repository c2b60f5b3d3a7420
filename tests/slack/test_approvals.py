"""Approval cards in Slack: approve, decline with a reason, refusals, double clicks."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from adapters.slack.blocks import BAR_COLORS
from adapters.slack.wire import APPROVE_ACTION, DECLINE_ACTION
from agents import Store
from bot import ApprovalPolicy

from .conftest import StartBot
from .fake_slack import FakeSlack, Posted
from .harness import ALICE, BOB, CHANNEL, BotServer, block_actions, mention_event, view_submission
from .scripted import Ran, build_agent


def card_text(posted: Posted) -> str:
    """Everything a person reads on a card."""
    parts = [posted.text]
    for block in posted.shown:
        if "text" in block:
            parts.append(block["text"]["text"])
        for element in block.get("elements", []):
            parts.append(element.get("text", "") if element.get("type") == "mrkdwn" else "")
    return "\n".join(parts)


def has_buttons(posted: Posted) -> bool:
    """Whether a message is an approval card still waiting (a question has other buttons)."""
    return any(
        element.get("action_id") == APPROVE_ACTION
        for block in posted.shown
        if block["type"] == "actions"
        for element in block["elements"]
    )


async def start(serve: StartBot, store: Store, ran: Ran, policy: str) -> BotServer:
    """The scripted agent under ``policy``, served over HTTP."""
    return await serve(build_agent(store, ran), policy=ApprovalPolicy.from_toml(policy))


def the_card(posted: list[Posted]) -> Posted:
    """The one waiting approval card among messages the bot posted."""
    (card,) = [m for m in posted if has_buttons(m)]
    return card


async def request(
    bot: BotServer, slack: FakeSlack, text: str, *, user: str = ALICE, thread_ts: str | None = None
) -> tuple[str, list[Posted]]:
    """Mention the bot with ``text`` (in a new thread, or in ``thread_ts``); the thread's
    root and the messages the bot posted there for it."""
    event = mention_event(text, user=user, thread_ts=thread_ts)
    root = thread_ts or str(event["ts"])
    before = len(slack.in_thread(CHANNEL, root))
    assert await bot.send_event(event) == 200
    await bot.idle()
    return root, slack.in_thread(CHANNEL, root)[before:]


async def ask_for_deploy(bot: BotServer, slack: FakeSlack, service: str = "api") -> Posted:
    """Mention the bot with a deploy request; return the card it posts."""
    root = mention_event(f"deploy {service}")
    assert await bot.send_event(root) == 200
    await slack.wait_for(lambda: any(has_buttons(m) for m in slack.messages.values()), what="card")
    card = next(m for m in slack.messages.values() if has_buttons(m))
    assert card.thread_ts == root["ts"]
    return card


async def test_approve_updates_the_card_and_posts_the_answer(
    bot: BotServer, slack: FakeSlack, ran: Ran
) -> None:
    card = await ask_for_deploy(bot, slack)
    text = card_text(card)
    assert "deploy" in text
    assert '"service": "api"' in text
    assert f"<@{ALICE}>" in text
    assert "helper" in text
    assert "<!date^" in text
    approve = next(
        e
        for b in card.shown
        for e in b.get("elements", [])
        if e.get("text", {}).get("text") == "Approve"
    )
    assert approve["style"] == "primary"
    assert "confirm" in approve
    assert json.loads(approve["value"]).keys() == {"run", "call", "ask"}

    assert await bot.press(card, APPROVE_ACTION, user=BOB) == 200
    await bot.idle()

    assert card.updates == 1
    assert not has_buttons(card)
    assert f"Approved by <@{BOB}>" in card_text(card)
    assert card.blocks[0]["text"]["text"] == "✅ *Approved:* `deploy`"
    assert card.colors == [BAR_COLORS["done"]]
    assert "Approval needed" not in card_text(card)
    assert ran.deploys == [{"service": "api", "call": ran.deploys[0]["call"]}]
    answers = [m.text for m in slack.in_thread(CHANNEL, card.thread_ts or "")]
    assert any("deploy ok" in a for a in answers)


async def test_decline_opens_a_modal_and_its_reason_reaches_card_and_agent(
    bot: BotServer, slack: FakeSlack, ran: Ran
) -> None:
    card = await ask_for_deploy(bot, slack)
    assert await bot.press(card, DECLINE_ACTION, user=BOB) == 200
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    opened = slack.of("views.open")[0].args
    assert opened["trigger_id"].startswith("trigger-")
    assert card.updates == 0, "opening the modal decides nothing"

    status, _ = await bot.interact(
        view_submission(opened["view"], user=BOB, reason="not on a Friday")
    )
    assert status == 200
    await bot.idle()

    assert f"Declined by <@{BOB}>: not on a Friday" in card_text(card)
    assert card.blocks[0]["text"]["text"] == "❌ *Declined:* `deploy`"
    assert card.colors == [BAR_COLORS["refused"]]
    assert not has_buttons(card)
    assert ran.deploys == []
    answers = " ".join(m.text for m in slack.in_thread(CHANNEL, card.thread_ts or ""))
    assert "deploy failed" in answers
    assert "not on a Friday" in answers


async def test_double_click_makes_one_decision_and_tells_the_second_clicker(
    bot: BotServer, slack: FakeSlack, ran: Ran
) -> None:
    card = await ask_for_deploy(bot, slack)
    payload = block_actions(card, APPROVE_ACTION, user=BOB)
    await bot.interact(payload)
    await bot.interact({**payload, "user": {"id": ALICE, "team_id": "T0TEAM001"}})
    await bot.idle()

    assert len(ran.deploys) == 1
    assert card.updates == 1
    ephemeral = slack.of("chat.postEphemeral")
    assert len(ephemeral) == 1
    assert ephemeral[0].args["user"] == ALICE
    assert f"already approved by <@{BOB}>" in ephemeral[0].args["text"]


async def test_an_unauthorized_click_is_told_privately_and_changes_nothing(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    policy = ApprovalPolicy.from_toml('[tools.deploy]\napprovers = ["U0LEAD001"]\n')
    bot = await serve(build_agent(store, ran), policy=policy)
    card = await ask_for_deploy(bot, slack)
    assert await bot.press(card, APPROVE_ACTION, user=BOB) == 200
    await bot.idle()

    assert card.updates == 0
    assert has_buttons(card)
    assert ran.deploys == []
    (ephemeral,) = slack.of("chat.postEphemeral")
    assert ephemeral.args["user"] == BOB
    assert ephemeral.args["channel"] == CHANNEL
    assert "not one of the approvers" in ephemeral.args["text"]


async def test_decline_by_someone_not_allowed_is_refused_before_the_reason_dialog(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    policy = ApprovalPolicy.from_toml('[tools.deploy]\napprovers = ["U0LEAD001"]\n')
    bot = await serve(build_agent(store, ran), policy=policy)
    card = await ask_for_deploy(bot, slack)
    assert await bot.press(card, DECLINE_ACTION, user=BOB) == 200
    await bot.idle()

    assert slack.of("views.open") == []
    (ephemeral,) = slack.of("chat.postEphemeral")
    assert ephemeral.args["user"] == BOB
    assert "not one of the approvers" in ephemeral.args["text"]
    assert has_buttons(card)
    # On record as a refused approve is: who, through what, and why.
    (refused,) = [e for e in await store.list_audit() if e.event == "refused"]
    assert (refused.actor, refused.via, refused.tool_name) == (BOB, "slack", "deploy")
    assert "not one of the approvers" in (refused.reason or "")


async def test_an_expired_card_says_so_tells_the_requester_and_refuses_clicks(
    bot: BotServer, slack: FakeSlack, ran: Ran
) -> None:
    card = await ask_for_deploy(bot, slack)
    late = block_actions(card, APPROVE_ACTION, user=BOB)
    assert await bot.bot.sweep_expired(datetime.now(UTC) + timedelta(days=2)) == 1
    await bot.idle()
    assert not has_buttons(card)
    assert "Expired" in card_text(card)
    assert card.blocks[0]["text"]["text"] == "⌛ *Expired:* `deploy`"
    assert card.colors == [BAR_COLORS["void"]]
    assert card.text.startswith("deploy: ⌛ Expired"), "the notification says so too"
    notices = [m.text for m in slack.in_thread(CHANNEL, card.thread_ts or "")]
    assert any(t.startswith(f"<@{ALICE}>: nobody decided") for t in notices)

    await bot.interact(late)
    await bot.idle()
    (ephemeral,) = slack.of("chat.postEphemeral")
    assert "expired" in ephemeral.args["text"]
    assert ran.deploys == []
    assert card.updates == 1


async def test_a_quorum_of_two_shows_the_first_approval_then_approves_with_both(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    carol = "U0CAROL01"
    policy = ApprovalPolicy.from_toml(
        f'[tools.deploy]\napprovers = ["{BOB}", "{carol}", "U0DAVE001"]\nquorum = 2\n'
    )
    bot = await serve(build_agent(store, ran), policy=policy)
    card = await ask_for_deploy(bot, slack)
    assert "*Approvals:* none yet (0 of 2)" in card_text(card)

    assert await bot.press(card, APPROVE_ACTION, user=BOB) == 200
    await bot.idle()
    (first,) = slack.of("chat.update")
    shown = Posted(CHANNEL, card.ts, None, first.args["text"], first.args["blocks"])
    assert f"*Approvals:* <@{BOB}> (1 of 2)" in card_text(shown)
    assert has_buttons(shown), "still waiting for a second approver"
    assert first.args["attachments"] == [], "no colour until settled"
    assert not card.colors
    assert ran.deploys == []

    assert await bot.press(card, APPROVE_ACTION, user=BOB) == 200
    await bot.idle()
    (ephemeral,) = slack.of("chat.postEphemeral")
    assert ephemeral.args["user"] == BOB
    assert ephemeral.args["text"] == "You already approved; waiting for 1 more."
    assert card.updates == 1

    assert await bot.press(card, APPROVE_ACTION, user=carol) == 200
    await bot.idle()
    assert card.updates == 2
    assert not has_buttons(card)
    assert f"Approved by <@{BOB}>, <@{carol}>" in card_text(card)
    assert card.colors == [BAR_COLORS["done"]]
    assert "Approvals:" not in card_text(card)
    assert len(ran.deploys) == 1
    answers = [m.text for m in slack.in_thread(CHANNEL, card.thread_ts or "")]
    assert any("deploy ok" in a for a in answers)
