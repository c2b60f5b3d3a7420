"""Editing an approval's arguments in Teams: Edit opens them as a form, "Approve edited"
runs the tool with exactly what was sent.

Driven end to end over HTTP with real RS256 channel tokens (checked by the SDK
against a local OpenID endpoint), the real CloudAdapter and core, and a fake
Bot Connector. The ``refund`` tool records every call it really makes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from botframework.connector.auth import MicrosoftAppCredentials

from adapters.teams import cards, load_teams_settings
from agents import Agent, MemoryStore, ToolCall, tool
from bot import messages as core_messages
from bot.policy import ApprovalPolicy
from tests.agents.helpers import call_then_answer

from . import activities as act
from .conftest import Answer, MakeBot, TeamsBot
from .fake_connector import ConnectorCall, FakeConnector
from .signing import APP_ID, make_token, serve_openid

ASKED = {"order": "A-1001", "amount": 150, "currency": "EUR"}
MESSAGE_TYPE = "application/vnd.microsoft.activity.message"


def refunds_agent(ran: list[dict[str, Any]]) -> Agent:
    """Any message asks to refund ``ASKED``; every refund that really runs is in ``ran``."""

    @tool(require_approval=True)
    def refund(order: str, amount: int, currency: Literal["EUR", "USD"] = "EUR") -> str:
        """Refund an order."""
        ran.append({"order": order, "amount": amount, "currency": currency})
        return f"refunded {amount} {currency} on {order}"

    model = call_then_answer(ToolCall("refund", dict(ASKED)))
    return Agent(id="billing", model=model, tools=[refund], store=MemoryStore())


def form(**values: Any) -> dict[str, Any]:
    """Input values by field name, keyed by their inputs' ids."""
    return {cards.FIELD_INPUT_PREFIX + name: value for name, value in values.items()}


def card_text(card: dict[str, Any]) -> list[str]:
    """Every TextBlock and fact of a card, as people read them."""
    out: list[str] = []
    for element in card["body"]:
        if element["type"] == "TextBlock":
            out.append(element["text"])
        elif element["type"] == "FactSet":
            out.extend(f"{f['title']}: {f['value']}" for f in element["facts"])
    return out


def top_actions(card: dict[str, Any]) -> list[tuple[str, str]]:
    return [(a["type"], a["title"]) for a in card.get("actions", [])]


def edit_form(card: dict[str, Any]) -> dict[str, Any]:
    """The card the Edit action shows."""
    (edit,) = [a for a in card["actions"] if a["type"] == "Action.ShowCard"]
    assert edit["title"] == "Edit"
    shown: dict[str, Any] = edit["card"]
    return shown


def in_thread(root: str) -> str:
    return f"{act.CHANNEL};messageid={root}"


@dataclass
class Till:
    """The bot with the refund tool, behind real Bot Framework auth."""

    teams: TeamsBot
    connector: FakeConnector
    ran: list[dict[str, Any]]
    token: str

    async def post(self, activity: dict[str, Any]) -> Answer:
        """Post an activity as Teams does: with a signed channel token."""
        answer = await self.teams.post(activity, headers={"Authorization": f"Bearer {self.token}"})
        assert answer.status == 200, answer
        return answer

    async def ask(self, *, user: dict[str, Any] = act.ALICE) -> Card:
        """Ask for a refund in a new channel thread; return the card the bot posted."""
        root = act.next_id()
        post = act.channel_post(
            self.connector.url, "refund A-1001", activity_id=root, mention=True, user=user
        )
        await self.post(post)
        await self.teams.bot.drain()
        (posted,) = self.connector.cards(in_thread(root))
        return Card(self, root, posted)


