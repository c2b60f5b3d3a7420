"""The agent both processes of the approval race build, the same way."""

from __future__ import annotations

from pathlib import Path

from agents import Agent, Store, ToolCall, tool

from .helpers import call_then_answer


def build_race_agent(store: Store, effect_file: Path) -> Agent:
    """An agent whose gated tool appends one line to ``effect_file`` per run."""

    @tool(require_approval=True)
    def charge_card(amount: int) -> str:
        """Charge the card: a side effect that must happen once."""
        with effect_file.open("a") as f:
            f.write(f"charged {amount}\n")
        return "charged"

    return Agent(
        id="payments",
        model=call_then_answer(ToolCall("charge_card", {"amount": 42}, id="charge-1")),
        tools=[charge_card],
        store=store,
    )
