"""Cards the policy sends away from the requester's thread, and approvers by user group.

``channel = "C0APPROVERS"`` posts the card in the approvers' channel; ``notify = "dm"``
in each approver's direct messages. The requester's thread gets a pointer, and every
copy and the pointer show how it ended. Approvers may be a user group (``S0GROUP``,
``@oncall``); at start, a channel or a group Slack does not know stops the bot.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import SlackMessenger
from adapters.slack.blocks import BAR_COLORS, render
from adapters.slack.convert import ActionIn, parse, to_click
from adapters.slack.messenger import NO_PERMALINK_TTL
from adapters.slack.mrkdwn import mention
from adapters.slack.wire import APPROVE_ACTION, DECLINE_ACTION, EDIT_ACTION, decode_button_value
from agents import Store
from bot import (
    ApprovalCard,
    CardPointer,
    Destination,
    Notice,
    Person,
    PolicyError,
    Posted,
    Undeliverable,
)
from bot import ThreadKey as Key

from .conftest import StartBot
from .fake_slack import TEAM_ID, TOKEN, FakeSlack, Scripted, _block_problem, permalink
from .fake_slack import Posted as Message
from .harness import (
    ALICE,
    BOB,
    CHANNEL,
    BotServer,
    block_actions,
    drawn,
    mention_event,
    view_submission,
)
from .scripted import Ran
from .test_approvals import card_text, has_buttons, start
from .test_edit import prefilled
from .test_grants import EDITABLE
from .test_questions import CAROL, submission

APPROVERS = "C0APPROVERS"
GROUP = "S0GROUP"
EXPIRES = datetime(2030, 1, 2, 3, 4, tzinfo=UTC)


def origin(root: str = "1600000000.000100") -> Key:
    return Key(platform="slack", workspace=TEAM_ID, channel=CHANNEL, root=root)


def card(**extra: Any) -> ApprovalCard:
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "tool_call_id": "call-1",
        "tool_name": "deploy",
        "args": {"service": "api"},
        "agent_path": ("helper",),
        "requester": Person(id=ALICE),
        "expires_at": EXPIRES,
        "ask": "ask-1",
    }
    return ApprovalCard(**{**fields, **extra})


# -- rendering ------------------------------------------------------------------------


def test_a_card_shown_elsewhere_links_to_its_request_or_names_its_channel() -> None:
    link = permalink(CHANNEL, "1600000000.000100")
    linked = card_text(_message(drawn(card(requested_in=origin()), link=link)))
    assert f"*Requested in:* <#{CHANNEL}> (<{link}|open the request>)" in linked

    unlinked = card_text(_message(drawn(card(requested_in=origin()))))
    assert f"*Requested in:* <#{CHANNEL}>" in unlinked
    assert "open the request" not in unlinked

    dm = Key(platform="slack", workspace=TEAM_ID, channel="D0DM00001", root="1.2")
    assert "*Requested in:* a direct message" in card_text(_message(drawn(card(requested_in=dm))))
    assert "Requested in" not in card_text(_message(drawn(card())))


def test_every_card_button_carries_the_cards_ask() -> None:
    message = drawn(card(grant_for=("1h",), **EDITABLE))
    (actions,) = [b for b in message.shown if b["type"] == "actions"]
    for element in actions["elements"]:
        assert '"ask":"ask-1"' in element["value"], element["action_id"]
    assert decode_button_value(actions["elements"][0]["value"]).ask == "ask-1"


def test_a_pointer_says_where_the_card_waits_then_how_it_ended() -> None:
    at = Posted(
        thread=Key(platform="slack", workspace=TEAM_ID, channel=APPROVERS, root="5.0"),
        ref={"channel": APPROVERS, "ts": "5.0"},
    )
    link = permalink(APPROVERS, "5.0")
    waiting = drawn(CardPointer(card=card(), channel=APPROVERS, at=at), link=link)
    shown = card_text(_message(waiting))
    assert f"⏳ `deploy` is waiting for approval in <#{APPROVERS}> (<{link}|see the card>)" in shown
    assert not any(b["type"] == "actions" for b in waiting.shown), "no buttons on a pointer"

    sent = drawn(CardPointer(card=card(), people=(Person(id=BOB), Person(id=CAROL))))
    assert f"`deploy` was sent to <@{BOB}>, <@{CAROL}> for approval." in card_text(_message(sent))

    assert waiting.bar is None, "no colour while it waits, as the card"

    declined = card(status="declined", decided_by=(Person(id=BOB),), reason="not today")
    ended = drawn(CardPointer(card=declined, channel=APPROVERS), link=link)
    assert ended.blocks[0]["text"]["text"] == "❌ *Declined:* `deploy`"
    assert ended.bar is not None
    assert ended.bar.color == BAR_COLORS["refused"]
    ended_text = card_text(_message(ended))
    assert f"❌ Declined by <@{BOB}> (<{link}|see the card>)\nReason: not today" in ended_text
    assert ended.text == f"deploy: ❌ Declined by <@{BOB}>: not today"
    expired = drawn(CardPointer(card=card(status="expired")))
    assert "⌛ *Expired:* `deploy`" in card_text(_message(expired))
    assert expired.bar is not None
    assert expired.bar.color == BAR_COLORS["void"]

    (pointer,) = render(CardPointer(card=card(), channel=APPROVERS))
    assert pointer.text
    assert all(_block_problem(b) is None for b in pointer.shown)


def test_a_user_group_is_mentioned_as_one_and_a_handle_as_written() -> None:
    assert mention(Person(id=GROUP)) == f"<!subteam^{GROUP}>"
    assert mention(Person(id=BOB)) == f"<@{BOB}>"
    assert mention(Person(id="@oncall")) == "@oncall"
    (notice,) = render(Notice(text="reminder", also=(Person(id=GROUP), Person(id=BOB))))
    assert notice.text.startswith(f"<!subteam^{GROUP}>, <@{BOB}>: reminder")


def _message(message: Any) -> Message:
    return Message(APPROVERS, "1.0", None, message.text, message.shown)


def test_a_button_value_from_before_asks_still_decides_with_no_ask() -> None:
    old = '{"run":"run-1","call":"call-1"}'
    assert decode_button_value(old).ask is None
    press = {
        "type": "block_actions",
        "user": {"id": BOB},
        "team": {"id": TEAM_ID},
        "trigger_id": "t",
        "container": {"type": "message", "channel_id": CHANNEL, "message_ts": "2.0"},
        "actions": [{"action_id": APPROVE_ACTION, "value": old}],
    }
    parsed = parse(press)
    assert isinstance(parsed, ActionIn)
    click = to_click(parsed, workspace=None)
    assert (click.run_id, click.ask, click.message_ref) == (
        "run-1",
        None,
        {"channel": CHANNEL, "ts": "2.0"},
    )
    new = parse({**press, "actions": [{"action_id": APPROVE_ACTION, "value": _value("a-1")}]})
    assert isinstance(new, ActionIn)
    assert to_click(new, workspace=None).ask == "a-1"


def _value(ask: str) -> str:
    return json.dumps({"run": "run-1", "call": "call-1", "ask": ask})


# -- the messenger ----------------------------------------------------------------


@pytest.fixture
def messenger(slack: FakeSlack) -> SlackMessenger:
    """A messenger on its own client (a session per request, nothing to close)."""
    return SlackMessenger(AsyncWebClient(token=TOKEN, base_url=slack.url))


async def test_a_user_id_is_no_group_and_slack_is_not_asked(
    messenger: SlackMessenger, slack: FakeSlack
) -> None:
    for name in (BOB, "W0ENTERPRISE", "alice", "Sx"):
        assert await messenger.group_members(name) is None
    assert not slack.calls
    slack.add_group(GROUP, "oncall", [BOB, CAROL])
    assert await messenger.group_members("@OnCall") == frozenset({BOB, CAROL})
    with pytest.raises(LookupError):
        await messenger.group_members("S0MISSING")
    with pytest.raises(LookupError):
        await messenger.group_members("@missing")


async def test_posting_elsewhere_starts_a_thread_keyed_as_its_clicks_will_be(
    messenger: SlackMessenger, slack: FakeSlack
) -> None:
    near = origin()
    posted = await messenger.post_elsewhere(near, Destination(user_id=BOB), card())
    dm = slack.dm_of(BOB)
    assert posted.thread == Key(
        platform="slack", workspace=TEAM_ID, channel=dm, root=posted.ref["ts"]
    )
    assert posted.ref == {"channel": dm, "ts": posted.thread.root}
    (message,) = slack.top_level(dm)
    assert message.ts == posted.thread.root
    again = await messenger.post_elsewhere(near, Destination(user_id=BOB), card())
    assert again.thread.channel == dm
    assert len(slack.of("conversations.open")) == 1, "a direct message channel is opened once"


async def test_without_a_permalink_the_card_names_the_requests_channel(
    slack: FakeSlack,
) -> None:
    now = [0.0]
    client = AsyncWebClient(token=TOKEN, base_url=slack.url)
    messenger = SlackMessenger(client, clock=lambda: now[0])
    slack.script("chat.getPermalink", Scripted(error="message_not_found"))
    shown = card(requested_in=origin())
    posted = await messenger.post_elsewhere(origin(), Destination(channel=APPROVERS), shown)
    message = slack.messages[(APPROVERS, posted.ref["ts"])]
    assert f"*Requested in:* <#{CHANNEL}>" in card_text(message)
    assert "open the request" not in card_text(message)

    now[0] += NO_PERMALINK_TTL + 1
    await messenger.update(posted.thread, posted.ref, shown)
    assert "open the request" in card_text(message), "asked again later: there is one now"


async def test_a_card_rendered_again_soon_does_not_ask_again_for_a_missing_permalink(
    messenger: SlackMessenger, slack: FakeSlack
) -> None:
    slack.script("chat.getPermalink", Scripted(error="channel_not_found", times=100))
    shown = card(requested_in=origin())
    posted = await messenger.post_elsewhere(origin(), Destination(channel=APPROVERS), shown)

    for _ in range(3):  # votes, updates: each renders the card again
        await messenger.update(posted.thread, posted.ref, shown)

    message = slack.messages[(APPROVERS, posted.ref["ts"])]
    assert f"*Requested in:* <#{CHANNEL}>" in card_text(message)
    assert len(slack.of("chat.getPermalink")) == 1


async def test_an_unreachable_slack_is_undeliverable(slack: FakeSlack) -> None:
    await slack.stop()
    messenger = SlackMessenger(AsyncWebClient(token=TOKEN, base_url=slack.url, timeout=2))
    with pytest.raises(Undeliverable):
        await messenger.knows_channel(APPROVERS)
    with pytest.raises(Undeliverable):
        await messenger.group_members(GROUP)
    with pytest.raises(Undeliverable):
        await messenger.post_elsewhere(origin(), Destination(channel=APPROVERS), card())


# -- at the HTTP edge ---------------------------------------------------------------


async def ask(bot: BotServer, slack: FakeSlack) -> str:
    """Alice asks for a deploy in the test channel; the thread's root."""
    event = mention_event("deploy api", user=ALICE)
    assert await bot.send_event(event) == 200
    await bot.idle()
    return str(event["ts"])


