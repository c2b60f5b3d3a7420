"""Universal Actions refresh on approval cards, at the HTTP edge: the approvers see the
buttons (and the decline-reason box), everyone else the status only, and a card
opened again after its call was decided or expired reads as it is now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.teams import cards
from adapters.teams import texts as teams_texts
from adapters.teams.refresh import MAX_USER_IDS, among
from bot import ApprovalCard, Person
from bot import texts as core_texts
from bot.policy import ApprovalPolicy

from . import activities as act
from .conftest import MakeBot, TeamsBot
from .fake_connector import ConnectorCall, FakeConnector

ROOT = "1700000009000"
BOB_DECIDES = ApprovalPolicy.from_toml('[tools.deploy]\napprovers = ["aad-bob"]\n')


def lines(card: dict[str, Any]) -> list[str]:
    return [e["text"] for e in card["body"] if e["type"] == "TextBlock"]


def inputs(card: dict[str, Any]) -> list[str]:
    return [e["id"] for e in card["body"] if e["type"].startswith("Input.")]


def buttons(card: dict[str, Any]) -> list[str]:
    return [a["title"] for a in card.get("actions") or []]


async def ask_in_thread(teams: TeamsBot, connector: FakeConnector) -> ConnectorCall:
    post = act.channel_post(connector.url, "deploy api", activity_id=ROOT, mention=True)
    assert (await teams.post(post)).status == 200
    await teams.bot.drain()
    (posted,) = connector.cards(f"{act.CHANNEL};messageid={ROOT}")
    return posted


async def refreshed(
    teams: TeamsBot,
    connector: FakeConnector,
    posted: ConnectorCall,
    user: dict[str, Any],
    *,
    trigger: str = "automatic",
    conversation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The answer to ``user``'s refresh of the card as it was posted."""
    assert posted.card is not None
    invoke = act.refresh(
        connector.url,
        posted.card,
        conversation=conversation or act.channel_conversation(ROOT),
        card_id=posted.response_id,
        user=user,
        trigger=trigger,
    )
    answer = await teams.post(invoke)
    assert answer.status == 200, answer
    body: dict[str, Any] = answer.body
    return body


