"""``/approvals``: what waits for you, your requests, your decisions; ending grants.

The inbox is an answer only its reader sees (through the command's response URL).
Its Approve, Decline and Edit are the card's own buttons: a click there decides as
one on the card does, the card in its thread shows it, and the inbox shows what it did.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.slack.inbox import inbox_message
from adapters.slack.wire import (
    APPROVE_ACTION,
    DECLINE_ACTION,
    EDIT_ACTION,
    REVOKE_ACTION,
    decode_button_value,
    grant_action,
)
from agents import Store
from bot import ApprovalCard, Inbox, InboxDecision, Person, ThreadKey
from bot import texts as core_texts

from .conftest import StartBot
from .fake_slack import (
    BLOCKS_LIMIT,
    TEAM_ID,
    Ephemeral,
    FakeSlack,
    Posted,
    _block_problem,
    permalink,
)
from .harness import (
    ALICE,
    BOB,
    CHANNEL,
    BotServer,
    block_actions,
    button,
    ephemeral_actions,
    inbox_button,
    view_submission,
)
from .scripted import Ran
from .test_approvals import card_text, has_buttons, request, start, the_card
from .test_questions import CAROL, submission

ELSEWHERE = "C0ELSEWHERE"
"""Where Bob types ``/approvals``: any channel will do."""
APPROVED_BY_BOB = f'[tools.deploy]\napprovers = ["{BOB}"]\n'
GRANTS = '[tools.deploy]\ngrant_for = ["1h"]\n'
EXPIRES = datetime(2030, 1, 2, 3, 4, tzinfo=UTC)


def heading(template: str, **values: int) -> str:
    """A list's heading as the inbox shows it (the core's words, in bold)."""
    return f"*{template.format(**values)}*"


def shown(answer: Ephemeral | Posted) -> str:
    """Everything the reader sees in a message."""
    parts = [answer.text]
    for block in answer.blocks:
        if "text" in block:
            parts.append(block["text"]["text"])
        parts += [e["text"] for e in block.get("elements", []) if e.get("type") == "mrkdwn"]
    return "\n".join(parts)


async def ask(
    bot: BotServer, slack: FakeSlack, service: str = "api", *, thread_ts: str | None = None
) -> tuple[str, list[Posted]]:
    """Alice asks for a deploy; the thread's root and what the bot posted there for it."""
    return await request(bot, slack, f"deploy {service}", thread_ts=thread_ts)


async def approvals(
    bot: BotServer, slack: FakeSlack, text: str = "", *, user: str = BOB
) -> Ephemeral:
    """Type ``/approvals <text>`` in another channel; the answer only ``user`` sees."""
    before = len(slack.answers_to(user))
    assert await bot.command(text, user=user, channel=ELSEWHERE) == (200, "")
    await bot.idle()
    await slack.wait_for(lambda: len(slack.answers_to(user)) > before, what="the answer")
    (answer,) = slack.answers_to(user)[before:]
    assert answer.channel == ELSEWHERE
    return answer


# -- at the HTTP edge ---------------------------------------------------------------


