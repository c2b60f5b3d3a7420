"""Policy tiers at Slack's HTTP edge: the refund example at 90, 500 and 5000.

90 runs without a card (the policy approved it, on record); 500 waits for the team
lead; 5000 waits for two of finance, and the lead's click is refused.
"""

from __future__ import annotations

import pytest

from adapters.slack.wire import APPROVE_ACTION, EDIT_ACTION, grant_action
from agents import Agent, Message, ModelResponse, Store, ToolCall, tool
from agents.models.base import ModelRequest
from agents.models.function import FunctionModel
from bot import ApprovalPolicy
from tests.agents.helpers import last_results
from tests.bot.test_tiers import REFUNDS as POLICY

from .conftest import StartBot
from .fake_slack import FakeSlack, Posted
from .harness import CHANNEL, BotServer, block_actions, mention_event
from .test_approvals import card_text, has_buttons
from .test_edit import prefilled
from .test_questions import submission

LEAD, FIN1, FIN2, FIN3 = "U0LEAD001", "U0FIN0001", "U0FIN0002", "U0FIN0003"


def refunds_by_amount(store: Store, refunds: list[int]) -> Agent:
    """A bot whose model refunds A-1 by the number its request ends with."""

    @tool(require_approval=True)
    def refund(order: str, amount: int) -> str:
        """Refund part of an order."""
        refunds.append(amount)
        return "refunded"

    def respond(messages: list[Message], request: ModelRequest) -> ModelResponse:
        if last_results(messages):
            return ModelResponse(text="Done.")
        amount = int(messages[-1].text.split()[-1])
        return ModelResponse(tool_calls=[ToolCall("refund", {"order": "A-1", "amount": amount})])

    return Agent(id="billing", model=FunctionModel(respond), tools=[refund], store=store)


async def refund_bot(
    serve: StartBot, store: Store, refunds: list[int], policy: str = POLICY
) -> BotServer:
    """A bot of ``refunds_by_amount`` under ``policy``."""
    return await serve(refunds_by_amount(store, refunds), policy=ApprovalPolicy.from_toml(policy))


async def asked(bot: BotServer, slack: FakeSlack, amount: int) -> tuple[str, list[Posted]]:
    """Ask for a refund of ``amount`` in a new thread; its root and the cards posted there."""
    root = mention_event(f"refund A-1 {amount}")
    assert await bot.send_event(root) == 200
    await bot.idle()
    return root["ts"], [m for m in slack.in_thread(CHANNEL, root["ts"]) if has_buttons(m)]


async def edit_to(
    bot: BotServer, slack: FakeSlack, card: Posted, amount: int, *, user: str
) -> tuple[int, str]:
    """Edit ``card``'s amount as ``user`` (Edit, then the form sent); the answer, and
    what the clicker was told privately since."""
    opened = len(slack.of("views.open"))
    assert await bot.press(card, EDIT_ACTION, user=user) == 200
    await slack.wait_for(lambda: len(slack.of("views.open")) > opened, what="the edit form")
    view = slack.of("views.open")[-1].args["view"]
    told = len(slack.of("chat.postEphemeral"))
    sent = submission(view, {**prefilled(view), "amount": str(amount)}, user=user)
    status, body = await bot.interact(sent)
    await bot.idle()
    said = " ".join(str(c.args) for c in slack.of("chat.postEphemeral")[told:])
    return status, f"{body} {said}"


@pytest.fixture
def refunds() -> list[int]:
    return []


async def test_90_runs_without_a_card_and_the_policy_is_on_record(
    serve: StartBot, store: Store, slack: FakeSlack, refunds: list[int]
) -> None:
    bot = await refund_bot(serve, store, refunds)
    root, cards = await asked(bot, slack, 90)
    assert cards == []
    assert refunds == [90]
    said = "\n".join(m.text for m in slack.in_thread(CHANNEL, root))
    assert "grant" not in said.lower(), "no grant notice: nobody granted anything"
    (granted,) = [e for e in await bot.bot.agent.audit() if e.event == "granted"]
    assert (granted.tool_name, granted.actor) == ("refund", "policy:tools.refund.tiers[0]")