def the_pointer(slack: FakeSlack, root: str) -> Message:
    """The pointer in the requester's thread (its fallback text names the tool first)."""
    (pointer,) = [m for m in slack.in_thread(CHANNEL, root) if m.text.startswith("deploy: ")]
    return pointer


def cards_in(slack: FakeSlack, channel: str) -> list[Message]:
    return [m for m in slack.top_level(channel) if "deploy" in m.text]


async def test_a_card_for_the_approvers_channel_is_decided_there_once_and_everyone_sees_how(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    slack.add_channel(APPROVERS)
    bot = await start(serve, store, ran, f'[tools.deploy]\nchannel = "{APPROVERS}"\n')
    root = await ask(bot, slack)

    (card,) = cards_in(slack, APPROVERS)
    assert has_buttons(card)
    request = permalink(CHANNEL, root)
    assert f"*Requested in:* <#{CHANNEL}> (<{request}|open the request>)" in card_text(card)
    assert not any(has_buttons(m) for m in slack.in_thread(CHANNEL, root)), "no card there"
    pointer = the_pointer(slack, root)
    assert f"waiting for approval in <#{APPROVERS}>" in card_text(pointer)
    assert permalink(APPROVERS, card.ts) in card_text(pointer), "a link to the card"
    late = block_actions(card, APPROVE_ACTION, user=CAROL)  # someone else's stale copy

    assert await bot.press(card, APPROVE_ACTION, user=BOB) == 200
    await bot.idle()

    assert len(ran.deploys) == 1
    assert not has_buttons(card)
    assert f"Approved by <@{BOB}>" in card_text(card)
    assert request in card_text(card), "the decided card still links to the request"
    assert "✅ *Approved:* `deploy`" in card_text(pointer)
    assert f"✅ Approved by <@{BOB}>" in card_text(pointer)
    assert pointer.colors == [BAR_COLORS["done"]], "the pointer turns green as the card"
    assert card.colors == [BAR_COLORS["done"]]
    assert any("deploy ok" in m.text for m in slack.in_thread(CHANNEL, root)), "answered there"
    assert not slack.in_thread(APPROVERS, card.ts), "nothing more in the approvers' channel"

    assert (await bot.interact(late))[0] == 200
    await bot.idle()
    (told,) = slack.of("chat.postEphemeral")
    assert (told.args["channel"], told.args["user"]) == (APPROVERS, CAROL)
    assert told.args["thread_ts"] == card.ts
    assert f"already approved by <@{BOB}>" in told.args["text"]
    assert len(ran.deploys) == 1
    assert card.updates == 1


async def test_edit_on_the_approvers_channel_card_approves_the_edited_call(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    slack.add_channel(APPROVERS)
    bot = await start(serve, store, ran, f'[tools.deploy]\nchannel = "{APPROVERS}"\n')
    root = await ask(bot, slack)
    (card,) = cards_in(slack, APPROVERS)

    assert await bot.press(card, EDIT_ACTION, user=BOB) == 200
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    view = slack.of("views.open")[0].args["view"]
    sent = submission(view, {**prefilled(view), "service": "web"}, user=BOB)
    assert await bot.interact(sent) == (200, "")
    await bot.idle()

    assert [d["service"] for d in ran.deploys] == ["web"]
    assert f"Approved by <@{BOB}>" in card_text(card)
    assert f"Edited by <@{BOB}>" in card_text(card)
    assert f"Approved by <@{BOB}>" in card_text(the_pointer(slack, root))
    assert not slack.of("chat.postEphemeral")


async def test_a_channel_slack_does_not_know_leaves_the_card_in_the_thread(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, '[tools.deploy]\nchannel = "C0GONE"\n')
    root = await ask(bot, slack)
    assert [c.args["channel"] for c in slack.of("conversations.info")] == ["C0GONE"]
    (card,) = [m for m in slack.in_thread(CHANNEL, root) if has_buttons(m)]
    assert "Requested in" not in card_text(card)


async def test_direct_messages_go_to_each_approver_and_one_click_decides_all_of_them(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    policy = f'[tools.deploy]\napprovers = ["{BOB}", "{CAROL}"]\nnotify = "dm"\n'
    bot = await start(serve, store, ran, policy)
    root = await ask(bot, slack)

    opened = sorted(c.args["users"] for c in slack.of("conversations.open"))
    assert opened == sorted([BOB, CAROL])
    (bobs,) = cards_in(slack, slack.dm_of(BOB))
    (carols,) = cards_in(slack, slack.dm_of(CAROL))
    request = permalink(CHANNEL, root)
    for dm in (bobs, carols):
        assert has_buttons(dm)
        assert request in card_text(dm)
    pointer = the_pointer(slack, root)
    assert f"was sent to <@{BOB}>, <@{CAROL}> for approval" in card_text(pointer)

    late = block_actions(bobs, APPROVE_ACTION, user=BOB)
    assert await bot.press(carols, APPROVE_ACTION, user=CAROL) == 200
    await bot.idle()

    assert len(ran.deploys) == 1
    for dm in (bobs, carols):
        assert not has_buttons(dm)
        assert f"Approved by <@{CAROL}>" in card_text(dm)
    assert f"Approved by <@{CAROL}>" in card_text(pointer)
    assert any("deploy ok" in m.text for m in slack.in_thread(CHANNEL, root))

    assert (await bot.interact(late))[0] == 200
    await bot.idle()
    (told,) = slack.of("chat.postEphemeral")
    assert (told.args["channel"], told.args["user"]) == (slack.dm_of(BOB), BOB)
    assert len(ran.deploys) == 1


async def test_a_decline_in_a_direct_message_shows_its_reason_everywhere(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    policy = f'[tools.deploy]\napprovers = ["{BOB}"]\nnotify = "dm"\n'
    bot = await start(serve, store, ran, policy)
    root = await ask(bot, slack)
    (dm,) = cards_in(slack, slack.dm_of(BOB))

    assert await bot.press(dm, DECLINE_ACTION, user=BOB) == 200
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    view = slack.of("views.open")[0].args["view"]
    assert (await bot.interact(view_submission(view, user=BOB, reason="frozen")))[0] == 200
    await bot.idle()

    assert ran.deploys == []
    assert f"Declined by <@{BOB}>: frozen" in card_text(dm)
    assert f"Declined by <@{BOB}>: frozen" in card_text(the_pointer(slack, root))


@pytest.mark.parametrize("name", [GROUP, "@oncall"])
async def test_a_user_groups_member_may_decide_and_anyone_else_is_refused_privately(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran, name: str
) -> None:
    slack.add_group(GROUP, "oncall", [BOB])
    bot = await start(serve, store, ran, f'[tools.deploy]\napprovers = ["{name}"]\n')
    root = await ask(bot, slack)
    (card,) = [m for m in slack.in_thread(CHANNEL, root) if has_buttons(m)]

    assert await bot.press(card, APPROVE_ACTION, user=CAROL) == 200
    await bot.idle()
    (told,) = slack.of("chat.postEphemeral")
    assert told.args["user"] == CAROL
    assert "approver" in told.args["text"]
    assert ran.deploys == []
    assert has_buttons(card)

    assert await bot.press(card, APPROVE_ACTION, user=BOB) == 200
    await bot.idle()
    assert len(ran.deploys) == 1
    assert f"Approved by <@{BOB}>" in card_text(card)

    assert [c.args["usergroup"] for c in slack.of("usergroups.users.list")][:1] == [GROUP]
    if name.startswith("@"):
        listed = slack.of("usergroups.list")
        assert listed
        assert all(c.args["include_disabled"] in ("0", "false") for c in listed)
    else:
        assert not slack.of("usergroups.list"), "a group's id needs no lookup of its handle"


async def test_a_disabled_group_is_no_group(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    slack.add_group(GROUP, "oncall", [BOB], enabled=False)
    bot = await start(serve, store, ran, '[tools.deploy]\napprovers = ["@oncall"]\n')
    with pytest.raises(PolicyError, match="@oncall"):
        await bot.bot.check_places()


async def test_user_ids_in_the_policy_are_never_looked_up(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await start(serve, store, ran, f'[tools.deploy]\napprovers = ["{BOB}"]\n')
    await bot.bot.check_places()
    root = await ask(bot, slack)
    (card,) = [m for m in slack.in_thread(CHANNEL, root) if has_buttons(m)]
    assert await bot.press(card, APPROVE_ACTION, user=BOB) == 200
    await bot.idle()
    assert len(ran.deploys) == 1
    assert not slack.of("usergroups.users.list")
    assert not slack.of("usergroups.list")


# -- at start -------------------------------------------------------------------------


async def test_the_bot_starts_when_slack_knows_every_channel_and_group(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    slack.add_channel(APPROVERS)
    slack.add_group(GROUP, "oncall", [BOB])
    policy = (
        f'[default]\napprovers = ["{GROUP}", "@oncall", "{BOB}"]\n'
        f'[tools.deploy]\nchannel = "{APPROVERS}"\n'
    )
    bot = await start(serve, store, ran, policy)
    await bot.bot.check_places()
    assert [c.args["channel"] for c in slack.of("conversations.info")] == [APPROVERS]


@pytest.mark.parametrize(
    ("policy", "named"),
    [
        ('[tools.deploy]\nchannel = "C0NOWHERE"\n', "C0NOWHERE"),
        ('[tools.deploy]\nchannel = "C0ARCHIVE"\n', "C0ARCHIVE"),
        ('[tools.deploy]\nchannel = "C0OUTSIDE"\n', "C0OUTSIDE"),
        ('[tools.deploy]\napprovers = ["@nobody"]\n', "@nobody"),
        ('[tools.deploy]\napprovers = ["S0NOGROUP"]\n', "S0NOGROUP"),
    ],
    ids=["unknown channel", "archived", "bot not a member", "unknown handle", "unknown group"],
)
async def test_a_channel_or_group_slack_does_not_know_stops_the_bot(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran, policy: str, named: str
) -> None:
    slack.add_channel("C0ARCHIVE", archived=True)
    slack.add_channel("C0OUTSIDE", member=False)
    slack.add_group(GROUP, "oncall", [BOB])
    bot = await start(serve, store, ran, policy)
    with pytest.raises(PolicyError, match=named):
        await bot.bot.check_places()
