"""Votes on quorum cards in the audit log.

A card whose tool needs N approvals collects one vote per allowed person. The
votes live in the chat state (``ChatState.add_vote``), so every replica counts
the same ones; the core holds the card's lock while it reads and adds them.
"""

from __future__ import annotations

from typing import Final

from agents import Agent, PendingInfo

from .records import call_entry
from .types import Click

VOTED: Final = "voted"
"""The audit event of one vote towards a quorum (the runtime's own events are decisions)."""


async def audit_vote(agent: Agent, click: Click, call: PendingInfo) -> None:
    """One line of the audit log for one vote."""
    await agent.record(call_entry(VOTED, call, click.thread.id, actor=click.user_id))


def spanned(groups: list[frozenset[str]]) -> int:
    """How many different groups votes can stand for, each vote for one group its voter is
    in (a maximum matching of voters to groups: few voters, so augmenting paths)."""
    holder: dict[str, int] = {}

    def place(voter: int, tried: set[str]) -> bool:
        for group in sorted(groups[voter] - tried):
            tried.add(group)
            if group not in holder or place(holder[group], tried):
                holder[group] = voter
                return True
        return False

    return sum(place(voter, set()) for voter in range(len(groups)))