@dataclass
class Card:
    """A posted approval card and its thread."""

    till: Till
    root: str
    posted: ConnectorCall

    @property
    def card(self) -> dict[str, Any]:
        assert self.posted.card is not None
        return self.posted.card

    async def press(
        self, verb: str, *, user: dict[str, Any] = act.BOB, values: dict[str, Any] | None = None
    ) -> Answer:
        """Press a button (Action.Execute) with the edit form's values; settle the work."""
        click = act.execute(
            self.till.connector.url,
            self.card,
            verb,
            conversation=act.channel_conversation(self.root),
            card_id=self.posted.response_id,
            user=user,
            inputs=form(**values) if values is not None else None,
        )
        return await self._send(click)

    async def submit(
        self, verb: str, *, user: dict[str, Any] = act.BOB, values: dict[str, Any] | None = None
    ) -> Answer:
        """The same through the Action.Submit fallback (a message activity)."""
        click = act.submit(
            self.till.connector.url,
            self.card,
            verb,
            conversation=act.channel_conversation(self.root),
            card_id=self.posted.response_id,
            user=user,
            inputs=form(**values) if values is not None else None,
        )
        return await self._send(click)

    async def forge_edit(self, values: dict[str, Any], *, user: dict[str, Any] = act.BOB) -> Answer:
        """An "Approve edited" the card does not offer, sent by hand."""
        data = {**act.action_data(self.card, "approve"), "action": "edit", **form(**values)}
        click = act.execute(
            self.till.connector.url,
            {"actions": [{"type": "Action.Execute", "verb": "edit", "data": data}]},
            "edit",
            conversation=act.channel_conversation(self.root),
            card_id=self.posted.response_id,
            user=user,
        )
        return await self._send(click)

    async def _send(self, click: dict[str, Any]) -> Answer:
        answer = await self.till.post(click)
        await self.till.teams.bot.drain()
        return answer

    def updates(self) -> list[dict[str, Any]]:
        """The cards this card's message was replaced with, for everyone, in order."""
        return [
            u.body["attachments"][0]["content"]
            for u in self.till.connector.updates()
            if u.activity_id == self.posted.response_id
        ]

    def texts(self) -> list[str]:
        return self.till.connector.texts(in_thread(self.root))


MakeTill = Callable[..., Awaitable[Till]]


