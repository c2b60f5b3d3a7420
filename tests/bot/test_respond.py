"""Respond instead of run: an approver answers in the tool's place; it never runs."""

from __future__ import annotations

from dataclasses import replace

from bot import ApprovalCard, ApprovalPolicy, Click, Reply
from bot.compose import compose
from bot.document import Button
from tests.agents.helpers import Counter

from .helpers import click, restart_requested

RESPONDING = ApprovalPolicy.from_toml("[tools.restart_service]\nrespond = true\n")


def respond(card: ApprovalCard, text: str, *, user: str = "U2") -> Click:
    return replace(click(card, user=user), action="respond", values={"response": text})


async def test_a_response_is_the_tools_result_and_the_tool_never_runs() -> None:
    ran = Counter()
    bot, messenger, card = await restart_requested(ran, RESPONDING)
    buttons = [b for b in compose(card).actions if isinstance(b, Button)]
    (offered,) = [b for b in buttons if b.action == "respond"]
    assert offered.form is not None
    assert [f.name for f in offered.form.fields] == ["response"]

    result = await bot.on_click(respond(card, "Already restarted it by hand."))
    await bot.drain()
    assert result.accepted
    assert ran.count == 0
    decided = messenger.updates[-1][2]
    assert isinstance(decided, ApprovalCard)
    assert decided.status == "responded"
    assert decided.reason == "Already restarted it by hand."
    run = await bot.agent.get_run(card.run_id)
    (given,) = run.tool_results
    assert (given.content, given.given_by) == ("Already restarted it by hand.", "U2")
    entries = await bot.agent.audit(run_id=card.run_id)
    assert [e.event for e in entries][-1:] == ["responded"]
    assert messenger.views(Reply)[-1].text.endswith("Already restarted it by hand.")


async def test_an_empty_response_is_asked_again_and_a_card_without_respond_refuses_it() -> None:
    ran = Counter()
    bot, _, card = await restart_requested(ran, RESPONDING)
    empty = await bot.on_click(respond(card, "  "))
    assert not empty.accepted
    assert empty.retry
    assert empty.message == ("Write the answer the agent should get instead of the tool's result.")

    other, _, plain = await restart_requested(Counter())
    assert not [
        b for b in compose(plain).actions if isinstance(b, Button) and b.action == "respond"
    ]
    refused = await other.on_click(respond(plain, "done"))
    assert not refused.accepted
    assert "does not offer answering" in (refused.message or "")
    assert await other.agent.waiting_call(plain.run_id, plain.tool_call_id) is not None
