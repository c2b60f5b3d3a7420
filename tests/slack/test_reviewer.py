"""The reviewer model (``review = "model"``) at Slack's HTTP edge, with Claude faked at
the Messages API: ``clear`` runs the call without a card, on record; ``caution`` puts
its reason on the card; a timeout or an answer that is neither leaves it to a person,
and the card says so."""

from __future__ import annotations

import asyncio

import pytest

from adapters.slack.wire import APPROVE_ACTION
from agents import Store
from agents.models.anthropic import AnthropicModel
from bot import ApprovalPolicy, PolicyError
from bot.reviewer import PROMPT
from tests.models.fake_anthropic import FakeAnthropic, Reply, Text, ToolUse, message_reply

from .conftest import StartBot
from .fake_slack import FakeSlack
from .harness import CHANNEL, BotServer
from .test_approvals import card_text
from .test_tiers import asked, refund_bot

LEAD = "U0LEAD001"
POLICY = f'[tools.refund]\napprovers = ["{LEAD}"]\nreview = "model"\n'


def verdict(verdict: str, reason: str) -> Reply:
    return message_reply(
        ToolUse(id="toolu_1", name="review", input={"verdict": verdict, "reason": reason}),
        stop_reason="tool_use",
    )


async def reviewed(
    serve: StartBot, store: Store, claude: AnthropicModel, refunds: list[int], *, within: float = 5
) -> BotServer:
    """A refunds bot whose reviewer is ``claude``, given ``within`` seconds."""
    bot = await refund_bot(serve, store, refunds, POLICY)
    bot.bot.reviewer.model = claude
    bot.bot.reviewer.timeout = within
    return bot


async def test_clear_runs_the_call_without_a_card_on_record_with_the_reason(
    serve: StartBot, store: Store, slack: FakeSlack, fake: FakeAnthropic, claude: AnthropicModel
) -> None:
    fake.script(verdict("clear", "a 40 refund the customer asked for"))
    refunds: list[int] = []
    bot = await reviewed(serve, store, claude, refunds)
    root, cards = await asked(bot, slack, 40)
    assert cards == []
    assert refunds == [40]
    assert any("reviewer cleared it" in m.text for m in slack.in_thread(CHANNEL, root))

    (request,) = fake.requests
    assert request.body["tool_choice"] == {"type": "tool", "name": "review"}
    assert PROMPT.strip()[:60] in str(request.body["system"])
    assert '"amount": 40' in str(request.body["messages"])
    assert "user: refund A-1 40" in str(request.body["messages"])  # the request it reviews
    entries = await bot.bot.agent.audit()
    (cleared,) = [e for e in entries if e.event == "auto_approved"]
    assert cleared.actor == f"reviewer:{claude.name}"
    assert cleared.reason == "a 40 refund the customer asked for"
    assert [e.event for e in entries if e.tool_call_id == cleared.tool_call_id] == [
        "auto_approved",
        "granted",
    ]


async def test_caution_puts_the_reason_on_the_card_and_a_person_decides(
    serve: StartBot, store: Store, slack: FakeSlack, fake: FakeAnthropic, claude: AnthropicModel
) -> None:
    fake.script(verdict("caution", "the order was refunded yesterday"))
    refunds: list[int] = []
    bot = await reviewed(serve, store, claude, refunds)
    _, (card,) = await asked(bot, slack, 40)
    assert "Reviewer: caution: the order was refunded yesterday" in card_text(card)
    assert await bot.press(card, APPROVE_ACTION, user=LEAD) == 200
    await bot.idle()
    assert refunds == [40]
    assert "Reviewer" not in card_text(card), "a decided card keeps its record, not the note"


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (verdict("maybe", "who knows"), "an answer that is neither clear nor caution"),
        (message_reply(Text(pieces=["Looks fine to me!"])), "without calling 'review'"),
    ],
)
async def test_an_answer_that_is_no_verdict_leaves_it_to_a_person(
    serve: StartBot,
    store: Store,
    slack: FakeSlack,
    fake: FakeAnthropic,
    claude: AnthropicModel,
    reply: Reply,
    why: str,
) -> None:
    fake.script(reply)
    refunds: list[int] = []
    bot = await reviewed(serve, store, claude, refunds)
    _, (card,) = await asked(bot, slack, 40)
    shown = card_text(card)
    assert "Reviewer: no verdict" in shown
    assert why in shown
    assert refunds == []


async def test_a_reviewer_that_does_not_answer_in_time_leaves_it_to_a_person(
    serve: StartBot, store: Store, slack: FakeSlack, fake: FakeAnthropic, claude: AnthropicModel
) -> None:
    late = asyncio.Event()
    fake.script(Reply(json_body=verdict("clear", "fine").json_body, hold=late))
    refunds: list[int] = []
    bot = await reviewed(serve, store, claude, refunds, within=0.3)
    try:
        _, (card,) = await asked(bot, slack, 40)
        assert "Reviewer: no verdict (no answer within 0.3 s)" in card_text(card)
        assert refunds == []
    finally:
        late.set()


def test_a_reviewer_never_stands_in_for_a_quorum() -> None:
    with pytest.raises(PolicyError) as raised:
        ApprovalPolicy.from_toml(
            '[tools.refund]\napprovers = ["U1", "U2"]\nquorum = 2\nreview = "model"\n'
        )
    assert raised.value.field == "tools.refund.review"
