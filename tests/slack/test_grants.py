""" "Approve for this thread (1h)" on an approval card in Slack.

A grant approves the call, and the same tool's later calls in that thread by the same
requester, for a while, without new cards. The agent asks to refund A-1 by 150 on
every request; the ``refund`` tool records every refund that really runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.slack.convert import ActionIn, ForeignActionIn, parse, to_click
from adapters.slack.wire import (
    APPROVE_ACTION,
    DECLINE_ACTION,
    EDIT_ACTION,
    ButtonValue,
    GrantValue,
    PayloadError,
    decode_button_value,
    encode_button_value,
    grant_action,
    never_action,
)
from agents import Agent, Store, ToolCall, tool
from bot import ApprovalCard, ApprovalPolicy, Person, PromptField
from bot import texts as core_texts
from tests.agents.helpers import call_then_answer

from .conftest import StartBot
from .fake_slack import TEAM_ID, FakeSlack, Posted, _block_problem
from .harness import ALICE, BOB, CHANNEL, BotServer, block_actions, drawn
from .test_approvals import card_text, has_buttons, request, the_card
from .test_questions import CAROL, buttons

GRANTS = '[tools.refund]\ngrant_for = ["1h", "1d"]\n'
GRANT_1H = grant_action(0)
GRANT_1D = grant_action(1)
EXPIRES = datetime(2030, 1, 2, 3, 4, tzinfo=UTC)
EDITABLE: dict[str, Any] = {
    "editable": True,
    "fields": (PromptField(name="amount", label="Amount", kind="integer", value=150),),
}
"""What makes a card editable: its arguments as the edit form's fields."""

Refunds = list[dict[str, Any]]
Till = Callable[..., Awaitable[BotServer]]


# -- rendering and parsing ------------------------------------------------------------


def card(**extra: Any) -> ApprovalCard:
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "tool_call_id": "call-1",
        "tool_name": "refund",
        "args": {"order": "A-1", "amount": 150},
        "agent_path": ("billing",),
        "requester": Person(id=ALICE),
        "expires_at": EXPIRES,
    }
    return ApprovalCard(**{**fields, **extra})


def elements(message_blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (actions,) = [b for b in message_blocks if b["type"] == "actions"]
    found: list[dict[str, Any]] = actions["elements"]
    return found


def shown(message_blocks: list[dict[str, Any]]) -> str:
    out = []
    for block in message_blocks:
        if "text" in block:
            out.append(block["text"]["text"])
        out.extend(e["text"] for e in block.get("elements", []) if e.get("type") == "mrkdwn")
    return "\n".join(out)


def test_a_pending_card_has_one_grant_button_per_duration_after_the_others() -> None:
    message = drawn(card(grant_for=("1h", "1d"), **EDITABLE))
    approve, decline, edit, hour, day = elements(message.shown)
    assert [e["action_id"] for e in (approve, decline, edit)] == [
        APPROVE_ACTION,
        DECLINE_ACTION,
        EDIT_ACTION,
    ]
    assert [(e["action_id"], e["text"]["text"]) for e in (hour, day)] == [
        (GRANT_1H, "Approve for this thread (1h)"),
        (GRANT_1D, "Approve for this thread (1d)"),
    ]
    assert decode_button_value(hour["value"], GrantValue) == GrantValue(
        run="run-1", call="call-1", grant="1h"
    )
    assert decode_button_value(day["value"], GrantValue).grant == "1d"
    assert "style" not in hour, "Approve stays the primary button"
    confirm = hour["confirm"]["text"]["text"]
    assert "`refund`" in confirm
    assert "for 1h" in confirm
    assert "without a new card" in confirm
    (actions,) = [b for b in message.shown if b["type"] == "actions"]
    assert _block_problem(actions) is None


def test_a_card_without_durations_has_no_grant_buttons() -> None:
    labels = [e["text"]["text"] for e in elements(drawn(card()).shown)]
    assert labels == ["Approve", "Decline"]


def test_many_or_long_durations_stay_within_slack_limits() -> None:
    many = tuple(f"{n}h" for n in range(1, 40))
    message = drawn(card(grant_for=many, **EDITABLE))
    buttons_shown = elements(message.shown)
    assert len(buttons_shown) == 25
    assert [e["text"]["text"] for e in buttons_shown[3:5]] == [
        "Approve for this thread (1h)",
        "Approve for this thread (2h)",
    ]
    (actions,) = [b for b in message.shown if b["type"] == "actions"]
    assert _block_problem(actions) is None

    long = "1d" + "1h" * 60
    (*_, granted) = elements(drawn(card(grant_for=(long,))).shown)
    assert len(granted["text"]["text"]) <= 75
    assert granted["text"]["text"].endswith("…")
    assert decode_button_value(granted["value"], GrantValue).grant == long, "never shortened"


def test_a_card_approved_by_a_grant_says_for_how_long() -> None:
    granted = drawn(card(status="approved", decided_by=(Person(id=BOB),), granted_for="1h"))
    assert f"Approved by <@{BOB}> for this thread (1h)" in shown(granted.shown)
    assert "for this thread (1h)" in granted.text
    assert not any(b["type"] == "actions" for b in granted.shown)

    plain = drawn(card(status="approved", decided_by=(Person(id=BOB),)))
    assert "for this thread" not in shown(plain.shown)


def _press(action_id: str, value: str) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": {"id": BOB},
        "team": {"id": TEAM_ID},
        "trigger_id": "t",
        "container": {"type": "message", "channel_id": CHANNEL, "message_ts": "2.0"},
        "actions": [{"action_id": action_id, "value": value}],
    }


