"""The Teams command ``approvals``: in a 1:1 chat with the bot, a card of what waits for
you (with Approve and Decline that decide as the card in its thread does), your own
requests, your recent decisions and your grants; ``approvals revoke`` ends the grants
you gave. Elsewhere the bot says the list is private. Never a request for the agent.

The card is rendered on its own first; then end to end over HTTP with real RS256
channel tokens, the real CloudAdapter and core, and a fake Bot Connector.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.teams import cards, inbox
from adapters.teams import texts as teams_texts
from bot import ApprovalCard, Inbox, InboxDecision, Person, ThreadKey
from bot import texts as core_texts
from bot.policy import ApprovalPolicy

from . import activities as act
from .conftest import Answer, MakeBot
from .fake_connector import ConnectorCall, FakeConnector
from .refunds import ASKED, card_text, refunds_agent
from .signed import Posted, signed_settings, token_for
from .test_grants import Till, press_grant

BOB_ONLY = '[tools.refund]\napprovers = ["aad-bob"]\n'
WITH_GRANTS = '[tools.refund]\napprovers = ["aad-bob"]\ngrant_for = ["1h"]\n'
EXPIRES = datetime(2030, 5, 17, 14, 30, tzinfo=UTC)
ALICE = Person(id="aad-alice", name="Alice")
BOB = Person(id="aad-bob", name="Bob")
ASKED_IN = ThreadKey(platform="teams", workspace=act.TENANT, channel=act.CHANNEL, root="17000")
REVOKE = "**approvals revoke**"
"""How the list names the command that ends one's grants."""


def waiting(n: int = 1, **kw: Any) -> ApprovalCard:
    fields: dict[str, Any] = {
        "run_id": f"run-{n}",
        "tool_call_id": f"call-{n}",
        "tool_name": "refund",
        "args": {"order": f"A-{n}", "amount": 150},
        "agent_path": ("billing",),
        "requester": ALICE,
        "expires_at": EXPIRES,
        "ask": f"call-{n}@1",
        "requested_in": ASKED_IN,
    }
    return ApprovalCard(**{**fields, **kw})


def texts(card: dict[str, Any]) -> list[str]:
    """Every TextBlock and fact of a card, containers' too, as people read them."""
    out: list[str] = []

    def walk(elements: list[dict[str, Any]]) -> None:
        for element in elements:
            if element["type"] == "TextBlock":
                out.append(element["text"])
            elif element["type"] == "FactSet":
                out.extend(f"{f['title']}: {f['value']}" for f in element["facts"])
            elif element["type"] == "Container":
                walk(element["items"])

    walk(card["body"])
    return out


def buttons(card: dict[str, Any]) -> list[dict[str, Any]]:
    """The Action.Execute buttons of the card's action sets, in order."""
    found: list[dict[str, Any]] = []

    def walk(elements: list[dict[str, Any]]) -> None:
        for element in elements:
            if element["type"] == "ActionSet":
                found.extend(a for a in element["actions"] if a["type"] == "Action.Execute")
            elif element["type"] == "Container":
                walk(element["items"])

    walk(card["body"])
    return found


# -- the card -----------------------------------------------------------------------


def test_the_inbox_lists_each_waiting_call_with_buttons_that_carry_a_cards_data() -> None:
    shown = inbox.inbox_card(Inbox(person=BOB, waiting=(waiting(),)))
    assert shown["type"] == "AdaptiveCard"
    assert shown["version"] == "1.5"
    lines = texts(shown)
    assert lines[:3] == [
        f"**{core_texts.INBOX_TITLE}**",
        "Waiting for you (1)",
        "**refund** order: A-1, amount: 150",
    ]
    assert lines[3].startswith("asked by Alice · requested in [a channel thread](https://")
    assert " · expires {{DATE(2030-05-17T14:30:00Z, SHORT)}} " in lines[3]
    assert shown["fallbackText"] == "Your approvals: 1 waiting for you, 0 of your requests waiting"
    approve, decline = buttons(shown)
    assert (approve["title"], approve["verb"], decline["title"], decline["verb"]) == (
        "Approve",
        "approve",
        "Decline",
        "decline",
    )
    for button in (approve, decline):
        assert button["data"] == {
            "kind": "approval",
            "action": button["verb"],
            "run_id": "run-1",
            "tool_call_id": "call-1",
            "ask": "call-1@1",
            "shown_in": "inbox",
        }
        assert button["associatedInputs"] == "none"
        assert button["fallback"]["data"] == button["data"]


