"""The refund bot the edit and grant tests drive: any message asks to refund one order
(``refund`` needs approval and records every refund that really runs), behind real Bot
Framework auth; and how its cards read."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import pytest

from adapters.teams import cards
from agents import Agent, MemoryStore, ToolCall, tool
from bot import View, compose
from bot.policy import ApprovalPolicy
from tests.agents.helpers import call_then_answer

from . import activities as act
from .conftest import MakeBot
from .fake_connector import FakeConnector
from .signed import Posted, SignedBot, signed_settings, token_for

ASKED = {"order": "A-1001", "amount": 150, "currency": "EUR"}
MESSAGE_TYPE = "application/vnd.microsoft.activity.message"


def message_answer(text: str) -> dict[str, Any]:
    """An ``adaptiveCard/action`` answer that shows the presser ``text`` (no card)."""
    return {"statusCode": 200, "type": MESSAGE_TYPE, "value": text}


def refunds_agent(ran: list[dict[str, Any]]) -> Agent:
    """Any message asks to refund ``ASKED``; every refund that really runs is in ``ran``."""

    @tool(require_approval=True)
    def refund(order: str, amount: int, currency: Literal["EUR", "USD"] = "EUR") -> str:
        """Refund an order."""
        ran.append({"order": order, "amount": amount, "currency": currency})
        return f"refunded {amount} {currency} on {order}"

    model = call_then_answer(ToolCall("refund", dict(ASKED)))
    return Agent(id="billing", model=model, tools=[refund], store=MemoryStore())


def drawn(view: View) -> dict[str, Any]:
    """The Adaptive Card Teams shows for ``view`` (as the core composes it)."""
    return cards.draw(compose(view))


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


@dataclass
class Till(SignedBot):
    """The bot with the refund tool, behind real Bot Framework auth."""

    ran: list[dict[str, Any]]

    async def ask_refund(self, *, user: dict[str, Any] = act.ALICE) -> Posted:
        """Ask for a refund in a new channel thread; the card the bot posted."""
        return await self.ask("refund A-1001", user=user)


T = TypeVar("T", bound=Till)


@asynccontextmanager
async def refund_tills(
    make_bot: MakeBot,
    connector: FakeConnector,
    monkeypatch: pytest.MonkeyPatch,
    till: type[T],
    *,
    policy: str | None = None,
) -> AsyncIterator[Callable[..., Awaitable[T]]]:
    """Start refund bots (as ``till``, under ``policy`` unless another is given) behind
    real Bot Framework auth, while this lasts."""

    async with token_for(connector, monkeypatch) as token:

        async def make(policy: str | None = policy) -> T:
            ran: list[dict[str, Any]] = []
            teams = await make_bot(
                agent=refunds_agent(ran),
                policy=ApprovalPolicy.from_toml(policy) if policy is not None else None,
                settings=signed_settings(),
            )
            return till(teams=teams, connector=connector, token=token, ran=ran)

        yield make