def test_a_grant_button_is_a_grant_click_for_its_duration() -> None:
    parsed = parse(_press(GRANT_1D, encode_button_value("r", "c", grant_for="1d")))
    assert isinstance(parsed, ActionIn)
    click = to_click(parsed, workspace=None)
    assert (click.run_id, click.tool_call_id, click.action) == ("r", "c", "grant")
    assert click.grant_for == "1d"

    approve = parse(_press(APPROVE_ACTION, encode_button_value("r", "c")))
    assert isinstance(approve, ActionIn)
    assert to_click(approve, workspace=None).grant_for is None


@pytest.mark.parametrize(
    ("action_id", "value"),
    [
        (GRANT_1H, encode_button_value("r", "c")),  # a grant that says not for how long
        (APPROVE_ACTION, encode_button_value("r", "c", grant_for="1h")),
        (GRANT_1H, '{"run":"r","call":"c","grant":""}'),
        (GRANT_1H, '{"run":"r","call":"c","grant":1}'),
        (GRANT_1H, '{"run":"r","call":"c","grant":"1h","x":1}'),
    ],
)
def test_a_grant_value_that_does_not_match_its_button_decides_nothing(
    action_id: str, value: str
) -> None:
    assert isinstance(parse(_press(action_id, value)), ForeignActionIn)


def test_grant_values_are_ours_or_rejected() -> None:
    value = encode_button_value("run", "call", grant_for="1h")
    assert decode_button_value(value, GrantValue).grant == "1h"
    assert decode_button_value(encode_button_value("run", "call")) == ButtonValue(
        run="run", call="call"
    )
    with pytest.raises(ValueError, match="limit"):
        encode_button_value("r", "c", grant_for="1h" * 1000)
    for bad in (
        None,
        "",
        "{}",
        '{"run": "a", "call": "b"}',
        '{"run": "a", "call": "b", "grant": null}',
    ):
        with pytest.raises(PayloadError):
            decode_button_value(bad, GrantValue)
    for not_ours in (
        "approval_grant",
        "approval_grant:x",
        "approval_grant:1\n",
        "approval_grant:١",
    ):
        with pytest.raises(PayloadError):
            parse(_press(not_ours, value))


# -- at the HTTP edge ---------------------------------------------------------------


@pytest.fixture
def refunds() -> Refunds:
    return []