def test_an_empty_inbox_says_so_in_each_part() -> None:
    lines = texts(inbox.inbox_card(Inbox(person=BOB)))
    for empty in (
        core_texts.INBOX_NONE_WAITING,
        core_texts.INBOX_NONE_REQUESTED,
        core_texts.INBOX_NONE_DECIDED,
        core_texts.INBOX_NO_GRANTS,
    ):
        assert empty in lines
    assert buttons(inbox.inbox_card(Inbox(person=BOB))) == []


def test_requests_decisions_and_grants_have_their_parts() -> None:
    decided = (
        InboxDecision(tool_name="refund", outcome="approved", at=EXPIRES, args={"order": "A-9"}),
        InboxDecision(tool_name="wipe_disk", outcome="declined", at=EXPIRES, args={}),
    )
    shown = inbox.inbox_card(Inbox(person=BOB, requested=(waiting(2),), decided=decided, grants=2))
    lines = texts(shown)
    assert "Your requests (1)" in lines
    at = "{{DATE(2030-05-17T14:30:00Z, SHORT)}} {{TIME(2030-05-17T14:30:00Z)}}"
    requested = lines.index("**refund** order: A-2, amount: 150")
    assert lines[requested + 1].endswith(f"expires {at}")
    decisions = lines.index(core_texts.INBOX_DECIDED)
    assert [line.rstrip() for line in lines[decisions + 1 : decisions + 5]] == [
        "✅ Approved **refund** (order: A-9)",
        at,
        r"❌ Declined **wipe\_disk**",
        at,
    ]
    assert core_texts.INBOX_GRANTS.format(count=2, revoke=REVOKE) in lines
    assert buttons(shown) == []  # one's own requests are not decided from here


