"""``POLICY_MODE=shadow``: a second policy is looked up for every gated call and where
it would differ is logged; only the policy in force acts."""

from __future__ import annotations

import logging

import pytest

from agents import Agent, ToolCall, tool
from bot import ApprovalCard, ApprovalPolicy, ChatBot, PolicyError
from bot.settings import SettingsError, load_settings
from tests.agents.helpers import call_then_answer

from .helpers import RecordingMessenger, message

IN_FORCE = '[tools.refund]\napprovers = ["U0LEAD001"]\n'
TRIED = (
    IN_FORCE + '[[tools.refund.tiers]]\nwhen = "args.amount > 1000"\n'
    'approvers = ["U0FIN0001", "U0FIN0002"]\nquorum = 2\n'
    '[[tools.refund.tiers]]\nwhen = "args.amount <= 100"\napproval = "none"\n'
)


def refunds(amount: int, ran: list[int]) -> Agent:
    @tool(require_approval=True)
    def refund(order: str, amount: int) -> str:
        """Refund part of an order."""
        ran.append(amount)
        return "refunded"

    model = call_then_answer(ToolCall("refund", {"order": "A-1", "amount": amount}))
    return Agent(id="billing", model=model, tools=[refund])


@pytest.mark.parametrize(
    ("amount", "logged"),
    [
        (5000, "someone else: U0LEAD001 -> U0FIN0001, U0FIN0002"),
        (50, "needed a person, now nobody"),
        (500, None),
    ],
)
async def test_the_shadow_policy_is_logged_where_it_differs_and_never_acts(
    amount: int, logged: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[int] = []
    bot = ChatBot(
        refunds(amount, ran),
        policy=ApprovalPolicy.from_toml(IN_FORCE),
        shadow=ApprovalPolicy.from_toml(TRIED),
    )
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    with caplog.at_level(logging.WARNING, logger="bot.core"):
        await bot.on_message(message("refund A-1"))
        await bot.drain()
    (card,) = messenger.views(ApprovalCard)  # the policy in force: the lead decides
    assert card.deciders == ("U0LEAD001",)
    assert ran == []
    lines = [r.getMessage() for r in caplog.records if "shadow policy" in r.getMessage()]
    if logged is None:
        assert lines == []
    else:
        (line,) = lines
        assert line.startswith("shadow policy: refund in test:")
        assert line.endswith(logged)
    await bot.aclose()


def test_a_shadow_policy_naming_a_tool_no_agent_has_stops_the_bot() -> None:
    with pytest.raises(PolicyError) as raised:
        ChatBot(
            refunds(1, []),
            policy=ApprovalPolicy.from_toml(IN_FORCE),
            shadow=ApprovalPolicy.from_toml("[tools.refnud]\n"),
        )
    assert raised.value.field == "tools.refnud"


def test_shadow_mode_needs_its_policy_and_a_shadow_policy_needs_the_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POLICY_MODE", "shadow")
    with pytest.raises(SettingsError, match="needs SHADOW_POLICY"):
        load_settings()
    monkeypatch.delenv("POLICY_MODE")
    monkeypatch.setenv("SHADOW_POLICY", "new.toml")
    with pytest.raises(SettingsError, match="only with POLICY_MODE=shadow"):
        load_settings()
