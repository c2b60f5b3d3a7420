"""Editing an approval's arguments in Teams: Edit opens them as a form, "Approve edited"
runs the tool with exactly what was sent.

Driven end to end over HTTP with real RS256 channel tokens (checked by the SDK
against a local OpenID endpoint), the real CloudAdapter and core, and a fake
Bot Connector. The ``refund`` tool records every call it really makes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from adapters.teams import cards
from bot import texts as core_texts

from . import activities as act
from .conftest import Answer, MakeBot
from .fake_connector import FakeConnector
from .refunds import (
    ASKED,
    MESSAGE_TYPE,
    Till,
    card_text,
    message_answer,
    refund_tills,
    top_actions,
)
from .signed import Posted, form


def edit_form(card: dict[str, Any]) -> dict[str, Any]:
    """The card the Edit action shows."""
    (edit,) = [a for a in card["actions"] if a["type"] == "Action.ShowCard"]
    assert edit["title"] == "Edit"
    shown: dict[str, Any] = edit["card"]
    return shown


async def forge_edit(
    card: Posted, values: dict[str, Any], *, user: dict[str, Any] = act.BOB
) -> Answer:
    """An "Approve edited" the card does not offer, sent by hand."""
    data = {**act.action_data(card.card, "approve"), "action": "edit", **form(**values)}
    click = act.execute(
        card.bot.connector.url,
        {"actions": [{"type": "Action.Execute", "verb": "edit", "data": data}]},
        "edit",
        conversation=act.channel_conversation(card.root),
        card_id=card.posted.response_id,
        user=user,
    )
    return await card.send(click)


MakeTill = Callable[..., Awaitable[Till]]


@pytest.fixture
async def make_till(
    make_bot: MakeBot, connector: FakeConnector, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[MakeTill]:
    """Start the refund bot (with a policy, when given) behind real Bot Framework auth."""
    async with refund_tills(make_bot, connector, monkeypatch, Till) as make:
        yield make


async def test_the_pending_card_offers_edit_with_inputs_starting_from_its_values(
    make_till: MakeTill,
) -> None:
    till = await make_till()

    asked = await till.ask_refund()

    assert top_actions(asked.card) == [
        ("Action.Execute", "Approve"),
        ("Action.Execute", "Decline"),
        ("Action.ShowCard", "Edit"),
    ]
    shown = edit_form(asked.card)
    order, amount, currency = [e for e in shown["body"] if e["type"].startswith("Input.")]
    assert (order["id"], order["type"], order["value"]) == ("field:order", "Input.Text", "A-1001")
    assert (amount["id"], amount["type"], amount["value"]) == ("field:amount", "Input.Number", 150)
    assert (currency["id"], currency["type"], currency["value"]) == (
        "field:currency",
        "Input.ChoiceSet",
        "EUR",
    )
    assert [c["value"] for c in currency["choices"]] == ["EUR", "USD"]
    assert [(a["title"], a["verb"]) for a in shown["actions"]] == [("Approve edited", "edit")]
    approve = asked.card["actions"][0]
    assert approve["associatedInputs"] == "none"  # Approve sends no edit inputs
    assert till.ran == []


async def test_approve_edited_runs_the_tool_once_with_the_typed_values_and_says_who_edited(
    make_till: MakeTill,
) -> None:
    till = await make_till()
    asked = await till.ask_refund()

    answer = await asked.press(
        "edit", values={"order": "A-1001", "amount": "120", "currency": "USD"}
    )

    assert answer.body["type"] == cards.CONTENT_TYPE
    approved = answer.body["value"]
    shown = card_text(approved)
    assert "✅ Approved by Bob" in shown
    assert "amount: 120" in shown
    assert "currency: USD" in shown
    assert "✏️ Edited by Bob: **amount**: 150 → 120; **currency**: EUR → USD" in shown
    assert "actions" not in approved
    assert [card_text(c) for c in asked.updates()] == [shown]  # for everyone too
    assert till.ran == [{"order": "A-1001", "amount": 120, "currency": "USD"}]
    assert type(till.ran[0]["amount"]) is int
    assert "refunded 120 USD on A-1001" in asked.texts()[-1]
    run_id = act.action_data(asked.card, "edit")["run_id"]
    audit = await till.teams.bot.store.list_audit(run_id=run_id)
    (edit,) = [e for e in audit if e.event == "edited"]
    assert (edit.actor, edit.previous_args, edit.args) == ("aad-bob", ASKED, till.ran[0])

    # Pressed again where the card was not refreshed yet:
    stale = asked.as_posted()
    again = await stale.press("edit", values={"order": "A-1001", "amount": "1"})
    approve = await stale.press("approve")
    assert again.body["type"] == approve.body["type"] == MESSAGE_TYPE
    assert len(till.ran) == 1
    # Refreshed, it reads as decided.
    assert "✅ Approved by Bob" in card_text((await asked.seen_by(act.BOB)).card)


@pytest.mark.parametrize("amount", ["lots", "12.5", ""])
async def test_edited_values_that_do_not_fit_are_told_to_the_clicker_and_nothing_runs(
    make_till: MakeTill, amount: str
) -> None:
    till = await make_till()
    asked = await till.ask_refund()

    refused = await asked.press(
        "edit", values={"order": "A-1001", "amount": amount, "currency": "USD"}
    )

    assert refused.body["type"] == MESSAGE_TYPE
    said = refused.body["value"]
    assert said.startswith("Those arguments do not fit: ")
    assert "amount" in said
    assert asked.updates() == []
    assert till.ran == []

    # Still pending: it can still be approved as asked.
    approved = await asked.press("approve")
    assert "✅ Approved by Bob" in card_text(approved.body["value"])
    assert till.ran == [ASKED]


async def test_the_submit_fallback_approves_edited_and_updates_the_card_for_everyone(
    make_till: MakeTill,
) -> None:
    till = await make_till()
    asked = await till.ask_refund()

    await asked.submit("edit", values={"order": "A-2002", "amount": "90", "currency": "EUR"})

    (updated,) = asked.updates()
    assert "✅ Approved by Bob" in card_text(updated)
    assert "✏️ Edited by Bob: **order**: A-1001 → A-2002; **amount**: 150 → 90" in card_text(updated)
    assert till.ran == [{"order": "A-2002", "amount": 90, "currency": "EUR"}]


async def test_decline_on_an_editable_card_needs_none_of_the_edit_inputs(
    make_till: MakeTill,
) -> None:
    till = await make_till()
    asked = await till.ask_refund()

    declined = await asked.press("decline")

    assert "❌ Declined by Bob" in card_text(declined.body["value"])
    assert not any("Edited by" in t for t in card_text(declined.body["value"]))
    assert till.ran == []


@pytest.mark.parametrize(
    ("policy", "user", "said"),
    [
        (
            '[tools.refund]\napprovers = ["aad-carol"]\n',
            act.BOB,
            core_texts.POLICY_NOT_APPROVER.format(tool="refund"),
        ),
        (
            "[tools.refund]\nallow_self_approval = false\n",
            act.ALICE,
            core_texts.POLICY_SELF_APPROVAL.format(tool="refund"),
        ),
    ],
)
async def test_someone_the_policy_does_not_let_approve_cannot_approve_edited(
    make_till: MakeTill, policy: str, user: dict[str, Any], said: str
) -> None:
    till = await make_till(policy)
    asked = await till.ask_refund()
    posted_before = len(till.connector.messages())

    # The Edit of someone who may decide (Carol's view), pressed by someone who may not.
    carols = await asked.seen_by(act.CAROL)
    refused = await carols.press("edit", user=user, values={"order": "A-1001", "amount": "1"})

    assert refused.body == message_answer(said)
    assert asked.updates() == []
    assert till.ran == []
    assert len(till.connector.messages()) == posted_before


async def test_a_card_that_needs_two_approvals_has_no_edit_and_a_forged_edit_is_refused(
    make_till: MakeTill,
) -> None:
    till = await make_till('[tools.refund]\napprovers = ["aad-bob", "aad-carol"]\nquorum = 2\n')
    asked = await (await till.ask_refund()).seen_by(act.BOB)

    assert top_actions(asked.card) == [
        ("Action.Execute", "Approve"),
        ("Action.Execute", "Decline"),
    ]
    assert all(i["id"] == "reason" for i in asked.card["body"] if i["type"].startswith("Input."))

    forged = await forge_edit(asked, {"order": "A-1001", "amount": "1"})
    assert forged.body == message_answer(core_texts.EDIT_NOT_OFFERED)
    assert asked.updates() == []
    assert till.ran == []


RESPONDING = "[tools.refund]\nrespond = true\n"


async def test_respond_instead_answers_for_the_tool_which_never_runs(
    make_till: MakeTill,
) -> None:
    till = await make_till(RESPONDING)
    asked = await till.ask_refund()
    assert top_actions(asked.card)[-1] == ("Action.ShowCard", "Respond instead")
    (respond,) = [a for a in asked.card["actions"] if a["title"] == "Respond instead"]
    (field,) = [e for e in respond["card"]["body"] if e["type"].startswith("Input.")]
    assert (field["id"], field["isRequired"]) == ("field:response", True)

    answer = await asked.press("respond", values={"response": "Refunded it by hand."})

    shown = card_text(answer.body["value"])
    assert "💬 Not run: Bob answered for it: Refunded it by hand." in shown
    assert [card_text(c) for c in asked.updates()] == [shown]
    assert till.ran == []
    run_id = act.action_data(asked.card, "approve")["run_id"]
    audit = await till.teams.bot.store.list_audit(run_id=run_id)
    (responded,) = [e for e in audit if e.event == "responded"]
    assert (responded.actor, responded.reason) == ("aad-bob", "Refunded it by hand.")
    assert asked.texts()[-1].endswith("Refunded it by hand.")


async def test_respond_is_not_taken_where_the_policy_does_not_offer_it(
    make_till: MakeTill,
) -> None:
    till = await make_till()
    asked = await till.ask_refund()
    assert ("Action.ShowCard", "Respond instead") not in top_actions(asked.card)
    data = {**act.action_data(asked.card, "approve"), "action": "respond"}
    data |= form(response="done")
    click = act.execute(
        till.connector.url,
        {"actions": [{"type": "Action.Execute", "verb": "respond", "data": data}]},
        "respond",
        conversation=act.channel_conversation(asked.root),
        card_id=asked.posted.response_id,
    )
    refused = await asked.send(click)
    assert refused.body["type"] == MESSAGE_TYPE
    assert "does not offer answering" in refused.body["value"]
    assert till.ran == []