async def test_the_approver_sees_the_buttons_and_everyone_else_the_status_only(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot(policy=BOB_DECIDES)
    posted = await ask_in_thread(teams, connector)

    # The message: the status only, refreshed for Bob (the approver) and Alice (who asked).
    base = posted.card
    assert base is not None
    assert buttons(base) == []
    assert inputs(base) == []
    assert core_texts.FOR_APPROVERS in lines(base)
    refresh = base["refresh"]
    assert refresh["userIds"] == ["29:bob", "29:alice"]
    assert refresh["action"]["type"] == "Action.Execute"
    assert refresh["action"]["verb"] == "refresh"
    # Bob is looked up in the channel; Alice wrote the request, so her id is known.
    assert connector.lookups == [(act.CHANNEL, "aad-bob")]

    # Bob's client refreshes it: the buttons and the reason box, for him only.
    bobs = await refreshed(teams, connector, posted, act.BOB)
    assert bobs["statusCode"] == 200
    assert bobs["type"] == cards.CONTENT_TYPE
    assert buttons(bobs["value"]) == ["Approve", "Decline", "Edit"]
    assert inputs(bobs["value"]) == ["reason"]
    assert bobs["value"]["refresh"]["userIds"] == ["29:bob"]

    # Alice's, and Carol's own Refresh: the status only.
    for user, trigger in ((act.ALICE, "automatic"), (act.CAROL, "manual")):
        seen = (await refreshed(teams, connector, posted, user, trigger=trigger))["value"]
        assert buttons(seen) == []
        assert inputs(seen) == []
        assert lines(seen)[0] == f"🔒 **{core_texts.APPROVAL_NEEDED}** **deploy**"

    assert teams.deployed == []
    assert connector.updates() == []  # looking changes nothing


async def test_an_old_card_opened_after_the_decision_reads_as_decided(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot(policy=BOB_DECIDES)
    posted = await ask_in_thread(teams, connector)
    bobs = (await refreshed(teams, connector, posted, act.BOB))["value"]
    decline = act.execute(
        connector.url,
        bobs,
        "decline",
        conversation=act.channel_conversation(ROOT),
        card_id=posted.response_id,
        reason="not today",
    )
    assert (await teams.post(decline)).status == 200
    await teams.bot.drain()

    (update,) = connector.updates()
    assert update.card is not None
    assert "refresh" not in update.card  # a decided card changes no more

    for user in (act.ALICE, act.BOB, act.CAROL):
        seen = (await refreshed(teams, connector, posted, user))["value"]
        assert lines(seen)[0] == "❌ **Declined:** **deploy**"
        assert "❌ Declined by Bob" in lines(seen)
        assert "Reason: not today" in lines(seen)
        assert buttons(seen) == []
        assert "refresh" not in seen


async def test_an_old_card_opened_after_it_expired_reads_as_expired(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot(policy=BOB_DECIDES)
    posted = await ask_in_thread(teams, connector)

    assert await teams.bot.sweep_expired(datetime.now(UTC) + timedelta(days=30)) == 1
    await teams.bot.drain()

    seen = (await refreshed(teams, connector, posted, act.BOB))["value"]
    assert lines(seen)[0] == "⌛ **Expired:** **deploy**"
    assert lines(seen)[-1] == "⌛ Expired: nobody decided in time, nothing was run"
    assert buttons(seen) == []
    assert teams.deployed == []


async def test_without_approvers_named_everyone_sees_the_buttons_and_every_member_refreshes(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    posted = await ask_in_thread(teams, connector)

    assert posted.card is not None
    assert buttons(posted.card) == ["Approve", "Decline", "Edit"]
    assert "userIds" not in posted.card["refresh"]  # Teams refreshes for every member (≤ 60)
    assert connector.lookups == []
    carols = (await refreshed(teams, connector, posted, act.CAROL))["value"]
    assert buttons(carols) == ["Approve", "Decline", "Edit"]


async def test_when_the_approvers_cannot_be_looked_up_the_card_keeps_its_buttons(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    connector.lookup_status = 403
    teams = await make_bot(policy=BOB_DECIDES)
    posted = await ask_in_thread(teams, connector)

    assert posted.card is not None
    assert buttons(posted.card) == ["Approve", "Decline", "Edit"]  # nobody is locked out
    assert posted.card["refresh"]["userIds"] == ["29:alice"]  # known: she wrote
    # Clicks are still the core's to refuse.
    click = act.execute(
        connector.url,
        posted.card,
        "approve",
        conversation=act.channel_conversation(ROOT),
        card_id=posted.response_id,
        user=act.CAROL,
    )
    refused = await teams.post(click)
    assert refused.body["type"] == "application/vnd.microsoft.activity.message"
    assert teams.deployed == []


async def test_people_who_wrote_to_the_bot_are_not_looked_up(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot(policy=BOB_DECIDES)
    group = act.chat_conversation("groupChat")
    hello = act.message(connector.url, "hello", conversation=group, user=act.BOB, mention=True)
    await teams.post(hello)
    await teams.bot.drain()

    posted = await ask_in_thread(teams, connector)

    assert posted.card is not None
    assert posted.card["refresh"]["userIds"] == ["29:bob", "29:alice"]
    assert connector.lookups == []  # both wrote: their Teams ids are known


async def test_an_approver_who_is_not_in_the_conversation_is_left_out(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    connector.members[act.CHANNEL] = [act.ALICE, act.CAROL]
    teams = await make_bot(policy=BOB_DECIDES)
    posted = await ask_in_thread(teams, connector)

    assert posted.card is not None
    assert buttons(posted.card) == []  # nobody here may decide: the status for all
    assert posted.card["refresh"]["userIds"] == ["29:alice"]


async def test_in_a_1_1_chat_the_card_is_drawn_for_its_one_person(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    chat = act.chat_conversation("personal")
    for policy, shown in ((BOB_DECIDES, []), (None, ["Approve", "Decline", "Edit"])):
        teams = await make_bot(policy=policy)
        before = len(connector.cards(act.PERSONAL_CHAT))
        await teams.post(act.message(connector.url, "deploy api", conversation=chat))
        await teams.bot.drain()
        posted = connector.cards(act.PERSONAL_CHAT)[before]
        assert posted.card is not None
        assert buttons(posted.card) == shown
        assert "userIds" not in posted.card["refresh"]
        seen = await refreshed(teams, connector, posted, act.ALICE, conversation=chat)
        assert buttons(seen["value"]) == shown
    assert connector.lookups == []


async def test_a_refresh_of_a_card_the_bot_does_not_know_is_answered_with_an_error(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    posted = await ask_in_thread(teams, connector)
    assert posted.card is not None
    posted.card["refresh"]["action"]["data"]["run_id"] = "run-gone"

    answer = await refreshed(teams, connector, posted, act.BOB)

    assert answer["statusCode"] == 404
    assert answer["type"] == "application/vnd.microsoft.error"
    assert answer["value"]["message"] == teams_texts.CARD_UNKNOWN


def test_at_most_60_people_are_refreshed_and_more_approvers_keep_the_buttons() -> None:
    approvers = tuple(f"aad-{i}" for i in range(70))
    card = ApprovalCard(
        run_id="r",
        tool_call_id="c",
        tool_name="deploy",
        args={},
        agent_path=("ops",),
        requester=Person(id="aad-alice"),
        expires_at=datetime.now(UTC),
        deciders=approvers,
    )
    found: dict[str, str | None] = {a: f"29:{a}" for a in approvers}
    audience = among(card, found)
    assert audience.user_ids is not None
    assert len(audience.user_ids) == MAX_USER_IDS
    assert audience.actionable  # ten approvers would get no buttons otherwise
    few = among(card, {a: found[a] for a in approvers[:3]})
    assert few.user_ids == ("29:aad-0", "29:aad-1", "29:aad-2")
    assert not few.actionable  # the others are not in the conversation