@pytest.fixture
async def make_till(
    make_bot: MakeBot, connector: FakeConnector, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[MakeTill]:
    """Start the refund bot (with a policy, when given) behind real Bot Framework auth."""

    def token_from_entra(self: MicrosoftAppCredentials, force_refresh: bool = False) -> str:
        return "bot-framework-token-for-the-bot"

    monkeypatch.setattr(MicrosoftAppCredentials, "get_access_token", token_from_entra)
    async with serve_openid(monkeypatch) as openid:

        async def make(policy: str | None = None) -> Till:
            ran: list[dict[str, Any]] = []
            teams = await make_bot(
                agent=refunds_agent(ran),
                policy=ApprovalPolicy.from_toml(policy) if policy is not None else None,
                settings=load_teams_settings(
                    microsoft_app_id=APP_ID, microsoft_app_password="not-a-real-secret"
                ),
            )
            return Till(teams, connector, ran, make_token(openid.key, connector.url))

        yield make


async def test_the_pending_card_offers_edit_with_inputs_starting_from_its_values(
    make_till: MakeTill,
) -> None:
    till = await make_till()

    asked = await till.ask()

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
    asked = await till.ask()

    answer = await asked.press(
        "edit", values={"order": "A-1001", "amount": "120", "currency": "USD"}
    )

    assert answer.body["type"] == cards.CONTENT_TYPE
    approved = answer.body["value"]
    shown = card_text(approved)
    assert shown[0] == "✅ Approved by Bob"
    assert "amount: 120" in shown
    assert "currency: USD" in shown
    assert "Edited by Bob: amount 150 → 120; currency EUR → USD" in shown
    assert "actions" not in approved
    assert [card_text(c) for c in asked.updates()] == [shown]  # for everyone too
    assert till.ran == [{"order": "A-1001", "amount": 120, "currency": "USD"}]
    assert type(till.ran[0]["amount"]) is int
    assert "refunded 120 USD on A-1001" in asked.texts()[-1]
    run_id = act.action_data(asked.card, "edit")["run_id"]
    audit = await till.teams.bot.store.list_audit(run_id=run_id)
    (edit,) = [e for e in audit if e.event == "edited"]
    assert (edit.actor, edit.previous_args, edit.args) == ("aad-bob", ASKED, till.ran[0])

    again = await asked.press("edit", values={"order": "A-1001", "amount": "1"})
    approve = await asked.press("approve")
    assert again.body["type"] == approve.body["type"] == MESSAGE_TYPE
    assert len(till.ran) == 1


@pytest.mark.parametrize("amount", ["lots", "12.5", ""])
async def test_edited_values_that_do_not_fit_are_told_to_the_clicker_and_nothing_runs(
    make_till: MakeTill, amount: str
) -> None:
    till = await make_till()
    asked = await till.ask()

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
    assert card_text(approved.body["value"])[0] == "✅ Approved by Bob"
    assert till.ran == [ASKED]


async def test_the_submit_fallback_approves_edited_and_updates_the_card_for_everyone(
    make_till: MakeTill,
) -> None:
    till = await make_till()
    asked = await till.ask()

    await asked.submit("edit", values={"order": "A-2002", "amount": "90", "currency": "EUR"})

    (updated,) = asked.updates()
    assert card_text(updated)[0] == "✅ Approved by Bob"
    assert "Edited by Bob: order A-1001 → A-2002; amount 150 → 90" in card_text(updated)
    assert till.ran == [{"order": "A-2002", "amount": 90, "currency": "EUR"}]


async def test_decline_on_an_editable_card_needs_none_of_the_edit_inputs(
    make_till: MakeTill,
) -> None:
    till = await make_till()
    asked = await till.ask()

    declined = await asked.press("decline")

    assert card_text(declined.body["value"])[0] == "❌ Declined by Bob"
    assert not any(t.startswith("Edited by") for t in card_text(declined.body["value"]))
    assert till.ran == []


@pytest.mark.parametrize(
    ("policy", "user", "said"),
    [
        (
            '[tools.refund]\napprovers = ["aad-carol"]\n',
            act.BOB,
            core_messages.POLICY_NOT_APPROVER.format(tool="refund"),
        ),
        (
            "[tools.refund]\nallow_self_approval = false\n",
            act.ALICE,
            core_messages.POLICY_SELF_APPROVAL.format(tool="refund"),
        ),
    ],
)
async def test_someone_the_policy_does_not_let_approve_cannot_approve_edited(
    make_till: MakeTill, policy: str, user: dict[str, Any], said: str
) -> None:
    till = await make_till(policy)
    asked = await till.ask()
    posted_before = len(till.connector.messages())

    refused = await asked.press("edit", user=user, values={"order": "A-1001", "amount": "1"})

    assert refused.body == {"statusCode": 200, "type": MESSAGE_TYPE, "value": said}
    assert asked.updates() == []
    assert till.ran == []
    assert len(till.connector.messages()) == posted_before


async def test_a_card_that_needs_two_approvals_has_no_edit_and_a_forged_edit_is_refused(
    make_till: MakeTill,
) -> None:
    till = await make_till('[tools.refund]\napprovers = ["aad-bob", "aad-carol"]\nquorum = 2\n')
    asked = await till.ask()

    assert top_actions(asked.card) == [
        ("Action.Execute", "Approve"),
        ("Action.Execute", "Decline"),
    ]
    assert all(i["id"] == "reason" for i in asked.card["body"] if i["type"].startswith("Input."))

    forged = await asked.forge_edit({"order": "A-1001", "amount": "1"})
    assert forged.body == {
        "statusCode": 200,
        "type": MESSAGE_TYPE,
        "value": core_messages.EDIT_NOT_OFFERED,
    }
    assert asked.updates() == []
    assert till.ran == []
