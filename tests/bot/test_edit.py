"""Edit, then approve: the card's arguments as a form, validated, approved as edited by
someone who may approve them; the card says what changed and who changed it."""

from __future__ import annotations

from typing import Any, Literal

from agents import Agent, MemoryStore, ToolCall, tool
from bot import (
    ApprovalCard,
    ApprovalPolicy,
    ChatBot,
    Click,
    Notice,
    Prompt,
    PromptField,
    Reply,
)
from tests.agents.helpers import call_then_answer

from .helpers import THREAD, RecordingMessenger, message


def refund_agent(ran: list[dict[str, Any]]) -> Agent:
    @tool(require_approval=True)
    def refund(order: str, amount: int, currency: Literal["EUR", "USD"] = "EUR") -> str:
        """Refund an order."""
        ran.append({"order": order, "amount": amount, "currency": currency})
        return f"refunded {amount} {currency} on {order}"

    return Agent(
        id="billing",
        model=call_then_answer(ToolCall("refund", {"order": "A-1", "amount": 150})),
        tools=[refund],
        store=MemoryStore(),
    )


async def carded(
    ran: list[dict[str, Any]], policy: ApprovalPolicy | None = None
) -> tuple[ChatBot, RecordingMessenger, ApprovalCard]:
    bot = ChatBot(refund_agent(ran), policy=policy)
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("refund A-1", user="U1"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)
    return bot, messenger, card


def edit(card: ApprovalCard, user: str = "U2", **values: Any) -> Click:
    return Click(
        thread=THREAD,
        user_id=user,
        run_id=card.run_id,
        tool_call_id=card.tool_call_id,
        action="edit",
        values=values or None,
    )


async def test_the_card_offers_the_arguments_as_fields_with_their_values() -> None:
    bot, _, card = await carded([])
    assert card.editable
    assert card.fields == (
        PromptField(name="order", label="Order", required=True, value="A-1"),
        PromptField(name="amount", label="Amount", kind="integer", required=True, value=150),
        PromptField(
            name="currency", label="Currency", kind="choice", choices=("EUR", "USD"), value="EUR"
        ),
    )
    form = await bot.edit_form(edit(card))
    assert isinstance(form, Prompt)
    assert form.fields == card.fields
    assert "then approve" in form.question


async def test_an_edit_is_approved_as_edited_and_the_card_says_what_changed() -> None:
    ran: list[dict[str, Any]] = []
    bot, messenger, card = await carded(ran)
    result = await bot.on_click(edit(card, order="A-1", amount="120", currency="USD"))
    assert result.accepted
    shown = result.card
    assert isinstance(shown, ApprovalCard)
    assert shown.status == "approved"
    assert shown.args == {"order": "A-1", "amount": 120, "currency": "USD"}
    assert shown.previous_args == {"order": "A-1", "amount": 150, "currency": "EUR"}
    assert shown.edited_by is not None
    assert shown.edited_by.id == "U2"
    assert not shown.editable
    await bot.drain()
    assert ran == [{"order": "A-1", "amount": 120, "currency": "USD"}]
    assert "refunded 120 USD on A-1" in messenger.views(Reply)[-1].text
    audit = await bot.agent.engine.store.list_audit(run_id=card.run_id)
    assert [e.event for e in audit] == ["requested", "shown", "edited", "approved", "executed"]


async def test_an_edit_that_does_not_fit_can_be_corrected_and_nothing_ran() -> None:
    ran: list[dict[str, Any]] = []
    bot, _, card = await carded(ran)
    result = await bot.on_click(edit(card, order="A-1", amount="lots"))
    assert not result.accepted
    assert result.retry
    assert result.message is not None
    assert "amount" in result.message
    assert ran == []
    (waiting,) = await bot.agent.list_suspended_runs(thread_id=THREAD.id)
    assert waiting.args["amount"] == 150


async def test_only_someone_who_may_approve_may_edit() -> None:
    ran: list[dict[str, Any]] = []
    policy = ApprovalPolicy.from_toml('[tools.refund]\napprovers = ["U3"]\n')
    bot, _, card = await carded(ran, policy)
    form = await bot.edit_form(edit(card, user="U2"))
    assert form == ("You are not one of the approvers for `refund`.",)
    refused = await bot.on_click(edit(card, user="U2", order="A-1", amount="1"))
    assert not refused.accepted
    assert not refused.retry
    # The requester may not approve their own call, edited or not.
    own = await bot.on_click(edit(card, user="U1", order="A-1", amount="1"))
    assert not own.accepted
    assert ran == []


async def test_a_card_that_needs_several_approvals_offers_no_edit() -> None:
    policy = ApprovalPolicy.from_toml('[tools.refund]\nquorum = 2\napprovers = ["U2", "U3"]\n')
    bot, _, card = await carded([], policy)
    assert not card.editable
    refused = await bot.on_click(edit(card, order="A-1", amount="1"))
    assert not refused.accepted
    assert refused.message is not None
    assert "can't be edited" in refused.message


async def test_the_requester_is_told_what_an_approver_changed() -> None:
    bot, messenger, card = await carded([])
    await bot.on_click(edit(card, order="A-1", amount="120", currency="USD"))
    await bot.drain()
    (told,) = [n for n in messenger.views(Notice) if n.to is not None and n.to.id == "U1"]
    assert told.text == (
        "your request to run `refund` was approved with edited arguments "
        "(amount: 150 → 120; currency: EUR → USD); it runs now, exactly as edited."
    )


async def test_recent_decisions_keep_the_call_as_it_ran() -> None:
    bot, _, card = await carded([])
    await bot.on_click(edit(card, order="A-1", amount="120"))
    await bot.drain()
    inbox = await bot.inbox(THREAD, "U2")
    (decided,) = inbox.decided
    assert (decided.outcome, decided.args) == (
        "edited",
        {"order": "A-1", "amount": 120, "currency": "EUR"},
    )


async def test_an_edit_that_changes_nothing_is_kept_and_shown_as_an_approval() -> None:
    ran: list[dict[str, Any]] = []
    bot, _, card = await carded(ran)
    result = await bot.on_click(edit(card, order="A-1", amount="150", currency="EUR"))
    assert isinstance(result.card, ApprovalCard)
    assert result.card.previous_args is None
    assert result.card.edited_by is None
    await bot.drain()
    (decided,) = (await bot.inbox(THREAD, "U2")).decided
    assert decided.outcome == "approved"
    audit = await bot.agent.audit(run_id=card.run_id)
    assert [e.event for e in audit] == ["requested", "shown", "approved", "executed"]