async def test_500_waits_for_the_lead(
    serve: StartBot, store: Store, slack: FakeSlack, refunds: list[int]
) -> None:
    bot = await refund_bot(serve, store, refunds)
    _, (card,) = await asked(bot, slack, 500)
    assert await bot.press(card, APPROVE_ACTION, user=FIN1) == 200
    await bot.idle()
    assert refunds == []
    assert await bot.press(card, APPROVE_ACTION, user=LEAD) == 200
    await bot.idle()
    assert refunds == [500]
    assert f"Approved by <@{LEAD}>" in card_text(card)


async def test_5000_waits_for_two_of_finance_and_the_lead_may_not_decide(
    serve: StartBot, store: Store, slack: FakeSlack, refunds: list[int]
) -> None:
    bot = await refund_bot(serve, store, refunds)
    _, (card,) = await asked(bot, slack, 5000)
    shown = card_text(card)
    assert "(0 of 2)" in shown
    assert await bot.press(card, APPROVE_ACTION, user=LEAD) == 200
    await bot.idle()
    refused = slack.of("chat.postEphemeral")
    assert [c.args["user"] for c in refused] == [LEAD]
    assert "not one of the approvers" in str(refused[0].args)

    for voter in (FIN1, FIN3):
        assert await bot.press(card, APPROVE_ACTION, user=voter) == 200
        await bot.idle()
    assert refunds == [5000]
    decided = card_text(card)
    assert f"<@{FIN1}>" in decided
    assert f"<@{FIN3}>" in decided


async def test_an_edit_into_another_tier_asks_again_on_a_new_card_and_one_within_it_approves(
    serve: StartBot, store: Store, slack: FakeSlack, refunds: list[int]
) -> None:
    bot = await refund_bot(serve, store, refunds)
    root, (card,) = await asked(bot, slack, 500)
    late = block_actions(card, APPROVE_ACTION, user=LEAD)  # a click on the card as it was
    assert (await edit_to(bot, slack, card, 5000, user=LEAD))[0] == 200
    assert refunds == []
    assert not has_buttons(card)
    assert f"Edited by <@{LEAD}>: asked again below as edited" in card_text(card)
    (again,) = [m for m in slack.in_thread(CHANNEL, root) if has_buttons(m)]
    assert "(0 of 2)" in card_text(again)
    assert '"amount": 5000' in card_text(again)
    assert (await bot.interact(late))[0] == 200  # the old card decides nothing now
    await bot.idle()
    assert refunds == []
    for voter in (FIN1, FIN2):
        assert await bot.press(again, APPROVE_ACTION, user=voter) == 200
        await bot.idle()
    assert refunds == [5000]
    edited = [e for e in await bot.bot.agent.audit() if e.event == "edited"]
    assert [(e.actor, e.args["amount"], (e.previous_args or {})["amount"]) for e in edited] == [
        (LEAD, 5000, 500)
    ]


async def test_an_edit_within_its_tier_approves_as_edited(
    serve: StartBot, store: Store, slack: FakeSlack, refunds: list[int]
) -> None:
    bot = await refund_bot(serve, store, refunds)
    _, (card,) = await asked(bot, slack, 500)
    assert (await edit_to(bot, slack, card, 600, user=LEAD))[0] == 200
    assert refunds == [600]


GROUPS = """
[tools.refund]
approvers = ["S0FINANCE", "S0SECURITY"]
quorum = 2
distinct_groups = 2
deciders_when = "decider.id != 'U0MALLORY' || args.amount < 100"
"""


