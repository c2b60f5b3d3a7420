"""The App Home tab: each person's approvals inbox, published when they open it and
kept current as calls are asked and decided.

Its Approve, Decline and Edit are the card's own buttons: a press there decides as
one on the card does, the card in its thread shows it, and the tab shows what it
did at its top (or why it was refused: the Home is in no conversation).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import SlackMessenger, texts
from adapters.slack.convert import home_thread
from adapters.slack.inbox import home_view
from adapters.slack.wire import APPROVE_ACTION, DECLINE_ACTION, EDIT_ACTION, decode_button_value
from agents import Store
from bot import Inbox, InboxDecision, Person
from bot import texts as core_texts

from .conftest import StartBot
from .fake_slack import (
    HOME_BLOCKS_LIMIT,
    TEAM_ID,
    TOKEN,
    FakeSlack,
    HomeTab,
    Posted,
    Scripted,
    _home_problem,
    permalink,
)
from .harness import (
    ALICE,
    BOB,
    CHANNEL,
    BotServer,
    button,
    home_actions,
    home_button,
    home_opened_event,
    view_submission,
)
from .scripted import Ran
from .test_approvals import card_text, has_buttons, request, start, the_card
from .test_grants import EDITABLE
from .test_inbox import EXPIRES, a_card, heading
from .test_manifest import METHOD_SCOPES, methods_in_source
from .test_questions import CAROL, submission

DAVE = "U0DAVE001"
APPROVED_BY_BOB = f'[tools.deploy]\napprovers = ["{BOB}"]\n'
APPROVED_BY_BOB_OR_CAROL = f'[tools.deploy]\napprovers = ["{BOB}", "{CAROL}"]\n'


def home_text(home: HomeTab) -> str:
    """Everything the owner reads in their Home tab."""
    parts: list[str] = []
    for block in home.blocks:
        if "text" in block:
            parts.append(block["text"]["text"])
        parts += [e["text"] for e in block.get("elements", []) if e.get("type") == "mrkdwn"]
    return "\n".join(parts)


def has_home_buttons(home: HomeTab) -> bool:
    return any(
        e.get("action_id") == APPROVE_ACTION for b in home.blocks for e in b.get("elements", [])
    )


async def ask(bot: BotServer, slack: FakeSlack, service: str = "api") -> tuple[str, Posted]:
    """Alice asks for a deploy in the channel; the thread's root and its card."""
    root, posted = await request(bot, slack, f"deploy {service}")
    return root, the_card(posted)


async def republished(bot: BotServer, user: str, before: int) -> HomeTab:
    """``user``'s Home tab once published again after ``before`` publishes."""
    await bot.idle()
    await bot.slack.wait_for(
        lambda: bot.slack.publishes(user) > before, what=f"the Home tab of {user} again"
    )
    return bot.slack.home_of(user)


# -- opening the Home tab -------------------------------------------------------------