@pytest.fixture
def till(serve: StartBot, store: Store, refunds: Refunds) -> Till:
    """Start a bot whose model asks to refund A-1 by 150 on every request."""

    @tool(require_approval=True)
    def refund(order: str, amount: int) -> str:
        """Refund part of an order."""
        refunds.append({"order": order, "amount": amount})
        return f"refunded {amount} on {order}"

    async def start(policy: str | None = GRANTS) -> BotServer:
        model = call_then_answer(ToolCall("refund", {"order": "A-1", "amount": 150}))
        agent = Agent(id="billing", model=model, tools=[refund], store=store)
        rules = ApprovalPolicy.from_toml(policy) if policy is not None else None
        return await serve(agent, policy=rules)

    return start


async def ask(
    bot: BotServer, slack: FakeSlack, *, thread_ts: str | None = None, user: str = ALICE
) -> tuple[str, list[Posted]]:
    """Ask for the refund (in a new thread, or in ``thread_ts``)."""
    return await request(bot, slack, "refund A-1", user=user, thread_ts=thread_ts)


async def grant(bot: BotServer, slack: FakeSlack, *, user: str = BOB) -> tuple[str, Posted]:
    """Ask in a new thread and press "Approve for this thread (1h)" as ``user``."""
    root, posted = await ask(bot, slack)
    card = the_card(posted)
    assert await bot.press(card, GRANT_1H, user=user) == 200
    await bot.idle()
    return root, card


async def test_the_pending_card_offers_the_policys_durations(till: Till, slack: FakeSlack) -> None:
    _, posted = await ask(await till(), slack)
    assert buttons(the_card(posted)) == [
        (APPROVE_ACTION, "Approve"),
        (DECLINE_ACTION, "Decline"),
        (EDIT_ACTION, "Edit"),
        (GRANT_1H, "Approve for this thread (1h)"),
        (GRANT_1D, "Approve for this thread (1d)"),
    ]


@pytest.mark.parametrize(
    "policy",
    [
        None,
        '[tools.refund]\nexpires_in = "1h"\n',
        '[default]\ngrant_for = ["1h"]\n'
        f'[tools.refund]\napprovers = ["{BOB}", "{CAROL}"]\nquorum = 2\n',
    ],
    ids=["no policy", "no grant_for", "quorum of two"],
)
async def test_no_grant_buttons_without_grant_for_or_on_a_quorum_card(
    till: Till, slack: FakeSlack, policy: str | None
) -> None:
    _, posted = await ask(await till(policy), slack)
    labels = [label for _, label in buttons(the_card(posted))]
    assert labels[:2] == ["Approve", "Decline"]
    assert not any("for this thread" in label for label in labels)


async def test_approve_for_this_thread_runs_the_tool_once_and_the_card_says_so(
    till: Till, slack: FakeSlack, refunds: Refunds
) -> None:
    bot = await till()
    root, posted = await ask(bot, slack)
    card = the_card(posted)
    press = block_actions(card, GRANT_1H, user=BOB)
    assert (await bot.interact(press))[0] == 200
    await bot.idle()

    assert refunds == [{"order": "A-1", "amount": 150}]
    assert f"Approved by <@{BOB}> for this thread (1h)" in card_text(card)
    assert not has_buttons(card)
    assert "refunded 150 on A-1" in "\n".join(m.text for m in slack.in_thread(CHANNEL, root))

    assert (await bot.interact(press))[0] == 200, "pressed again: nothing more runs"
    await bot.idle()
    (told,) = slack.of("chat.postEphemeral")
    assert told.args["user"] == BOB
    assert len(refunds) == 1


async def test_the_same_request_in_the_same_thread_runs_without_a_card_and_says_so(
    till: Till, slack: FakeSlack, refunds: Refunds
) -> None:
    bot = await till()
    root, _ = await grant(bot, slack)

    _, posted = await ask(bot, slack, thread_ts=root)

    assert len(refunds) == 2
    assert not any(has_buttons(m) for m in posted), "no new card"
    said = [m.text for m in posted]
    notice = f"<@{BOB}>: {core_texts.GRANTED_RUN.format(tool='refund')}"
    assert notice in said, "the one who granted it is told, in one line"
    assert any("refunded 150 on A-1" in text for text in said), said