async def test_a_quorum_from_two_groups_and_a_rule_on_who_decides(
    serve: StartBot, store: Store, slack: FakeSlack, refunds: list[int]
) -> None:
    slack.add_group("S0FINANCE", "finance", [FIN1, FIN2, "U0MALLORY"])
    slack.add_group("S0SECURITY", "security", [FIN3])

    bot = await refund_bot(serve, store, refunds, GROUPS)
    _, (card,) = await asked(bot, slack, 500)

    # Mallory is in finance, but the rule keeps her off refunds of 100 or more.
    assert await bot.press(card, APPROVE_ACTION, user="U0MALLORY") == 200
    await bot.idle()
    # FIN1 votes for finance; FIN2, finance too, would leave security out: refused.
    for voter in (FIN1, FIN2):
        assert await bot.press(card, APPROVE_ACTION, user=voter) == 200
        await bot.idle()
    told = {c.args["user"]: c.args["text"] for c in slack.of("chat.postEphemeral")}
    assert "deciders_when" in told["U0MALLORY"]
    assert "2 different groups" in told[FIN2]
    assert FIN1 not in told
    assert refunds == []

    assert await bot.press(card, APPROVE_ACTION, user=FIN3) == 200  # security: the second
    await bot.idle()
    assert refunds == [500]
    shown = card_text(card)
    assert f"<@{FIN1}>" in shown
    assert f"<@{FIN3}>" in shown
    assert f"<@{FIN2}>" not in shown


async def test_a_grant_given_in_one_tier_never_covers_a_call_of_another(
    serve: StartBot, store: Store, slack: FakeSlack, refunds: list[int]
) -> None:
    policy = POLICY.replace(
        'approvers = ["U0LEAD001"]\n', 'approvers = ["U0LEAD001"]\ngrant_for = ["1h"]\n', 1
    )
    bot = await refund_bot(serve, store, refunds, policy)
    first = mention_event("refund A-1 500")
    assert await bot.send_event(first) == 200
    await bot.idle()
    (card,) = [m for m in slack.in_thread(CHANNEL, first["ts"]) if has_buttons(m)]
    assert await bot.press(card, grant_action(0), user=LEAD) == 200
    await bot.idle()
    assert refunds == [500]

    for text, ran in (("refund A-1 600", [500, 600]), ("refund A-1 5000", [500, 600])):
        again = mention_event(text, thread_ts=first["ts"])
        assert await bot.send_event(again) == 200
        await bot.idle()
        assert refunds == ran
    waiting = [m for m in slack.in_thread(CHANNEL, first["ts"]) if has_buttons(m)]
    assert len(waiting) == 1, "the 5000 (finance's tier) waits on a card of its own"
    assert "(0 of 2)" in card_text(waiting[0])


async def test_an_edit_is_checked_against_deciders_when_as_it_would_run(
    serve: StartBot, store: Store, slack: FakeSlack, refunds: list[int]
) -> None:
    policy = (
        '[tools.refund]\napprovers = ["U0LEAD001", "U0MALLORY"]\n'
        "deciders_when = \"decider.id != 'U0MALLORY' || args.amount < 100\"\n"
    )
    bot = await refund_bot(serve, store, refunds, policy)
    _, (card,) = await asked(bot, slack, 50)
    status, told = await edit_to(bot, slack, card, 5000, user="U0MALLORY")
    assert status == 200
    assert "deciders_when" in told
    assert refunds == []
    assert await bot.press(card, APPROVE_ACTION, user="U0MALLORY") == 200  # 50: hers to approve
    await bot.idle()
    assert refunds == [50]


async def test_an_editor_may_not_approve_their_own_edit_when_the_policy_says_so(
    serve: StartBot, store: Store, slack: FakeSlack, refunds: list[int]
) -> None:
    policy = '[tools.refund]\napprovers = ["U0LEAD001", "U0FIN0001"]\neditor_may_approve = false\n'
    bot = await refund_bot(serve, store, refunds, policy)
    root, (card,) = await asked(bot, slack, 500)
    assert (await edit_to(bot, slack, card, 450, user=LEAD))[0] == 200
    assert refunds == [], "the edit asked again instead of approving"
    (again,) = [m for m in slack.in_thread(CHANNEL, root) if has_buttons(m)]
    assert await bot.press(again, APPROVE_ACTION, user=LEAD) == 200
    await bot.idle()
    told = [c.args["text"] for c in slack.of("chat.postEphemeral")]
    assert any("You edited this `refund` request" in t for t in told)
    assert refunds == []
    assert await bot.press(again, APPROVE_ACTION, user=FIN1) == 200
    await bot.idle()
    assert refunds == [450]
