"""Cards the policy sends away from the requester's thread, in Teams: a new post in an
approvers' channel, or each approver's 1:1 chat with the bot, with a pointer left in
the thread. Every copy decides the same call once; every copy and the pointer then
show how it ended.

Rendering is tested on its own first; then end to end over HTTP with real RS256
channel tokens, the real CloudAdapter and core, and a fake Bot Connector that also
creates conversations (``POST /v3/conversations``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from botbuilder.schema import Activity

from adapters.teams import cards, convert, links
from adapters.teams import texts as teams_texts
from adapters.teams.messenger import render
from bot import (
    ApprovalCard,
    CardPointer,
    Notice,
    Person,
    PolicyError,
    Posted,
    PromptField,
    ThreadKey,
)
from bot import texts as core_texts
from bot.chat_state import CardCopy
from bot.policy import ApprovalPolicy

from . import activities as act
from .conftest import Answer, MakeBot
from .fake_connector import ConnectorCall, Created, FakeConnector
from .refunds import ASKED, MESSAGE_TYPE, card_text, drawn, refunds_agent
from .signed import BOT_TOKEN, SignedBot, in_thread, signed_settings, token_for

APPROVERS = "19:approvers@thread.tacv2"
IN_CHANNEL = f'[tools.refund]\napprovers = ["aad-bob", "aad-carol"]\nchannel = "{APPROVERS}"\n'
BY_DM = '[tools.refund]\napprovers = ["aad-bob", "aad-carol"]\nnotify = "dm"\n'
EXPIRES = datetime(2030, 5, 17, 14, 30, tzinfo=UTC)
ALICE = Person(id="aad-alice", name="Alice")
BOB = Person(id="aad-bob", name="Bob")
ASKED_IN = ThreadKey(
    platform="teams", workspace=act.TENANT, channel=act.CHANNEL, root="1700000000123"
)
ASKED_IN_LINK = (
    "https://teams.microsoft.com/l/message/19:ops-channel@thread.tacv2/1700000000123"
    "?tenantId=tenant-1&parentMessageId=1700000000123"
)


def approval(**kw: Any) -> ApprovalCard:
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "tool_call_id": "call-1",
        "tool_name": "refund",
        "args": {"order": "A-1001"},
        "agent_path": ("billing",),
        "requester": ALICE,
        "expires_at": EXPIRES,
        "ask": "call-1@1",
    }
    return ApprovalCard(**{**fields, **kw})


# -- places and deep links ----------------------------------------------------------


@pytest.mark.parametrize(
    ("channel", "known"),
    [
        (APPROVERS, True),
        ("19:0f2a7c@thread.skype", True),
        ("19:meeting_abc@thread.v2", True),
        ("C0APPROVERS", False),
        ("#approvers", False),
        ("19:ops@thread.tacv2;messageid=1", False),
        ("a:personal-chat", False),
        ("19:alice_bob@unq.gbl.spaces", False),
        ("", False),
    ],
)
def test_teams_channels_and_group_chats_are_known_by_the_shape_of_their_id(
    channel: str, known: bool
) -> None:
    assert (links.is_channel_id(channel) or links.is_chat_id(channel)) is known


def test_a_channel_thread_and_a_group_chat_have_deep_links_a_personal_chat_has_none() -> None:
    assert links.thread_link(ASKED_IN) == ASKED_IN_LINK
    chat = ThreadKey(platform="teams", workspace="t", channel=act.GROUP_CHAT, root="chat")
    assert links.thread_link(chat) == (
        "https://teams.microsoft.com/l/chat/19:group-chat@thread.v2/conversations"
    )
    personal = ThreadKey(platform="teams", workspace="t", channel=act.PERSONAL_CHAT, root="chat")
    assert links.thread_link(personal) is None
    assert links.place_markdown(personal) == "a 1:1 chat with the bot"
    odd = ThreadKey(platform="teams", workspace="t", channel="19:x)(y@thread.tacv2", root="1")
    assert "/l/message/19:x%29%28y@thread.tacv2/1?" in (links.thread_link(odd) or "")


def test_a_card_shown_away_from_its_thread_says_where_it_was_asked_with_a_link() -> None:
    requested_in = f"{core_texts.FACT_REQUESTED_IN}: [a channel thread]({ASKED_IN_LINK})"
    assert requested_in in card_text(drawn(approval(requested_in=ASKED_IN)))
    decided = approval(requested_in=ASKED_IN, status="approved", decided_by=(BOB,))
    assert requested_in in card_text(drawn(decided))
    requested = core_texts.FACT_REQUESTED_IN
    assert not any(t.startswith(requested) for t in card_text(drawn(approval())))


def test_every_button_of_a_card_carries_its_ask_and_the_click_gives_it_back() -> None:
    editable = approval(
        grant_for=("1h",), editable=True, fields=(PromptField(name="order", label="Order"),)
    )
    card = drawn(editable)
    verbs = [a["verb"] for a in act.all_actions(card) if a["type"] == "Action.Execute"]
    assert verbs == ["approve", "decline", "edit", "grant"]
    for verb in verbs:
        data = act.action_data(card, verb)
        assert data["ask"] == "call-1@1"
        sent = {**data, "field:order": "A-2"} if verb == "edit" else data
        click = convert.execute_click(invoke(sent), convert.thread_of(invoke(sent)))
        assert click is not None
        assert (click.action, click.ask) == (verb, "call-1@1")


@pytest.mark.parametrize(
    ("ask", "clicked"),
    [(None, None), ("", None), ("call-1@1", "call-1@1")],
    ids=["an old card without it", "empty", "carried"],
)
def test_a_click_without_an_ask_is_still_a_click(ask: str | None, clicked: str | None) -> None:
    data: dict[str, Any] = {
        "kind": "approval",
        "action": "approve",
        "run_id": "r",
        "tool_call_id": "c",
    }
    if ask is not None:
        data["ask"] = ask
    click = convert.execute_click(invoke(data), convert.thread_of(invoke(data)))
    assert click is not None
    assert click.ask == clicked


@pytest.mark.parametrize("ask", [1, ["a"], {"a": 1}])
def test_an_ask_that_is_not_text_is_no_click(ask: Any) -> None:
    data = {"kind": "approval", "action": "approve", "run_id": "r", "tool_call_id": "c", "ask": ask}
    assert convert.execute_click(invoke(data), convert.thread_of(invoke(data))) is None


def invoke(data: dict[str, Any]) -> Any:
    value = {"action": {"type": "Action.Execute", "verb": data.get("action"), "data": data}}
    return Activity().deserialize(
        {
            "type": "invoke",
            "name": "adaptiveCard/action",
            "id": "1",
            "channelId": "msteams",
            "serviceUrl": "https://smba.example.invalid/",
            "from": act.BOB,
            "recipient": act.BOT,
            "conversation": act.channel_conversation("1000"),
            "value": value,
        }
    )


# -- the pointer and the grant notice -----------------------------------------------


def pointer_card(pointer: CardPointer) -> dict[str, Any]:
    """The card a settled pointer is drawn as."""
    (attachment,) = render(pointer).attachments
    content: dict[str, Any] = attachment.content
    return content


def test_the_pointer_links_to_the_card_in_the_channel_then_says_how_it_ended() -> None:
    at = Posted(
        thread=ThreadKey(platform="teams", workspace=act.TENANT, channel=APPROVERS, root="42"),
        ref={"activity_id": "42", "conversation_id": f"{APPROVERS};messageid=42"},
    )
    pointer = CardPointer(card=approval(), channel=APPROVERS, at=at)
    link = (
        "https://teams.microsoft.com/l/message/19:approvers@thread.tacv2/42"
        "?tenantId=tenant-1&parentMessageId=42"
    )
    activity = render(pointer)
    waiting = f"⏳ **refund** is waiting for approval in {teams_texts.APPROVERS_CHANNEL}"
    assert (activity.type, activity.text, activity.attachments) == (
        "message",
        f"{waiting} [{core_texts.POINTER_LINK}]({link})",
        None,
    )
    # Without the card's place, no link (nor the space before it).
    assert render(CardPointer(card=approval(), channel=APPROVERS)).text == waiting
    carol = Person(id="aad-carol")
    sent = CardPointer(card=approval(), people=(BOB, carol))
    assert render(sent).text == "📨 **refund** was sent to Bob, aad-carol for approval."

    decided = approval(status="approved", decided_by=(BOB,))
    settled = pointer_card(CardPointer(card=decided, channel=APPROVERS, at=at))
    assert card_text(settled) == [
        "✅ **Approved:** **refund**",
        f"✅ Approved by Bob [{core_texts.POINTER_LINK}]({link})",
    ]


@pytest.mark.parametrize(
    ("changes", "text"),
    [
        ({"status": "approved"}, ["✅ **Approved:** **refund**", "✅ Approved by Bob"]),
        (
            {"status": "approved", "granted_for": "1h"},
            ["✅ **Approved:** **refund**", "✅ Approved by Bob for this thread (1h)"],
        ),
        ({"status": "declined"}, ["❌ **Declined:** **refund**", "❌ Declined by Bob"]),
        (
            {"status": "declined", "reason": "*no*"},
            ["❌ **Declined:** **refund**", "❌ Declined by Bob", "Reason: \\*no\\*"],
        ),
        (
            {"status": "expired", "decided_by": ()},
            ["⌛ **Expired:** **refund**", "⌛ Expired: nobody decided in time, nothing was run"],
        ),
        (
            {"status": "approved", "previous_args": {"order": "A-1", "n": 1}, "edited_by": BOB},
            [
                "✅ **Approved:** **refund**",
                "✏️ Edited by Bob: **order**: A-1 → A-1001; **n**: 1 → (none)",
                "✅ Approved by Bob",
            ],
        ),
        (
            {"status": "approved", "previous_args": {"order": "A-1001"}, "edited_by": BOB},
            ["✅ **Approved:** **refund**", "✅ Approved by Bob"],
        ),
    ],
)
def test_a_decided_pointer_says_by_whom(changes: dict[str, Any], text: list[str]) -> None:
    card = approval(**{"decided_by": (BOB,), **changes})
    assert card_text(pointer_card(CardPointer(card=card, channel=APPROVERS))) == text


def test_a_pointer_escapes_names_and_the_tool() -> None:
    card = approval(
        tool_name="re_fund", status="approved", decided_by=(Person(id="x", name="[x]"),)
    )
    settled = pointer_card(CardPointer(card=card))
    assert card_text(settled) == [r"✅ **Approved:** **re\_fund**", r"✅ Approved by \[x\]"]
    assert settled["fallbackText"] == r"re\_fund: ✅ Approved by \[x\]"
    sent = CardPointer(card=approval(tool_name="*x*"), people=(Person(id="y", name="<at>"),))
    assert render(sent).text == r"📨 **\*x\*** was sent to \<at\> for approval."


def test_a_pointer_escapes_what_an_edit_changed_and_keeps_a_huge_edit_short() -> None:
    edited = approval(
        status="approved",
        decided_by=(BOB,),
        args={"order": "*x*"},
        previous_args={"order": "[a](b)"},
        edited_by=BOB,
    )
    assert r"✏️ Edited by Bob: **order**: \[a\](b) → \*x\*" in card_text(
        pointer_card(CardPointer(card=edited))
    )
    huge = approval(
        status="approved",
        decided_by=(BOB,),
        args={f"f{i}": "b" * 10_000 for i in range(60)},
        previous_args={f"f{i}": "a" * 10_000 for i in range(60)},
        edited_by=BOB,
    )
    settled = pointer_card(CardPointer(card=huge))
    assert len(json.dumps(settled).encode()) <= cards.CARD_BUDGET_BYTES
    (line,) = [t for t in card_text(settled) if t.startswith("✏️ Edited by Bob: **f0**: aaa")]
    assert line.endswith("more")
    assert render(CardPointer(card=huge)).summary.endswith(teams_texts.TRUNCATED)


def test_a_notice_of_a_run_under_a_grant_has_an_end_grant_button() -> None:
    notice = Notice(text="`refund` ran under your grant", also=(BOB,), revoke=("run-1", "call-2"))
    activity = render(notice)
    assert activity.text == "<at>Bob</at>: `refund` ran under your grant"
    assert activity.serialize()["entities"] == [
        {"type": "mention", "text": "<at>Bob</at>", "mentioned": {"id": "aad-bob", "name": "Bob"}}
    ]
    (attachment,) = activity.attachments
    card = attachment.content
    assert card["body"] == []
    assert card["fallbackText"] == core_texts.END_GRANT
    (button,) = card["actions"]
    assert (button["type"], button["title"], button["verb"]) == (
        "Action.Execute",
        "End grant",
        "revoke",
    )
    assert button["data"] == {
        "kind": "notice",
        "action": "revoke",
        "run_id": "run-1",
        "tool_call_id": "call-2",
    }
    assert button["fallback"]["type"] == "Action.Submit"
    click = convert.execute_click(invoke(button["data"]), convert.thread_of(invoke({})))
    assert click is not None
    assert (click.action, click.run_id, click.tool_call_id, click.ask) == (
        "revoke",
        "run-1",
        "call-2",
        None,
    )
    plain = render(Notice(text="no button"))
    assert (plain.text, plain.attachments, plain.entities) == ("no button", None, None)


# -- at the HTTP edge -------------------------------------------------------------


@dataclass
class Router(SignedBot):
    """The refund bot with a routing policy, behind real Bot Framework auth."""

    ran: list[dict[str, Any]]

    async def ask_refund(self) -> str:
        """Alice asks in a new channel thread; its root."""
        root = act.next_id()
        await self.post(
            act.channel_post(self.connector.url, "refund A-1001", activity_id=root, mention=True)
        )
        await self.teams.bot.drain()
        return root

    async def press(
        self,
        posted: ConnectorCall,
        verb: str,
        *,
        conversation: dict[str, Any],
        user: dict[str, Any],
        on: dict[str, Any] | None = None,
    ) -> Answer:
        """Press a button on the card as ``user`` sees it (or on the card ``on``: one
        not refreshed yet, someone else's view)."""
        card = on or await self.seen_by(posted, user=user, conversation=conversation)
        click = act.execute(
            self.connector.url,
            card,
            verb,
            conversation=conversation,
            card_id=posted.response_id,
            user=user,
        )
        answer = await self.post(click)
        await self.teams.bot.drain()
        return answer

    async def copies(self, posted: ConnectorCall) -> tuple[CardCopy, ...]:
        """Where the core keeps the copies of the card ``posted`` is one of."""
        assert posted.card is not None
        data = posted.card["refresh"]["action"]["data"]
        place = await self.teams.bot.chat.card_of(data["run_id"], data["ask"])
        assert place is not None
        return place.copies

    def updates_of(self, posted: ConnectorCall) -> list[dict[str, Any]]:
        """What a posted message was replaced with, in order."""
        return [
            u.body
            for u in self.connector.updates()
            if u.activity_id == posted.response_id and u.conversation_id == posted.conversation_id
        ]


MakeRouter = Callable[..., Awaitable[Router]]


@pytest.fixture
async def make_router(
    make_bot: MakeBot, connector: FakeConnector, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[MakeRouter]:
    async with token_for(connector, monkeypatch) as token:

        async def make(policy: str) -> Router:
            ran: list[dict[str, Any]] = []
            teams = await make_bot(
                agent=refunds_agent(ran),
                policy=ApprovalPolicy.from_toml(policy),
                settings=signed_settings(),
            )
            return Router(teams=teams, connector=connector, token=token, ran=ran)

        yield make


def thread_of(conversation: dict[str, Any]) -> ThreadKey:
    """The thread the adapter keys an activity in ``conversation`` by."""
    activity = Activity().deserialize(
        act.message("https://smba.example.invalid/", "hi", conversation=conversation)
    )
    return convert.thread_of(activity)


def approver_thread(created: Created) -> dict[str, Any]:
    """The conversation of a post the bot created in the approvers' channel."""
    root = created.conversation_id.partition(";messageid=")[2]
    return act.channel_conversation(root, channel=APPROVERS)


def dm(created: Created) -> dict[str, Any]:
    return act.chat_conversation("personal", conv_id=created.conversation_id)


async def test_a_card_for_the_approvers_channel_is_a_new_post_there_and_decides_once(
    make_router: MakeRouter,
) -> None:
    router = await make_router(IN_CHANNEL)
    root = await router.ask_refund()
    connector = router.connector

    # A new post in the approvers' channel, on the requester's service, as the bot.
    (created,) = connector.created
    assert created.channel == APPROVERS
    assert created.parameters["isGroup"] is True
    assert created.parameters["bot"]["id"] == act.BOT["id"]
    assert created.parameters["channelData"]["tenant"] == {"id": act.TENANT}
    assert created.authorization == f"Bearer {BOT_TOKEN}"
    (card,) = connector.cards(created.conversation_id)
    assert card.card_kind == "approval"
    requested_in = (
        f"{core_texts.FACT_REQUESTED_IN}: [a channel thread](https://teams.microsoft.com/l/message/"
        f"{act.CHANNEL}/{root}?tenantId={act.TENANT}&parentMessageId={root})"
    )
    assert requested_in in card.card_text
    assert card.card is not None
    # In the approvers' channel Bob and Carol see the buttons; others the status only.
    assert "actions" not in card.card
    assert card.card["refresh"]["userIds"] == ["29:bob", "29:carol", "29:alice"]
    bobs = await router.seen_by(card, user=act.BOB, conversation=approver_thread(created))
    assert act.action_data(bobs, "approve")["ask"]

    # In the requester's thread: no card, a pointer to it.
    assert connector.cards(in_thread(root)) == []
    (pointer,) = connector.messages(in_thread(root))
    post_id = created.activity_id
    to_the_card = (
        f"[{core_texts.POINTER_LINK}](https://teams.microsoft.com/l/message/{APPROVERS}/{post_id}"
        f"?tenantId={act.TENANT}&parentMessageId={post_id})"
    )
    assert pointer.text == (
        f"⏳ **refund** is waiting for approval in {teams_texts.APPROVERS_CHANNEL} {to_the_card}"
    )

    # The copy is where clicks there come from, and the bot can post there later.
    (copy,) = await router.copies(card)
    assert copy.thread == thread_of(approver_thread(created))
    assert copy.ref == {"activity_id": post_id, "conversation_id": created.conversation_id}
    await router.teams.adapter.messenger.post(copy.thread, Notice(text="a reminder"))
    assert connector.texts(created.conversation_id) == ["a reminder"]

    answer = await router.press(
        card, "approve", conversation=approver_thread(created), user=act.BOB
    )

    assert answer.body["type"] == cards.CONTENT_TYPE
    shown = card_text(answer.body["value"])
    assert "✅ Approved by Bob" in shown
    assert requested_in in shown
    assert router.ran == [ASKED]
    (in_channel,) = router.updates_of(card)
    assert "✅ Approved by Bob" in card_text(in_channel["attachments"][0]["content"])
    (pointed,) = router.updates_of(pointer)
    assert card_text(pointed["attachments"][0]["content"]) == [
        "✅ **Approved:** **refund**",
        f"✅ Approved by Bob {to_the_card}",
    ]
    assert any("refunded 150 EUR on A-1001" in t for t in connector.texts(in_thread(root)))
    assert connector.texts(created.conversation_id) == ["a reminder"]  # the answer is not there

    again = await router.press(
        card, "approve", conversation=approver_thread(created), user=act.CAROL, on=bobs
    )  # a card not refreshed yet
    assert again.body["type"] == MESSAGE_TYPE
    assert router.ran == [ASKED]


async def test_a_decline_in_the_channel_shows_on_the_pointer_with_its_reason(
    make_router: MakeRouter,
) -> None:
    router = await make_router(IN_CHANNEL)
    root = await router.ask_refund()
    (created,) = router.connector.created
    (card,) = router.connector.cards(created.conversation_id)
    carols = await router.seen_by(card, user=act.CAROL, conversation=approver_thread(created))
    click = act.execute(
        router.connector.url,
        carols,
        "decline",
        conversation=approver_thread(created),
        card_id=card.response_id,
        user=act.CAROL,
        reason="not today",
    )
    # A button without the ask (a card from before it was carried) counts on a copy too.
    del click["value"]["action"]["data"]["ask"]
    await router.post(click)
    await router.teams.bot.drain()

    pointer, *_ = router.connector.messages(in_thread(root))
    (pointed,) = router.updates_of(pointer)
    settled = card_text(pointed["attachments"][0]["content"])
    assert settled[0] == "❌ **Declined:** **refund**"
    assert settled[1].startswith(f"❌ Declined by Carol [{core_texts.POINTER_LINK}](https://")
    assert settled[2:] == ["Reason: not today"]
    assert router.ran == []


async def test_someone_the_policy_does_not_name_cannot_decide_in_the_channel(
    make_router: MakeRouter,
) -> None:
    router = await make_router(IN_CHANNEL)
    await router.ask_refund()
    (created,) = router.connector.created
    (card,) = router.connector.cards(created.conversation_id)
    bobs = await router.seen_by(card, user=act.BOB, conversation=approver_thread(created))

    # Alice (not an approver) sees no buttons; she presses Bob's Approve.
    refused = await router.press(
        card, "approve", conversation=approver_thread(created), user=act.ALICE, on=bobs
    )

    assert refused.body["type"] == MESSAGE_TYPE
    assert router.updates_of(card) == []
    assert router.ran == []


async def test_each_approver_gets_the_card_in_their_chat_and_one_click_decides_for_all(
    make_router: MakeRouter,
) -> None:
    router = await make_router(BY_DM)
    root = await router.ask_refund()
    connector = router.connector

    to_bob, to_carol = sorted(connector.created, key=lambda c: c.members)
    assert (to_bob.members, to_carol.members) == (["aad-bob"], ["aad-carol"])
    for created in (to_bob, to_carol):
        assert created.parameters["isGroup"] is False
        assert created.parameters["tenantID"] == act.TENANT
        assert created.parameters["channelData"] == {"tenant": {"id": act.TENANT}}
        assert created.channel is None
    (bobs,) = connector.cards(to_bob.conversation_id)
    (carols,) = connector.cards(to_carol.conversation_id)
    assert bobs.body["recipient"]["id"] == "aad-bob"
    assert f"{act.CHANNEL}/{root}?" in bobs.card_text  # the link to the request
    (pointer,) = connector.messages(in_thread(root))
    assert pointer.text == "📨 **refund** was sent to aad-bob, aad-carol for approval."

    bob_copy, carol_copy = sorted(await router.copies(bobs), key=lambda c: c.thread.channel)
    assert bob_copy.thread == thread_of(dm(to_bob))
    assert bob_copy.ref == {"activity_id": bobs.response_id, "conversation_id": "a:dm-aad-bob"}
    assert carol_copy.thread == thread_of(dm(to_carol))
    await router.teams.adapter.messenger.post(carol_copy.thread, Notice(text="a reminder"))
    assert connector.texts(to_carol.conversation_id) == ["a reminder"]

    answer = await router.press(bobs, "approve", conversation=dm(to_bob), user=act.BOB)

    assert "✅ Approved by Bob" in card_text(answer.body["value"])
    assert router.ran == [ASKED]
    for posted in (bobs, carols):
        (updated,) = router.updates_of(posted)
        assert "✅ Approved by Bob" in card_text(updated["attachments"][0]["content"])
    (pointed,) = router.updates_of(pointer)
    assert card_text(pointed["attachments"][0]["content"]) == [
        "✅ **Approved:** **refund**",
        "✅ Approved by Bob",
    ]

    assert carols.card is not None
    late = await router.press(
        carols, "approve", conversation=dm(to_carol), user=act.CAROL, on=carols.card
    )  # in a chat that was not refreshed yet
    assert late.body["type"] == MESSAGE_TYPE
    assert "already approved by Bob" in late.body["value"]
    assert router.ran == [ASKED]


async def test_an_approver_the_bot_cannot_reach_is_left_out_of_the_pointer(
    make_router: MakeRouter,
) -> None:
    router = await make_router(BY_DM)
    router.connector.refuse_members.add("aad-carol")

    root = await router.ask_refund()

    (to_bob,) = router.connector.created
    assert to_bob.members == ["aad-bob"]
    (pointer,) = router.connector.messages(in_thread(root))
    assert pointer.text == "📨 **refund** was sent to aad-bob for approval."


async def test_nobody_reachable_keeps_the_card_in_the_thread(make_router: MakeRouter) -> None:
    router = await make_router(BY_DM)
    router.connector.refuse_members.update({"aad-bob", "aad-carol"})

    root = await router.ask_refund()

    assert router.connector.created == []
    (card,) = router.connector.cards(in_thread(root))
    assert card.card_kind == "approval"
    assert not any(t.startswith(core_texts.FACT_REQUESTED_IN) for t in card.card_text.split("\n"))


async def test_a_teams_policy_passes_the_start_check_and_a_slack_channel_does_not(
    make_router: MakeRouter,
) -> None:
    router = await make_router(IN_CHANNEL)
    await router.teams.bot.check_places()
    messenger = router.teams.adapter.messenger
    assert await messenger.group_members("aad-bob") is None
    assert await messenger.group_members("@oncall") is None

    slack = await make_router('[tools.refund]\nchannel = "C0APPROVERS"\n')
    with pytest.raises(PolicyError, match="C0APPROVERS"):
        await slack.teams.bot.check_places()
