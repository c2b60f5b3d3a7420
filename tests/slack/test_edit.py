"""Edit on an approval card: a form of the call's arguments, approved as edited.

The agent asks to refund order A-1 by 150 (EUR, the default); Edit opens a modal
prefilled from the card, and sending it approves the call with what was sent.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Literal

import pytest

from adapters.slack.convert import ActionIn, FormIn, parse, to_click, to_form_click
from adapters.slack.modals import answer_modal, edit_modal, initial_text
from adapters.slack.wire import (
    APPROVE_ACTION,
    DECLINE_ACTION,
    EDIT_ACTION,
    EDIT_VIEW,
    RESPOND_ACTION,
    RESPOND_VIEW,
    FormMetadata,
    ModalMetadata,
    decode_button_value,
    decode_metadata,
)
from agents import Agent, Store, ToolCall, tool
from bot import (
    ApprovalCard,
    ApprovalPolicy,
    FieldKind,
    Person,
    Prompt,
    PromptField,
)
from tests.agents.helpers import call_then_answer

from .conftest import StartBot
from .fake_slack import TEAM_ID, FakeSlack, Posted, _view_problem
from .harness import ALICE, BOB, CHANNEL, BotServer, block_actions, button, drawn, mention_event
from .test_approvals import card_text, has_buttons
from .test_questions import CAROL, buttons, submission

Refunds = list[dict[str, Any]]
Till = Callable[..., Awaitable[BotServer]]


@pytest.fixture
def refunds() -> Refunds:
    return []


@pytest.fixture
def till(serve: StartBot, store: Store, refunds: Refunds) -> Till:
    """Start a bot whose model asks to refund A-1 by 150, recording every refund."""

    @tool(require_approval=True)
    def refund(order: str, amount: int, currency: Literal["EUR", "USD"] = "EUR") -> str:
        """Refund part of an order."""
        refunds.append({"order": order, "amount": amount, "currency": currency})
        return f"refunded {amount} {currency} on {order}"

    async def start(*, policy: ApprovalPolicy | None = None, order: str = "A-1") -> BotServer:
        model = call_then_answer(ToolCall("refund", {"order": order, "amount": 150}))
        agent = Agent(id="billing", model=model, tools=[refund], store=store)
        return await serve(agent, policy=policy)

    return start


async def ask(bot: BotServer, slack: FakeSlack) -> Posted:
    """Mention the bot; return the approval card it posts."""
    root = mention_event("refund A-1")
    assert await bot.send_event(root) == 200
    await bot.idle()
    (card,) = [m for m in slack.in_thread(CHANNEL, root["ts"]) if has_buttons(m)]
    return card


async def press_edit(bot: BotServer, slack: FakeSlack, card: Posted) -> dict[str, Any]:
    """Press Edit as Bob; the modal Slack was asked to open."""
    assert await bot.press(card, EDIT_ACTION, user=BOB) == 200
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    (opened,) = slack.of("views.open")
    assert opened.args["trigger_id"].startswith("trigger-")
    view: dict[str, Any] = opened.args["view"]
    return view


def prefilled(view: dict[str, Any]) -> dict[str, str | None]:
    """What each input of a form holds when it opens, by field name."""
    names = decode_metadata(view["private_metadata"], FormMetadata).fields
    elements = [b["element"] for b in view["blocks"] if b["type"] == "input"]
    return {
        name: element.get("initial_option", {}).get("value", element.get("initial_value"))
        for name, element in zip(names, elements, strict=True)
    }


def answers(slack: FakeSlack, card: Posted) -> str:
    return "\n".join(m.text for m in slack.in_thread(CHANNEL, card.thread_ts or ""))


async def test_a_pending_card_offers_edit_beside_approve_and_decline(
    till: Till, slack: FakeSlack
) -> None:
    card = await ask(await till(), slack)
    assert buttons(card) == [
        (APPROVE_ACTION, "Approve"),
        (DECLINE_ACTION, "Decline"),
        (EDIT_ACTION, "Edit"),
    ]
    edit, approve = button(card, EDIT_ACTION), button(card, APPROVE_ACTION)
    assert decode_button_value(edit["value"]) == decode_button_value(approve["value"])
    assert "style" not in edit, "Approve stays the primary button"


async def test_edit_opens_a_form_prefilled_with_the_cards_values(
    till: Till, slack: FakeSlack, refunds: Refunds
) -> None:
    bot = await till()
    card = await ask(bot, slack)
    view = await press_edit(bot, slack, card)

    assert view["callback_id"] == EDIT_VIEW
    assert (view["title"]["text"], view["submit"]["text"]) == ("Edit and approve", "Approve")
    assert "`refund`" in view["blocks"][0]["text"]["text"]
    assert prefilled(view) == {"order": "A-1", "amount": "150", "currency": "EUR"}
    inputs = [b for b in view["blocks"] if b["type"] == "input"]
    assert [b["optional"] for b in inputs] == [False, False, True]
    order, amount, currency = (b["element"] for b in inputs)
    assert order["type"] == "plain_text_input"
    assert (amount["type"], amount["is_decimal_allowed"]) == ("number_input", False)
    assert currency["type"] == "static_select"
    assert [o["value"] for o in currency["options"]] == ["EUR", "USD"]
    assert card.updates == 0, "opening the form decides nothing"
    assert refunds == []


async def test_sending_the_form_approves_and_runs_the_tool_once_with_the_edited_values(
    till: Till, slack: FakeSlack, refunds: Refunds
) -> None:
    bot = await till()
    card = await ask(bot, slack)
    view = await press_edit(bot, slack, card)
    sent = submission(view, {**prefilled(view), "amount": "120", "currency": "USD"}, user=BOB)

    assert await bot.interact(sent) == (200, ""), "an empty answer closes the modal"
    await bot.idle()
    assert refunds == [{"order": "A-1", "amount": 120, "currency": "USD"}]
    shown = card_text(card)
    assert f"Approved by <@{BOB}>" in shown
    assert f"✏️ Edited by <@{BOB}>: `amount`: 150 → 120; `currency`: EUR → USD" in shown
    assert "`order`" not in shown, "only what changed is listed"
    assert '"amount": 120' in shown, "the arguments are what ran"
    assert not has_buttons(card)
    assert "refunded 120 USD on A-1" in answers(slack, card)

    assert await bot.interact(sent) == (200, ""), "sent again: the modal closes"
    await bot.idle()
    (told,) = slack.of("chat.postEphemeral")
    assert told.args["user"] == BOB
    assert "already approved" in told.args["text"]
    assert len(refunds) == 1


async def test_the_edit_form_carries_the_cards_ask_to_its_click(
    till: Till, slack: FakeSlack
) -> None:
    bot = await till()
    card = await ask(bot, slack)
    ask_on_card = decode_button_value(button(card, EDIT_ACTION)["value"]).ask
    assert ask_on_card
    view = await press_edit(bot, slack, card)
    metadata = decode_metadata(view["private_metadata"], FormMetadata)
    assert metadata.ask == ask_on_card
    assert metadata.response_url is None, "opened on a card in its thread"

    sent = parse(submission(view, prefilled(view), user=BOB))
    assert isinstance(sent, FormIn)
    click = to_form_click(sent)
    assert click.ask == ask_on_card
    assert click.message_ref == {"channel": CHANNEL, "ts": card.ts}


async def test_values_that_do_not_fit_are_shown_in_the_form_and_nothing_runs(
    till: Till, slack: FakeSlack, refunds: Refunds
) -> None:
    bot = await till()
    card = await ask(bot, slack)
    view = await press_edit(bot, slack, card)

    status, body = await bot.interact(
        submission(view, {**prefilled(view), "amount": "lots"}, user=BOB)
    )
    assert status == 200
    answer = json.loads(body)
    assert answer["response_action"] == "errors"
    first = next(b["block_id"] for b in view["blocks"] if b["type"] == "input")
    assert list(answer["errors"]) == [first]
    (error,) = answer["errors"].values()
    assert "amount" in error
    assert len(error) <= 150
    await bot.idle()
    assert refunds == []
    assert card.updates == 0
    assert has_buttons(card)

    fixed = submission(view, {**prefilled(view), "amount": "90"}, user=BOB)
    assert await bot.interact(fixed) == (200, "")
    await bot.idle()
    assert refunds == [{"order": "A-1", "amount": 90, "currency": "EUR"}]


async def test_someone_the_policy_does_not_allow_is_told_privately_and_nothing_opens_or_runs(
    till: Till, slack: FakeSlack, refunds: Refunds
) -> None:
    bot = await till(policy=ApprovalPolicy.from_toml(f'[tools.refund]\napprovers = ["{BOB}"]\n'))
    card = await ask(bot, slack)

    assert await bot.press(card, EDIT_ACTION, user=CAROL) == 200
    await bot.idle()
    (told,) = slack.of("chat.postEphemeral")
    assert told.args["user"] == CAROL
    assert "not one of the approvers" in told.args["text"]
    assert slack.of("views.open") == []

    # Bob's form, sent by Carol: refused for good, so the modal closes.
    view = await press_edit(bot, slack, card)
    forged = submission(view, {**prefilled(view), "amount": "1"}, user=CAROL)
    assert await bot.interact(forged) == (200, "")
    await bot.idle()
    assert [t.args["user"] for t in slack.of("chat.postEphemeral")] == [CAROL, CAROL]
    assert refunds == []
    assert card.updates == 0
    assert has_buttons(card)


async def test_a_card_that_needs_two_approvals_offers_no_edit(
    till: Till, slack: FakeSlack, refunds: Refunds
) -> None:
    policy = ApprovalPolicy.from_toml(
        f'[tools.refund]\napprovers = ["{BOB}", "{CAROL}"]\nquorum = 2\n'
    )
    bot = await till(policy=policy)
    card = await ask(bot, slack)
    assert buttons(card) == [(APPROVE_ACTION, "Approve"), (DECLINE_ACTION, "Decline")]

    # An Edit press forged from an ordinary button is refused, and nothing opens.
    payload = block_actions(card, APPROVE_ACTION, user=BOB)
    payload["actions"][0]["action_id"] = EDIT_ACTION
    assert (await bot.interact(payload))[0] == 200
    await bot.idle()
    (told,) = slack.of("chat.postEphemeral")
    assert told.args["user"] == BOB
    assert slack.of("views.open") == []
    assert refunds == []


async def test_arguments_too_long_for_a_slack_form_are_said_privately_and_nothing_opens(
    till: Till, slack: FakeSlack, refunds: Refunds
) -> None:
    bot = await till(order="A" * 3001)
    card = await ask(bot, slack)
    assert await bot.press(card, EDIT_ACTION, user=BOB) == 200
    await bot.idle()
    (told,) = slack.of("chat.postEphemeral")
    assert told.args["user"] == BOB
    assert "too long" in told.args["text"]
    assert slack.of("views.open") == []
    assert refunds == []
    assert has_buttons(card), "still approvable as asked"


# -- rendering and parsing, within Slack's limits -------------------------------------

META = ModalMetadata(run="r", call="c", team=TEAM_ID, channel=CHANNEL, root="1.1", ts="1.2")


def field(name: str, kind: FieldKind = "text", value: Any = None, **extra: Any) -> PromptField:
    return PromptField(name=name, label=name.title(), kind=kind, value=value, **extra)


def form(*fields: PromptField) -> Prompt:
    return Prompt(
        run_id="r",
        tool_call_id="c",
        tool_name="refund",
        agent_path=("billing",),
        question="Change what `refund` runs with <!here>",
        fields=fields,
    )


def elements(view: dict[str, Any]) -> list[dict[str, Any]]:
    return [b["element"] for b in view["blocks"] if b["type"] == "input"]


def test_each_input_starts_from_its_value_in_a_form_slack_accepts() -> None:
    view = edit_modal(
        META,
        form(
            field("note", value="two\nlines"),
            field("amount", "integer", 150),
            field("ratio", "number", 0.25),
            field("rush", "boolean", False),
            field("currency", "choice", "USD", choices=("EUR", "USD")),
            field("unset", "integer"),
            field("empty", value=""),
        ),
    )
    assert view is not None
    assert _view_problem(view) is None
    assert view["blocks"][0]["text"]["text"] == "Change what `refund` runs with &lt;!here&gt;"
    note, amount, ratio, rush, currency, unset, empty = elements(view)
    assert (note["initial_value"], note["multiline"]) == ("two\nlines", True)
    assert amount == {
        "type": "number_input",
        "action_id": amount["action_id"],
        "is_decimal_allowed": False,
        "initial_value": "150",
    }
    assert (ratio["initial_value"], ratio["is_decimal_allowed"]) == ("0.25", True)
    assert rush["initial_option"] == {"text": rush["options"][1]["text"], "value": "false"}
    assert currency["initial_option"]["value"] == "USD"
    assert "initial_value" not in unset
    assert "initial_value" not in empty
    names = decode_metadata(view["private_metadata"], FormMetadata).fields
    assert names == ("note", "amount", "ratio", "rush", "currency", "unset", "empty")


@pytest.mark.parametrize(
    ("kind", "value", "choices", "shown"),
    [
        ("integer", 10**20, (), "100000000000000000000"),
        ("number", 1e-07, (), "1e-07"),
        ("integer", 1.5, (), "1.5"),
        ("choice", "GBP", ("EUR", "USD"), "GBP"),
        ("boolean", "maybe", (), "maybe"),
    ],
)
def test_a_value_its_input_cannot_show_is_kept_in_a_text_input(
    kind: FieldKind, value: Any, choices: tuple[str, ...], shown: str
) -> None:
    view = edit_modal(META, form(field("x", kind, value, choices=choices)))
    assert view is not None
    assert _view_problem(view) is None
    (element,) = elements(view)
    assert element["type"] == "plain_text_input"
    assert element["initial_value"] == shown


def test_arguments_slack_cannot_carry_whole_open_no_form() -> None:
    assert edit_modal(META, form(field("script", value="x" * 3001))) is None
    assert edit_modal(META, form(*(field(f"f{i}", value=i) for i in range(100)))) is None
    assert edit_modal(META, form(*(field("n" * 200 + str(i)) for i in range(20)))) is None
    assert edit_modal(META, form(field("script", value="x" * 3000))) is not None


def test_the_answer_form_of_a_question_starts_empty() -> None:
    view = answer_modal(META, form(field("day", "choice", choices=("mon", "tue")), field("n")))
    assert all("initial_option" not in e and "initial_value" not in e for e in elements(view))


def test_values_are_sent_back_as_the_form_would_send_them() -> None:
    assert [initial_text(v) for v in (None, True, "x", 3, 2.5)] == [None, "true", "x", "3", "2.5"]


def decided(**extra: Any) -> ApprovalCard:
    """A card approved by Bob (``extra`` changes any of it)."""
    shown: dict[str, Any] = {
        "args": {"order": "A-1", "amount": 120, "note": "<b>"},
        "status": "approved",
        "decided_by": (Person(id=BOB),),
        **extra,
    }
    return ApprovalCard(
        run_id="r",
        tool_call_id="c",
        tool_name="refund",
        agent_path=("billing",),
        requester=Person(id=ALICE),
        expires_at=datetime.now(UTC),
        **shown,
    )


def test_the_edited_line_lists_only_changes_escaped_and_short() -> None:
    card = decided(
        previous_args={"order": "A-1", "amount": 150, "note": "x" * 500, "gone": True},
        edited_by=Person(id=BOB, name="<!channel>"),
    )
    message = drawn(card)
    (line,) = [
        b["elements"][0]["text"]
        for b in message.shown
        if b["type"] == "context" and b["elements"][0]["text"].startswith("✏️")
    ]
    assert line.startswith(f"✏️ Edited by <@{BOB}>: `amount`: 150 → 120; `note`: ")
    assert "→ &lt;b&gt;" in line
    assert "<b>" not in line
    assert "`order`" not in line
    assert "`gone`: true → (none)" in line
    assert "x" * 200 + "…" in line
    assert "x" * 201 not in line
    assert message.text.startswith(
        "refund: ✅ Approved by <@U0BOB0001> (edited: amount: 150 → 120; note: x"
    )
    assert message.text.endswith(" → &lt;b&gt;; gone: true → (none))")
    assert "order" not in message.text
    assert [b["type"] for b in message.shown][-2:] == ["context", "context"]


def test_an_edit_that_changed_nothing_reads_as_a_plain_approval() -> None:
    same = drawn(
        decided(previous_args={"order": "A-1", "amount": 120, "note": "<b>"}, edited_by=None)
    )
    plain = drawn(decided())
    assert "Edited" not in json.dumps(same.shown)
    assert "Edited" not in json.dumps(plain.shown)
    assert same.shown == plain.shown
    assert same.text == plain.text == "refund: ✅ Approved by <@U0BOB0001>"


def test_the_edit_button_and_the_edit_form_become_edit_clicks() -> None:
    pending = decided(
        status="pending", decided_by=(), editable=True, fields=(field("amount", "integer", 120),)
    )
    actions = next(b for b in drawn(pending).shown if b["type"] == "actions")
    posted = Posted(CHANNEL, "1.2", "1.1", "card", [actions])
    pressed = parse(block_actions(posted, EDIT_ACTION, user=BOB))
    assert isinstance(pressed, ActionIn)
    click = to_click(pressed, workspace=None)
    assert (click.action, click.run_id, click.tool_call_id, click.values) == (
        "edit",
        "r",
        "c",
        None,
    )

    view = edit_modal(META, form(field("amount", "integer", 150)))
    assert view is not None
    sent = parse(submission(view, {"amount": "120"}, user=BOB))
    assert isinstance(sent, FormIn)
    click = to_form_click(sent)
    assert (click.action, click.values, click.user_id) == ("edit", {"amount": "120"}, BOB)
    assert click.message_ref == {"channel": CHANNEL, "ts": "1.2"}
    assert click.thread.id == f"slack:{TEAM_ID}:{CHANNEL}:1.1"


RESPONDING = ApprovalPolicy.from_toml("[tools.refund]\nrespond = true\n")


async def test_respond_instead_opens_a_form_and_its_answer_is_the_result_nothing_runs(
    till: Till, slack: FakeSlack, refunds: Refunds
) -> None:
    bot = await till(policy=RESPONDING)
    card = await ask(bot, slack)
    assert ("approval_respond", "Respond instead") in buttons(card)
    assert await bot.press(card, RESPOND_ACTION, user=BOB) == 200
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    (opened,) = slack.of("views.open")
    view: dict[str, Any] = opened.args["view"]
    assert view["callback_id"] == RESPOND_VIEW
    assert (view["title"]["text"], view["submit"]["text"]) == ("Respond instead", "Send, don't run")
    assert card.updates == 0, "opening the form decides nothing"

    empty = submission(view, {"response": ""}, user=BOB)
    status, body = await bot.interact(empty)
    assert status == 200
    assert json.loads(body)["response_action"] == "errors"
    assert refunds == []

    sent = submission(view, {"response": "Refunded it by hand."}, user=BOB)
    assert await bot.interact(sent) == (200, "")
    await bot.idle()
    assert refunds == []
    shown = card_text(card)
    assert f"Not run: <@{BOB}> answered for it: Refunded it by hand." in shown
    assert not has_buttons(card)
    assert "Refunded it by hand." in answers(slack, card)