async def test_the_inbox_lists_a_call_waiting_for_you_with_the_cards_own_buttons(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    root, posted = await ask(bot, slack)
    card = the_card(posted)

    inbox = await approvals(bot, slack)

    text = shown(inbox)
    assert heading(core_texts.INBOX_WAITING, count=1) in text
    assert "`deploy` service: api" in text
    assert f"asked by <@{ALICE}>" in text
    link = permalink(CHANNEL, root)
    assert f"requested in <#{CHANNEL}> (<{link}|open the request>)" in text
    for action in (APPROVE_ACTION, DECLINE_ACTION):
        assert inbox_button(inbox, action)["value"] == button(card, action)["value"]
    assert decode_button_value(inbox_button(inbox, APPROVE_ACTION)["value"]).ask
    assert heading(core_texts.INBOX_REQUESTED, count=0) in text
    assert core_texts.INBOX_NO_GRANTS in text
    assert card.updates == 0, "showing the inbox decides nothing"


async def test_approve_in_the_inbox_runs_the_tool_and_updates_the_card_and_the_inbox(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    root, posted = await ask(bot, slack)
    card = the_card(posted)
    inbox = await approvals(bot, slack)
    stale = ephemeral_actions(slack, inbox, APPROVE_ACTION)  # a second press, later

    status, _ = await bot.interact(ephemeral_actions(slack, inbox, APPROVE_ACTION))
    assert status == 200
    await bot.idle()

    assert len(ran.deploys) == 1
    assert f"Approved by <@{BOB}>" in card_text(card)
    assert not has_buttons(card)
    assert "Requested in" not in card_text(card), "the card in its own thread needs no link"
    assert any("deploy ok" in m.text for m in slack.in_thread(CHANNEL, root))
    assert inbox.replaced == 1, "the inbox shows what the click did"
    text = shown(inbox)
    assert f"`deploy`: ✅ Approved by <@{BOB}>" in text
    assert "Nothing waits for your decision" in text
    assert "✅ Approved `deploy` (service: api)" in text, "now among the recent decisions"
    assert not slack.of("chat.postEphemeral"), "the inbox itself answers"

    assert (await bot.interact(stale))[0] == 200
    await bot.idle()
    told = slack.answers_to(BOB)[-1]
    assert told is not inbox
    assert f"already approved by <@{BOB}>" in told.text
    assert len(ran.deploys) == 1
    assert card.updates == 1


async def test_decline_in_the_inbox_asks_a_reason_and_the_inbox_shows_it(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    _, posted = await ask(bot, slack)
    card = the_card(posted)
    inbox = await approvals(bot, slack)

    assert (await bot.interact(ephemeral_actions(slack, inbox, DECLINE_ACTION)))[0] == 200
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    view = slack.of("views.open")[0].args["view"]
    assert (await bot.interact(view_submission(view, user=BOB, reason="frozen")))[0] == 200
    await bot.idle()

    assert ran.deploys == []
    assert f"Declined by <@{BOB}>: frozen" in card_text(card)
    assert f"`deploy`: ❌ Declined by <@{BOB}>: frozen" in shown(inbox)


async def test_edit_in_the_inbox_approves_as_edited_and_the_inbox_shows_it(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    _, posted = await ask(bot, slack)
    card = the_card(posted)
    inbox = await approvals(bot, slack)
    assert inbox_button(inbox, EDIT_ACTION)["value"] == button(card, EDIT_ACTION)["value"]

    assert (await bot.interact(ephemeral_actions(slack, inbox, EDIT_ACTION)))[0] == 200
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    form = slack.of("views.open")[0].args["view"]
    assert (await bot.interact(submission(form, {"service": "web"}, user=BOB)))[0] == 200
    await bot.idle()

    assert [d["service"] for d in ran.deploys] == ["web"]
    assert f"Approved by <@{BOB}>" in card_text(card)
    assert inbox.replaced == 1
    assert f"`deploy`: ✅ Approved by <@{BOB}>" in shown(inbox)


async def test_someone_who_may_not_decide_sees_only_their_own_requests(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    await ask(bot, slack)

    alices = shown(await approvals(bot, slack, user=ALICE))
    assert "Nothing waits for your decision" in alices
    assert heading(core_texts.INBOX_REQUESTED, count=1) in alices
    assert "`deploy` service: api" in alices
    carols = shown(await approvals(bot, slack, user=CAROL))
    assert "Nothing waits for your decision" in carols
    assert core_texts.INBOX_NONE_REQUESTED in carols
    assert core_texts.INBOX_NONE_DECIDED in carols


async def test_a_refused_click_in_the_inbox_is_told_there_and_changes_nothing(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    _, posted = await ask(bot, slack)
    card = the_card(posted)
    inbox = await approvals(bot, slack)
    # Bob's inbox, its button pressed by someone the policy does not allow.
    press = ephemeral_actions(slack, inbox, APPROVE_ACTION)
    press["user"] = {"id": CAROL, "team_id": TEAM_ID}

    assert (await bot.interact(press))[0] == 200
    await bot.idle()

    assert ran.deploys == []
    assert has_buttons(card)
    told = slack.ephemerals[-1]
    assert "approver" in told.text
    assert inbox.replaced == 0


async def test_approvals_revoke_ends_the_grants_you_gave(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, GRANTS)
    root, posted = await ask(bot, slack)
    assert await bot.press(the_card(posted), grant_action(0), user=BOB) == 200
    await bot.idle()
    grants = core_texts.INBOX_GRANTS.format(count=1, revoke="`/approvals revoke`")
    assert grants in shown(await approvals(bot, slack))

    answer = await approvals(bot, slack, "revoke")

    assert answer.text == core_texts.GRANTS_GIVEN_ENDED.format(count=1)
    _, again = await ask(bot, slack, thread_ts=root)
    assert has_buttons(the_card(again)), "the next call asks again"
    assert len(ran.deploys) == 1
    nothing = await approvals(bot, slack, "revoke")
    assert nothing.text == core_texts.NO_GRANTS_GIVEN


async def test_end_grant_on_the_notice_ends_the_grant(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, GRANTS)
    root, posted = await ask(bot, slack)
    assert await bot.press(the_card(posted), grant_action(0), user=BOB) == 200
    await bot.idle()
    _, under_grant = await ask(bot, slack, thread_ts=root)
    assert len(ran.deploys) == 2, "ran under the grant"
    (notice,) = [m for m in under_grant if "under" in m.text and m.text.startswith("<@")]
    end = button(notice, REVOKE_ACTION)
    assert end["text"]["text"] == core_texts.END_GRANT

    assert (await bot.interact(block_actions(notice, REVOKE_ACTION, user=ALICE)))[0] == 200
    await bot.idle()

    said = [m.text for m in slack.in_thread(CHANNEL, root)]
    assert any("ended the grant for `deploy`" in text for text in said), said
    _, again = await ask(bot, slack, thread_ts=root)
    assert has_buttons(the_card(again)), "the next call asks again"
    assert len(ran.deploys) == 2

    assert (await bot.interact(block_actions(notice, REVOKE_ACTION, user=ALICE)))[0] == 200
    await bot.idle()
    (told,) = slack.of("chat.postEphemeral")
    assert told.args["user"] == ALICE
    assert "ended already" in told.args["text"]


async def test_an_unknown_word_after_the_command_says_how_to_use_it(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    answer = await approvals(bot, slack, "please")
    assert "`/approvals revoke`" in answer.text


async def test_many_waiting_calls_stay_within_slacks_limits(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    for n in range(12):
        await ask(bot, slack, f"svc{n}")

    inbox = await approvals(bot, slack)

    assert heading(core_texts.INBOX_WAITING, count=12) in shown(inbox)
    assert len([b for b in inbox.blocks if b["type"] == "actions"]) == 10
    assert "…and 2 more waiting for you" in shown(inbox)
    assert len(inbox.blocks) <= BLOCKS_LIMIT
    assert not slack.problems


# -- rendering ------------------------------------------------------------------------


def a_card(n: int, **extra: Any) -> ApprovalCard:
    thread = ThreadKey(platform="slack", workspace=TEAM_ID, channel=CHANNEL, root=f"{n}.0")
    fields: dict[str, Any] = {
        "run_id": f"run-{n}",
        "tool_call_id": f"call-{n}",
        "tool_name": "deploy",
        "args": {"service": "<@U0EVIL> " + "x" * 2000},
        "agent_path": ("helper",),
        "requester": Person(id=ALICE),
        "expires_at": EXPIRES,
        "ask": f"ask-{n}",
        "requested_in": thread,
    }
    return ApprovalCard(**{**fields, **extra})


@pytest.mark.parametrize("count", [0, 1, 10, 11, 200])
def test_an_inbox_of_any_size_is_one_message_slack_takes(count: int) -> None:
    decided = tuple(
        InboxDecision(
            tool_name="deploy",
            outcome="approved",
            at=EXPIRES - timedelta(minutes=n),
            args={"service": "y" * 1000},
        )
        for n in range(count)
    )
    inbox = Inbox(
        person=Person(id=BOB),
        waiting=tuple(a_card(n) for n in range(count)),
        requested=tuple(a_card(1000 + n) for n in range(count)),
        decided=decided,
        grants=count,
    )
    links = {(CHANNEL, f"{n}.0"): permalink(CHANNEL, f"{n}.0") for n in range(count)}
    message = inbox_message(inbox, links=links, note=("`deploy`: done",))

    assert message.text
    assert len(message.blocks) <= BLOCKS_LIMIT
    for block in message.blocks:
        assert _block_problem(block) is None
        assert len(block.get("text", {}).get("text", "")) <= 3000
    text = shown(Ephemeral(ELSEWHERE, BOB, "1.0", message.text, message.blocks))
    assert "<@U0EVIL>" not in text, "arguments never mention anyone"
    if count > 10:
        assert f"…and {count - 10} more waiting for you" in text
        assert "more" in text.split(heading(core_texts.INBOX_REQUESTED, count=count))[1]
    if count == 0:
        assert "Nothing waits for your decision" in text