async def test_opening_home_shows_a_call_you_may_decide_with_the_cards_own_buttons(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    root, card = await ask(bot, slack)

    home = await bot.open_home(BOB)

    (published,) = slack.of("views.publish")
    assert published.args["user_id"] == BOB
    text = home_text(home)
    assert heading(core_texts.INBOX_WAITING, count=1) in text
    assert "`deploy` service: api" in text
    assert f"asked by <@{ALICE}>" in text
    assert f"requested in <#{CHANNEL}> (<{permalink(CHANNEL, root)}|open the request>)" in text
    for action in (APPROVE_ACTION, DECLINE_ACTION, EDIT_ACTION):
        assert home_button(home, action)["value"] == button(card, action)["value"]
    assert decode_button_value(home_button(home, APPROVE_ACTION)["value"]).ask
    assert card.updates == 0, "showing the Home tab decides nothing"


async def test_a_call_you_may_not_decide_is_not_waiting_in_your_home(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    await ask(bot, slack)

    home = await bot.open_home(CAROL)

    assert not has_home_buttons(home)
    assert "Nothing waits for your decision" in home_text(home)
    assert "`deploy`" not in home_text(home)


async def test_a_requesters_home_lists_their_waiting_request_and_where_with_a_link(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    root, _ = await ask(bot, slack)

    home = await bot.open_home(ALICE)

    text = home_text(home)
    requests = text.split(heading(core_texts.INBOX_REQUESTED, count=1))[1]
    requests = requests.split(heading(core_texts.INBOX_DECIDED))[0]
    assert "`deploy` service: api" in requests
    assert f"requested in <#{CHANNEL}> (<{permalink(CHANNEL, root)}|open the request>)" in requests
    assert not has_home_buttons(home), "Alice may not approve her own deploy here"


async def test_an_empty_home_says_so_kindly(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)

    home = await bot.open_home(CAROL)

    text = home_text(home)
    assert home.blocks[0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": core_texts.INBOX_TITLE, "emoji": True},
    }
    assert core_texts.INBOX_INTRO in text
    assert core_texts.INBOX_NONE_WAITING_KEPT in text
    assert "When an agent asks for something you may approve, it shows up here." in text
    assert core_texts.INBOX_NONE_REQUESTED in text
    assert core_texts.INBOX_NONE_DECIDED in text
    assert core_texts.INBOX_NO_GRANTS in text
    assert "Updated <!date^" in text


async def test_a_home_that_cannot_be_read_says_so(
    serve: StartBot,
    slack: FakeSlack,
    store: Store,
    ran: Ran,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)

    async def store_down(*args: object, **kwargs: object) -> Inbox:
        raise ConnectionError("the store is down")

    monkeypatch.setattr(bot.bot, "inbox", store_down)
    with caplog.at_level(logging.ERROR, logger="adapters.slack.home"):
        home = await bot.open_home(BOB)

    assert texts.INBOX_UNAVAILABLE in home_text(home)
    assert "could not read the inbox" in caplog.text


async def test_a_store_failure_noting_an_opened_home_is_logged_and_the_tab_still_shown(
    serve: StartBot,
    slack: FakeSlack,
    store: Store,
    ran: Ran,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    await ask(bot, slack)

    async def store_down(key: str, value: str, *, ttl: float) -> None:
        raise ConnectionError("the store is down")

    monkeypatch.setattr(bot.bot.chat, "set_note", store_down)
    with caplog.at_level(logging.WARNING, logger="adapters.slack.home"):
        home = await bot.open_home(BOB)

    assert heading(core_texts.INBOX_WAITING, count=1) in home_text(home)
    assert "could not note that" in caplog.text


async def test_opening_the_messages_tab_publishes_nothing(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)

    assert await bot.send_event(home_opened_event(BOB, tab="messages")) == 200
    await bot.idle()

    assert not slack.of("views.publish")


# -- deciding from the Home tab -------------------------------------------------------


async def test_approve_on_home_runs_the_tool_once_and_the_card_and_the_home_follow(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    root, card = await ask(bot, slack)
    home = await bot.open_home(BOB)
    stale = home_actions(home, APPROVE_ACTION)  # a second press, later
    before = slack.publishes(BOB)

    status, _ = await bot.interact(home_actions(home, APPROVE_ACTION))
    assert status == 200
    home = await republished(bot, BOB, before)

    assert len(ran.deploys) == 1
    assert f"Approved by <@{BOB}>" in card_text(card)
    assert not has_buttons(card)
    assert any("deploy ok" in m.text for m in slack.in_thread(CHANNEL, root))
    text = home_text(home)
    waiting = heading(core_texts.INBOX_WAITING, count=0)
    assert text.index(f"`deploy`: ✅ Approved by <@{BOB}>") < text.index(waiting), (
        "what the press did, at the top"
    )
    assert "Nothing waits for your decision" in text
    assert not has_home_buttons(home)
    assert "✅ Approved `deploy` (service: api)" in text, "now among the recent decisions"
    assert not slack.of("chat.postEphemeral"), "the Home tab itself answers"

    before = slack.publishes(BOB)
    assert (await bot.interact(stale))[0] == 200
    home = await republished(bot, BOB, before)
    assert f"already approved by <@{BOB}>" in home_text(home)
    assert len(ran.deploys) == 1
    assert card.updates == 1
    assert not slack.of("chat.postEphemeral")


async def test_decline_on_home_asks_a_reason_and_the_home_shows_the_decline(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    _, card = await ask(bot, slack)
    home = await bot.open_home(BOB)

    assert (await bot.interact(home_actions(home, DECLINE_ACTION)))[0] == 200
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    view = slack.of("views.open")[0].args["view"]
    before = slack.publishes(BOB)
    assert (await bot.interact(view_submission(view, user=BOB, reason="frozen")))[0] == 200
    home = await republished(bot, BOB, before)

    assert ran.deploys == []
    assert f"Declined by <@{BOB}>: frozen" in card_text(card)
    text = home_text(home)
    assert f"`deploy`: ❌ Declined by <@{BOB}>: frozen" in text
    assert "❌ Declined `deploy`" in text
    assert not has_home_buttons(home)


async def test_edit_on_home_approves_the_call_as_edited(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    _, card = await ask(bot, slack)
    home = await bot.open_home(BOB)

    assert (await bot.interact(home_actions(home, EDIT_ACTION)))[0] == 200
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    form = slack.of("views.open")[0].args["view"]
    before = slack.publishes(BOB)
    assert (await bot.interact(submission(form, {"service": "web"}, user=BOB)))[0] == 200
    home = await republished(bot, BOB, before)

    assert [d["service"] for d in ran.deploys] == ["web"]
    assert f"Approved by <@{BOB}>" in card_text(card)
    assert f"`deploy`: ✅ Approved by <@{BOB}>" in home_text(home)


async def test_a_press_in_home_with_a_value_the_bot_never_issued_is_told_there(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    _, card = await ask(bot, slack)
    home = await bot.open_home(BOB)
    forged = home_actions(home, APPROVE_ACTION)
    forged["actions"][0]["value"] = '{"not": "ours"}'
    before = slack.publishes(BOB)

    assert (await bot.interact(forged))[0] == 200
    home = await republished(bot, BOB, before)

    assert texts.NOT_OUR_CARD in home_text(home)
    assert has_home_buttons(home), "the call still waits"
    assert ran.deploys == []
    assert has_buttons(card)


# -- kept current -----------------------------------------------------------------


async def test_a_decision_in_the_thread_shows_again_the_homes_it_touches(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB_OR_CAROL)
    _, card = await ask(bot, slack)
    for person in (ALICE, CAROL):
        await bot.open_home(person)
    assert has_home_buttons(slack.home_of(CAROL))
    alices, carols = slack.publishes(ALICE), slack.publishes(CAROL)

    assert await bot.press(card, APPROVE_ACTION, user=BOB) == 200

    carol = await republished(bot, CAROL, carols)
    assert "Nothing waits for your decision" in home_text(carol)
    assert not has_home_buttons(carol)
    alice = await republished(bot, ALICE, alices)
    requests = home_text(alice).split(heading(core_texts.INBOX_REQUESTED, count=0))[1]
    assert core_texts.INBOX_NONE_REQUESTED in requests, "Alice's request was decided"
    assert len(ran.deploys) == 1
    assert BOB not in slack.homes, "Bob never opened his Home tab: nothing is published"
    assert DAVE not in slack.homes


async def test_a_new_call_shows_up_in_an_approvers_open_home(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    home = await bot.open_home(BOB)
    assert not has_home_buttons(home)
    before = slack.publishes(BOB)

    _, card = await ask(bot, slack)

    home = await republished(bot, BOB, before)
    assert heading(core_texts.INBOX_WAITING, count=1) in home_text(home)
    assert home_button(home, APPROVE_ACTION)["value"] == button(card, APPROVE_ACTION)["value"]


async def test_a_home_slack_refuses_is_logged_and_the_decision_stands(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    slack.script("views.publish", Scripted(error="not_enabled", times=100))
    assert await bot.send_event(home_opened_event(BOB)) == 200
    await bot.idle()
    _, card = await ask(bot, slack)

    with caplog.at_level(logging.WARNING, logger="adapters.slack.home"):
        assert await bot.press(card, APPROVE_ACTION, user=BOB) == 200
        await bot.idle()

    assert len(ran.deploys) == 1
    assert f"Approved by <@{BOB}>" in card_text(card)
    assert "Slack refused the Home tab" in caplog.text
    assert len(slack.of("views.publish")) >= 2, "opened, asked, decided: each tried"
    assert not slack.homes


async def test_many_waiting_calls_stay_within_the_home_tabs_limits(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    for n in range(23):
        await ask(bot, slack, f"svc{n}")

    home = await bot.open_home(BOB)

    text = home_text(home)
    assert heading(core_texts.INBOX_WAITING, count=23) in text
    assert len([b for b in home.blocks if b["type"] == "actions"]) == 20
    assert "…and 3 more waiting for you" in text
    assert len(home.blocks) <= HOME_BLOCKS_LIMIT


async def test_the_home_tab_calls_only_methods_the_manifest_allows(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, APPROVED_BY_BOB)
    await ask(bot, slack)
    home = await bot.open_home(BOB)
    assert (await bot.interact(home_actions(home, APPROVE_ACTION)))[0] == 200
    await bot.idle()

    called = {c.method for c in slack.calls}
    assert {"views.publish", "chat.getPermalink"} <= called
    assert called <= set(METHOD_SCOPES), called - set(METHOD_SCOPES)
    assert called <= methods_in_source() | {"auth.test"}


# -- rendering ------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 1, 20, 21, 300])
def test_a_home_of_any_size_is_one_view_slack_takes(count: int) -> None:
    decided = tuple(
        InboxDecision(
            tool_name="deploy",
            outcome="declined",
            at=EXPIRES - timedelta(minutes=n),
            args={"service": "y" * 1000},
        )
        for n in range(count)
    )
    inbox = Inbox(
        person=Person(id=BOB),
        waiting=tuple(a_card(n, **EDITABLE) for n in range(count)),
        requested=tuple(a_card(1000 + n) for n in range(count)),
        decided=decided,
        grants=count,
    )
    links = {(CHANNEL, f"{n}.0"): permalink(CHANNEL, f"{n}.0") for n in range(count)}
    view = home_view(inbox, links=links, note=("`deploy`: done",), now=datetime.now(UTC))

    assert view["type"] == "home"
    assert _home_problem(view) is None
    assert len(view["blocks"]) <= HOME_BLOCKS_LIMIT
    text = home_text(HomeTab(BOB, "V1", view))
    assert "<@U0EVIL>" not in text, "arguments never mention anyone"
    assert len([b for b in view["blocks"] if b["type"] == "actions"]) == min(count, 20)
    if count > 20:
        assert f"…and {count - 20} more waiting for you" in text
    if count == 0:
        assert "Nothing waits for your decision" in text


async def test_a_messenger_with_no_home_tab_tells_a_home_click_by_direct_message(
    slack: FakeSlack,
) -> None:
    messenger = SlackMessenger(AsyncWebClient(token=TOKEN, base_url=slack.url))

    await messenger.tell(home_thread(TEAM_ID), BOB, ("That call was decided already.",))

    (posted,) = slack.of("chat.postMessage")
    assert (posted.args["channel"], posted.args["text"]) == (BOB, "That call was decided already.")
