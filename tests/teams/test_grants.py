""" "Approve for this thread (1h)" on an approval card in Teams.

A grant approves the call, and the same tool's later calls in that thread by the same
requester, for a while, without new cards. Driven end to end over HTTP with real RS256
channel tokens, the real CloudAdapter and core, and a fake Bot Connector; the
``refund`` tool records every refund that really runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from botbuilder.schema import Activity

from adapters.teams import cards, convert
from adapters.teams import texts as teams_texts
from bot import ApprovalCard, Person, PromptField
from bot import texts as core_texts

from . import activities as act
from .conftest import Answer, MakeBot
from .fake_connector import ConnectorCall, FakeConnector
from .refunds import (
    ASKED,
    MESSAGE_TYPE,
    card_text,
    drawn,
    message_answer,
    refund_tills,
    top_actions,
)
from .refunds import Till as RefundTill
from .signed import Posted, in_thread

GRANTS = '[tools.refund]\ngrant_for = ["1h", "1d"]\n'
EXPIRES = datetime(2030, 5, 17, 14, 30, tzinfo=UTC)
URL = "https://smba.example.invalid/"
BOB_MENTION = {
    "type": "mention",
    "text": "<at>Bob</at>",
    "mentioned": {"id": "aad-bob", "name": "Bob"},
}
"""Bob, who granted, @mentioned by his Entra object id so that Teams notifies him."""


# -- rendering and parsing ------------------------------------------------------------


def approval(**kw: Any) -> ApprovalCard:
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "tool_call_id": "call-1",
        "tool_name": "refund",
        "args": {"order": "A-1001", "amount": 150},
        "agent_path": ("billing",),
        "requester": Person(id="aad-alice", name="Alice"),
        "expires_at": EXPIRES,
    }
    return ApprovalCard(**{**fields, **kw})


def grant_actions(card: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in card.get("actions", []) if a.get("verb") == "grant"]


def test_a_pending_card_has_one_grant_action_per_duration_sending_no_inputs() -> None:
    card = drawn(approval(grant_for=("1h", "1d")))
    assert top_actions(card) == [
        ("Action.Execute", "Approve"),
        ("Action.Execute", "Decline"),
        ("Action.Execute", "Approve for this thread (1h)"),
        ("Action.Execute", "Approve for this thread (1d)"),
    ]
    hour, day = grant_actions(card)
    assert hour["data"] == {
        "kind": "approval",
        "action": "grant",
        "grant_for": "1h",
        "run_id": "run-1",
        "tool_call_id": "call-1",
    }
    assert day["data"]["grant_for"] == "1d"
    for action in (hour, day):
        assert action["associatedInputs"] == "none"
        own = {k: v for k, v in action.items() if k not in ("type", "verb", "fallback")}
        assert action["fallback"] == {"type": "Action.Submit", **own}
        assert "refund" in action["tooltip"]


def test_a_card_without_durations_or_decided_has_no_grant_actions() -> None:
    assert grant_actions(drawn(approval())) == []
    decided = approval(
        status="approved", decided_by=(Person(id="aad-bob", name="Bob"),), grant_for=("1h",)
    )
    assert "actions" not in drawn(decided)


def test_teams_gets_at_most_six_actions_and_the_rest_under_more() -> None:
    many = ("1h", "2h", "3h")
    editable = approval(
        grant_for=many,
        never_for=("1h",),
        editable=True,
        fields=(PromptField(name="order", label="Order"),),
    )
    card = drawn(editable)
    assert [title for _, title in top_actions(card)] == [
        "Approve",
        "Decline",
        "Edit",
        "Approve for this thread (1h)",
        "Approve for this thread (2h)",
        "More…",
    ]
    (more,) = [a for a in card["actions"] if a["title"] == "More…"]
    assert [a["title"] for a in more["card"]["actions"]] == [
        "Approve for this thread (3h)",
        "Decline, don't ask again here (1h)",
    ]
    assert [a["verb"] for a in more["card"]["actions"]] == ["grant", "never"]


def test_a_card_approved_by_a_grant_says_for_how_long() -> None:
    bob = (Person(id="aad-bob", name="Bob"),)
    granted = drawn(approval(status="approved", decided_by=bob, granted_for="1h"))
    assert "✅ Approved by Bob for this thread (1h)" in card_text(granted)
    plain = drawn(approval(status="approved", decided_by=bob))
    assert "✅ Approved by Bob" in card_text(plain)


def invoke(data: dict[str, Any]) -> Activity:
    value = {"action": {"type": "Action.Execute", "verb": data.get("action"), "data": data}}
    activity: Activity = Activity().deserialize(
        {
            "type": "invoke",
            "name": "adaptiveCard/action",
            "id": "1",
            "channelId": "msteams",
            "serviceUrl": URL,
            "from": act.BOB,
            "recipient": act.BOT,
            "conversation": act.channel_conversation("1000"),
            "value": value,
        }
    )
    return activity


def grant_data(**kw: Any) -> dict[str, Any]:
    base = {"kind": "approval", "action": "grant", "run_id": "r", "tool_call_id": "c"}
    return {**base, **kw}


def test_a_grant_is_a_click_for_its_duration_on_an_approval_only() -> None:
    activity = invoke(grant_data(grant_for="1d"))
    click = convert.execute_click(activity, convert.thread_of(activity))
    assert click is not None
    assert (click.action, click.grant_for, click.run_id) == ("grant", "1d", "r")

    approve = invoke(grant_data(action="approve", grant_for="1d"))
    approved = convert.execute_click(approve, convert.thread_of(approve))
    assert approved is not None
    assert (approved.action, approved.grant_for) == ("approve", None)


@pytest.mark.parametrize(
    "data",
    [
        grant_data(),
        grant_data(grant_for=""),
        grant_data(grant_for=None),
        grant_data(grant_for=1),
        grant_data(grant_for=["1h"]),
        grant_data(kind="question", grant_for="1h"),
    ],
    ids=["without", "empty", "null", "a number", "a list", "on a question"],
)
def test_a_grant_without_a_duration_in_text_or_on_a_question_is_not_a_click(
    data: dict[str, Any],
) -> None:
    activity = invoke(data)
    assert convert.execute_click(activity, convert.thread_of(activity)) is None


# -- at the HTTP edge ---------------------------------------------------------------


@dataclass
class Till(RefundTill):
    """The refund bot of the edit tests, asked again in a thread it answered before."""

    async def ask_in(self, root: str, *, user: dict[str, Any] = act.ALICE) -> list[ConnectorCall]:
        """Ask again in the thread of ``root``; what the bot posted there for it."""
        before = len(self.connector.messages(in_thread(root)))
        await self.post(
            act.channel_post(
                self.connector.url, "refund A-1001", root=root, mention=True, user=user
            )
        )
        await self.teams.bot.drain()
        return self.connector.messages(in_thread(root))[before:]


MakeTill = Callable[..., Awaitable[Till]]


@pytest.fixture
async def make_till(
    make_bot: MakeBot, connector: FakeConnector, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[MakeTill]:
    async with refund_tills(make_bot, connector, monkeypatch, Till, policy=GRANTS) as make:
        yield make


async def press_grant(
    posted: Posted, duration: str, *, user: dict[str, Any] = act.BOB, submit: bool = False
) -> Answer:
    """Press "Approve for this thread (<duration>)" (or its Action.Submit fallback) on the
    card as ``user`` sees it (unless ``posted`` is someone's view already)."""
    if posted.shown is None:
        posted = await posted.seen_by(user)
    (action,) = [a for a in grant_actions(posted.card) if a["data"]["grant_for"] == duration]
    kind = act.submit if submit else act.execute
    click = kind(
        posted.bot.connector.url,
        posted.card,
        "grant",
        conversation=act.channel_conversation(posted.root),
        card_id=posted.posted.response_id,
        user=user,
    )
    data = dict(action["fallback"]["data"] if submit else action["data"])
    if submit:
        click["value"] = data
    else:
        click["value"]["action"]["data"] = data
    return await posted.send(click)


def cards_in(calls: list[ConnectorCall]) -> list[ConnectorCall]:
    return [c for c in calls if c.card is not None]


async def test_the_pending_card_offers_the_policys_durations(make_till: MakeTill) -> None:
    asked = await (await make_till()).ask_refund()
    titles = [title for _, title in top_actions(asked.card)]
    assert titles[-2:] == ["Approve for this thread (1h)", "Approve for this thread (1d)"]


@pytest.mark.parametrize(
    "policy",
    [
        None,
        '[tools.refund]\nexpires_in = "1h"\n',
        '[default]\ngrant_for = ["1h"]\n'
        '[tools.refund]\napprovers = ["aad-bob", "aad-carol"]\nquorum = 2\n',
    ],
    ids=["no policy", "no grant_for", "quorum of two"],
)
async def test_no_grant_actions_without_grant_for_or_on_a_quorum_card(
    make_till: MakeTill, policy: str | None
) -> None:
    asked = await (await (await make_till(policy)).ask_refund()).seen_by(act.BOB)
    assert grant_actions(asked.card) == []
    assert [title for _, title in top_actions(asked.card)][:2] == ["Approve", "Decline"]


async def test_approve_for_this_thread_runs_the_tool_once_and_the_card_says_so(
    make_till: MakeTill,
) -> None:
    till = await make_till()
    asked = await till.ask_refund()

    answer = await press_grant(asked, "1h")

    assert answer.body["type"] == cards.CONTENT_TYPE
    approved = answer.body["value"]
    assert "✅ Approved by Bob for this thread (1h)" in card_text(approved)
    assert "actions" not in approved
    assert [card_text(c)[0] for c in asked.updates()] == [card_text(approved)[0]]
    assert till.ran == [ASKED]
    assert "refunded 150 EUR on A-1001" in asked.texts()[-1]

    again = await press_grant(asked.as_posted(), "1h")  # where it was not refreshed yet
    assert again.body["type"] == MESSAGE_TYPE
    assert len(till.ran) == 1


async def test_the_submit_fallback_grants_too(make_till: MakeTill) -> None:
    till = await make_till()
    asked = await till.ask_refund()

    await press_grant(asked, "1d", submit=True)

    (updated,) = asked.updates()
    assert "✅ Approved by Bob for this thread (1d)" in card_text(updated)
    assert till.ran == [ASKED]


async def test_the_same_request_in_the_same_thread_runs_without_a_card_and_says_so(
    make_till: MakeTill,
) -> None:
    till = await make_till()
    asked = await till.ask_refund()
    await press_grant(asked, "1h")

    posted = await till.ask_in(asked.root)

    assert till.ran == [ASKED, ASKED]
    assert [c for c in cards_in(posted) if c.card_kind == "approval"] == [], "no new card"
    (notice,) = [c for c in cards_in(posted) if c.card_kind == cards.NOTICE_KIND]
    assert notice.text == f"<at>Bob</at>: {core_texts.GRANTED_RUN.format(tool='refund')}"
    assert notice.mentions == [BOB_MENTION]
    said = [c.text for c in posted]
    assert any("refunded 150 EUR on A-1001" in text for text in said), said


async def test_the_same_request_in_another_thread_gets_a_card_again(make_till: MakeTill) -> None:
    till = await make_till()
    await press_grant(await till.ask_refund(), "1h")

    again = await till.ask_refund()

    assert len(grant_actions(again.card)) == 2
    assert len(till.ran) == 1
    assert not any("under your grant" in text for text in again.texts())


async def test_someone_else_asking_in_the_granted_thread_gets_a_card(make_till: MakeTill) -> None:
    till = await make_till()
    asked = await till.ask_refund()
    await press_grant(asked, "1h")

    posted = await till.ask_in(asked.root, user=act.CAROL)

    assert len(cards_in(posted)) == 1
    assert len(till.ran) == 1


async def test_a_grant_the_policy_does_not_let_the_clicker_give_is_refused(
    make_till: MakeTill,
) -> None:
    till = await make_till('[tools.refund]\napprovers = ["aad-bob"]\ngrant_for = ["1h"]\n')
    asked = await till.ask_refund()
    assert grant_actions(asked.card) == []  # only Bob sees the buttons

    # Bob's "Approve for this thread", pressed by Carol.
    refused = await press_grant(await asked.seen_by(act.BOB), "1h", user=act.CAROL)

    assert refused.body["type"] == MESSAGE_TYPE
    assert asked.updates() == []
    assert till.ran == []


async def test_a_forged_duration_is_refused_and_nothing_runs(make_till: MakeTill) -> None:
    till = await make_till()
    asked = await till.ask_refund()
    click = act.execute(
        till.connector.url,
        asked.card,
        "grant",
        conversation=act.channel_conversation(asked.root),
        card_id=asked.posted.response_id,
    )
    click["value"]["action"]["data"]["grant_for"] = "365d"

    refused = await asked.send(click)

    assert refused.body["type"] == MESSAGE_TYPE
    assert asked.updates() == []
    assert till.ran == []


async def press_end_grant(
    posted: Posted, notice: ConnectorCall, *, user: dict[str, Any] = act.BOB, submit: bool = False
) -> Answer:
    """Press End grant on the notice of a call that ran under a grant, in its thread."""
    assert notice.card is not None
    kind = act.submit if submit else act.execute
    click = kind(
        posted.bot.connector.url,
        notice.card,
        "revoke",
        conversation=act.channel_conversation(posted.root),
        card_id=notice.response_id,
        user=user,
    )
    return await posted.send(click)


@pytest.mark.parametrize("submit", [False, True], ids=["execute", "submit fallback"])
async def test_end_grant_on_the_notice_ends_the_grant_and_the_next_call_asks_again(
    make_till: MakeTill, submit: bool
) -> None:
    till = await make_till()
    asked = await till.ask_refund()
    await press_grant(asked, "1h")
    (notice,) = [c for c in await till.ask_in(asked.root) if c.card_kind == cards.NOTICE_KIND]
    assert notice.card is not None
    assert [(a["title"], a["verb"]) for a in notice.card["actions"]] == [("End grant", "revoke")]

    answer = await press_end_grant(asked, notice, submit=submit)

    if not submit:
        assert answer.body == message_answer(teams_texts.CLICK_DONE)
    (ended,) = [
        c
        for c in till.connector.messages(in_thread(asked.root))
        if c.text == f"<at>Bob</at>: {core_texts.GRANT_ENDED.format(tool='refund')}"
    ]
    assert ended.mentions == [BOB_MENTION]
    again = await till.ask_in(asked.root)
    assert [c.card_kind for c in cards_in(again)] == ["approval"]
    assert till.ran == [ASKED, ASKED]

    gone = await press_end_grant(asked, notice)
    assert gone.body["value"] == core_texts.GRANT_GONE.format(tool="refund")


NEVERS = '[tools.refund]\nnever_for = ["1h"]\n'


async def test_decline_and_dont_ask_again_here_declines_later_calls_without_a_card(
    make_till: MakeTill,
) -> None:
    till = await make_till(NEVERS)
    asked = await (await till.ask_refund()).seen_by(act.BOB)
    (never,) = [a for a in asked.card["actions"] if a.get("verb") == "never"]
    assert never["title"] == "Decline, don't ask again here (1h)"
    assert never["data"]["grant_for"] == "1h"
    click = act.execute(
        till.connector.url,
        asked.card,
        "never",
        conversation=act.channel_conversation(asked.root),
        card_id=asked.posted.response_id,
    )
    answer = await asked.send(click)
    declined = card_text(answer.body["value"])
    assert "❌ Declined by Bob, and not asked again in this thread for 1h" in declined

    posted = await till.ask_in(asked.root)
    assert [c for c in cards_in(posted) if c.card_kind == "approval"] == [], "no new card"
    said = " ".join(c.text or "" for c in posted)
    assert "said not to ask again for refund in this thread" in said
    assert till.ran == []