def test_a_long_inbox_is_capped_and_huge_arguments_still_fit_a_teams_message() -> None:
    many = tuple(waiting(n, args={"blob": "x" * 5000, "n": n}) for n in range(30))
    shown = inbox.inbox_card(Inbox(person=BOB, waiting=many, requested=many))
    assert len(json.dumps(shown).encode()) <= cards.CARD_BUDGET_BYTES
    lines = texts(shown)
    assert "Waiting for you (30)" in lines
    more = [line for line in lines if line.startswith("…and ")]
    assert more[0] == core_texts.INBOX_MORE_WAITING.format(count=30 - len(buttons(shown)) // 2)
    assert 0 < len(buttons(shown)) // 2 <= inbox.MAX_WAITING


def test_people_and_tools_cannot_add_markup_to_the_inbox() -> None:
    card = waiting(tool_name="re_fund", requester=Person(id="x", name="[Eve](https://evil)"))
    lines = texts(inbox.inbox_card(Inbox(person=BOB, waiting=(card,))))
    assert r"**re\_fund** order: A-1, amount: 150" in lines
    assert any(line.startswith(r"asked by \[Eve\](https://evil) · ") for line in lines)


# -- at the HTTP edge ---------------------------------------------------------------


def personal(user: dict[str, Any]) -> dict[str, Any]:
    """The user's 1:1 chat with the bot."""
    return act.chat_conversation("personal", conv_id=f"a:personal-chat-with-{user['name']}")


@dataclass
class Desk(Till):
    """The refund bot, and people who ask it for their approvals."""

    async def command(
        self,
        text: str,
        *,
        user: dict[str, Any] = act.BOB,
        conversation: dict[str, Any] | None = None,
        mention: bool = False,
    ) -> list[ConnectorCall]:
        """Send ``text``; what the bot posted in that conversation for it."""
        conversation = conversation or personal(user)
        before = len(self.connector.messages(conversation["id"]))
        await self.post(
            act.message(
                self.connector.url, text, conversation=conversation, user=user, mention=mention
            )
        )
        await self.teams.bot.drain()
        return self.connector.messages(conversation["id"])[before:]

    async def inbox_of(self, user: dict[str, Any] = act.BOB) -> ConnectorCall:
        (answer,) = await self.command("approvals", user=user)
        assert answer.card is not None, answer
        return answer

    async def press_in(
        self, shown: ConnectorCall, verb: str, *, user: dict[str, Any] = act.BOB, n: int = 0
    ) -> Answer:
        """Press the ``n``-th item's ``verb`` in an inbox card, in the user's chat."""
        assert shown.card is not None
        (button,) = [b for b in buttons(shown.card) if b["verb"] == verb][n : n + 1]
        click = act.execute(
            self.connector.url,
            {"actions": [button]},
            verb,
            conversation=personal(user),
            card_id=shown.response_id,
            user=user,
        )
        answer = await self.post(click)
        await self.teams.bot.drain()
        return answer


MakeDesk = Callable[..., Awaitable[Desk]]


@pytest.fixture
async def make_desk(
    make_bot: MakeBot, connector: FakeConnector, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[MakeDesk]:
    async with token_for(connector, monkeypatch) as token:

        async def make(policy: str = BOB_ONLY) -> Desk:
            ran: list[dict[str, Any]] = []
            teams = await make_bot(
                agent=refunds_agent(ran),
                policy=ApprovalPolicy.from_toml(policy),
                settings=signed_settings(),
            )
            return Desk(teams=teams, connector=connector, token=token, ran=ran)

        yield make


async def test_approvals_in_a_1_1_chat_lists_the_waiting_call_and_approve_runs_it(
    make_desk: MakeDesk,
) -> None:
    desk = await make_desk()
    asked: Posted = await desk.ask_refund()

    shown = await desk.inbox_of()

    assert shown.card is not None
    lines = texts(shown.card)
    assert "Waiting for you (1)" in lines
    link = f"https://teams.microsoft.com/l/message/{act.CHANNEL}/{asked.root}?"
    asked_by = "asked by Alice · requested in [a channel thread](" + link
    assert any(line.startswith(asked_by) for line in lines)
    assert shown.activity_id is not None  # a reply to the command
    assert desk.ran == []

    answer = await desk.press_in(shown, "approve")

    assert answer.body["type"] == cards.CONTENT_TYPE
    after = texts(answer.body["value"])
    assert after[1] == "**refund**: ✅ Approved by Bob"
    assert "Waiting for you (0)" in after
    assert core_texts.INBOX_NONE_WAITING in after
    assert desk.ran == [ASKED]
    (updated,) = asked.updates()  # the card in its thread, for everyone
    assert "✅ Approved by Bob" in card_text(updated)
    assert not any(t.startswith(core_texts.FACT_REQUESTED_IN) for t in card_text(updated))
    assert any("refunded 150 EUR on A-1001" in t for t in asked.texts())

    again = await desk.press_in(shown, "approve")
    assert "already approved by Bob" in texts(again.body["value"])[1]
    assert desk.ran == [ASKED]

    decided = texts((await desk.inbox_of()).card or {})
    assert any(line.startswith("✅ Approved **refund** (order: A-1001") for line in decided)


async def test_decline_from_the_inbox_declines_the_card_in_its_thread(
    make_desk: MakeDesk,
) -> None:
    desk = await make_desk()
    asked = await desk.ask_refund()

    answer = await desk.press_in(await desk.inbox_of(), "decline")

    assert texts(answer.body["value"])[1] == "**refund**: ❌ Declined by Bob"
    (updated,) = asked.updates()
    assert "❌ Declined by Bob" in card_text(updated)
    assert desk.ran == []


async def test_the_requester_sees_their_request_and_someone_else_nothing(
    make_desk: MakeDesk,
) -> None:
    desk = await make_desk()
    await desk.ask_refund()

    alices = texts((await desk.inbox_of(act.ALICE)).card or {})
    assert core_texts.INBOX_NONE_WAITING in alices
    assert "Your requests (1)" in alices

    carols = await desk.inbox_of(act.CAROL)
    assert carols.card is not None
    assert core_texts.INBOX_NONE_WAITING in texts(carols.card)
    assert buttons(carols.card) == []


async def test_an_old_inbox_button_is_refused_and_the_clicker_told_why(
    make_desk: MakeDesk,
) -> None:
    desk = await make_desk()
    asked = await desk.ask_refund()
    shown = await desk.inbox_of()
    await asked.press("decline")

    answer = await desk.press_in(shown, "approve")

    assert "already declined by Bob" in texts(answer.body["value"])[1]
    assert desk.ran == []


@pytest.mark.parametrize(
    ("text", "mention"),
    [("approvals", False), ("/approvals", False), ("Approvals", True), ("approvals  REVOKE", True)],
)
async def test_the_command_in_a_1_1_chat_never_reaches_the_agent(
    make_desk: MakeDesk, text: str, mention: bool
) -> None:
    desk = await make_desk()

    (answer,) = await desk.command(text, mention=mention)

    assert answer.card is None or answer.card_kind != "approval"
    assert desk.ran == []
    assert desk.connector.cards(kind="approval") == []  # the agent asked for nothing


@pytest.mark.parametrize("where", ["channel", "group chat"])
async def test_in_a_channel_or_group_chat_the_list_is_private(
    make_desk: MakeDesk, where: str
) -> None:
    desk = await make_desk()
    await desk.ask_refund()
    conversation = (
        act.channel_conversation(act.next_id())
        if where == "channel"
        else act.chat_conversation("groupChat")
    )

    said = await desk.command("approvals", conversation=conversation, mention=True)

    assert [(c.card, c.text) for c in said] == [(None, teams_texts.APPROVALS_PRIVATE)]
    assert len(desk.connector.cards(kind="approval")) == 1  # only the one asked for


async def test_approvals_revoke_ends_the_grants_you_gave_and_the_next_call_asks_again(
    make_desk: MakeDesk,
) -> None:
    desk = await make_desk(WITH_GRANTS)
    asked = await desk.ask_refund()
    await press_grant(asked, "1h")
    granted = core_texts.INBOX_GRANTS.format(count=1, revoke=REVOKE)
    assert texts((await desk.inbox_of()).card or {})[-1] == granted

    (said,) = await desk.command("approvals revoke")

    assert said.text == core_texts.GRANTS_GIVEN_ENDED.format(count=1)
    posted = await desk.ask_in(asked.root)
    assert [c.card_kind for c in posted if c.card is not None] == ["approval"]
    assert desk.ran == [ASKED]

    (nothing,) = await desk.command("approvals revoke")
    assert nothing.text == core_texts.NO_GRANTS_GIVEN


async def test_an_inbox_button_through_the_submit_fallback_decides_and_says_so(
    make_desk: MakeDesk,
) -> None:
    desk = await make_desk()
    asked = await desk.ask_refund()
    shown = await desk.inbox_of()
    assert shown.card is not None
    (approve,) = [b for b in buttons(shown.card) if b["verb"] == "approve"]
    click = act.submit(
        desk.connector.url,
        {"actions": [approve]},
        "approve",
        conversation=personal(act.BOB),
        card_id=shown.response_id,
    )

    await desk.post(click)
    await desk.teams.bot.drain()

    assert desk.ran == [ASKED]
    (updated,) = asked.updates()
    assert "✅ Approved by Bob" in card_text(updated)
    assert desk.connector.texts(personal(act.BOB)["id"])[-1] == "**refund**: ✅ Approved by Bob"


async def test_a_reply_in_a_thread_the_bot_follows_is_the_command_there_too(
    make_desk: MakeDesk,
) -> None:
    """Without a mention, a reply in a thread the bot takes part in is for the bot (a new
    request, else): the command there says the list is private; elsewhere it is not the
    bot's business at all."""
    desk = await make_desk()
    asked = await desk.ask_refund()

    said = await desk.command(
        "approvals", user=act.ALICE, conversation=act.channel_conversation(asked.root)
    )
    assert [(c.card, c.text) for c in said] == [(None, teams_texts.APPROVALS_PRIVATE)]

    elsewhere = await desk.command(
        "approvals", user=act.ALICE, conversation=act.channel_conversation(act.next_id())
    )
    assert elsewhere == []
    assert len(desk.connector.cards(kind="approval")) == 1