async def test_the_same_request_in_another_thread_gets_a_card_again(
    till: Till, slack: FakeSlack, refunds: Refunds
) -> None:
    bot = await till()
    await grant(bot, slack)

    _, posted = await ask(bot, slack)

    card = the_card(posted)
    assert len(refunds) == 1
    assert (GRANT_1H, "Approve for this thread (1h)") in buttons(card)
    assert not any("under your grant" in m.text for m in posted)


async def test_someone_else_asking_in_the_granted_thread_gets_a_card(
    till: Till, slack: FakeSlack, refunds: Refunds
) -> None:
    bot = await till()
    root, _ = await grant(bot, slack)

    _, posted = await ask(bot, slack, thread_ts=root, user=CAROL)

    assert has_buttons(the_card(posted))
    assert len(refunds) == 1


async def test_a_grant_the_policy_does_not_let_the_clicker_give_is_refused_privately(
    till: Till, slack: FakeSlack, refunds: Refunds
) -> None:
    bot = await till(f'[tools.refund]\napprovers = ["{BOB}"]\ngrant_for = ["1h"]\n')
    _, posted = await ask(bot, slack)
    card = the_card(posted)

    assert await bot.press(card, GRANT_1H, user=CAROL) == 200
    await bot.idle()

    (told,) = slack.of("chat.postEphemeral")
    assert told.args["user"] == CAROL
    assert refunds == []
    assert card.updates == 0
    assert has_buttons(card)


async def test_a_forged_duration_is_refused_and_nothing_runs(
    till: Till, slack: FakeSlack, refunds: Refunds
) -> None:
    bot = await till()
    _, posted = await ask(bot, slack)
    card = the_card(posted)
    forged = encode_button_value(*_call_of(card), grant_for="365d")

    status, _ = await bot.interact(block_actions(card, GRANT_1H, user=BOB, value=forged))
    assert status == 200
    await bot.idle()

    (told,) = slack.of("chat.postEphemeral")
    assert told.args["user"] == BOB
    assert refunds == []
    assert has_buttons(card)


def _call_of(card: Posted) -> tuple[str, str]:
    approve = next(
        e for b in card.shown for e in b.get("elements", []) if e.get("action_id") == APPROVE_ACTION
    )
    value = decode_button_value(approve["value"])
    return value.run, value.call


NEVERS = '[tools.refund]\nnever_for = ["1h"]\n'
NEVER_1H = never_action(0)


async def test_decline_and_dont_ask_again_here_declines_later_calls_without_a_card(
    till: Till, slack: FakeSlack, refunds: Refunds
) -> None:
    bot = await till(NEVERS)
    root, posted = await ask(bot, slack)
    card = the_card(posted)
    (offered,) = [e for e in elements(card.shown) if e["action_id"] == NEVER_1H]
    assert offered["text"]["text"] == "Decline, don't ask again here (1h)"
    assert offered["style"] == "danger"
    assert "confirm" in offered

    assert await bot.press(card, NEVER_1H, user=BOB) == 200
    await bot.idle()
    assert not has_buttons(card)
    assert f"Declined by <@{BOB}>, and not asked again in this thread for 1h" in card_text(card)

    # The same tool, asked again in that thread by anyone: declined, no card, and the
    # model says why.
    _, again = await ask(bot, slack, thread_ts=root, user=CAROL)
    assert not any(has_buttons(m) for m in again), "no new card"
    assert any("said not to ask again for refund in this thread" in m.text for m in again)
    assert refunds == []

    # Another thread asks as usual; "revoke" in the first ends the decline there.
    _, elsewhere = await ask(bot, slack)
    assert any(has_buttons(m) for m in elsewhere)
    await request(bot, slack, "revoke", thread_ts=root)
    _, after = await ask(bot, slack, thread_ts=root)
    assert any(has_buttons(m) for m in after)
    assert refunds == []
