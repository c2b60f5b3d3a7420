"""Votes on quorum cards: where they are kept, how they are read, written and audited.

A card whose tool needs N approvals collects one vote per allowed person. The
list lives in the store, so every replica counts the same votes; the chat core
holds the lock of the same name while it reads and changes it.
"""

from __future__ import annotations

import logging

from agents import AuditEntry, PendingInfo, Store

from .types import Click

log = logging.getLogger(__name__)

Votes = dict[str, str | None]
"""Who approved so far: user id -> display name when known, in voting order."""


def votes_key(run_id: str, tool_call_id: str) -> str:
    """Where a quorum card's votes live, and the name of the lock that guards them.

    The store has no general key-value table; its per-thread JSON references are
    the durable, replica-shared one (SQLite row, Redis key), so votes live there.
    Thread references are keyed by ``ThreadKey.id``, which always starts with a
    platform name (``slack:``, ``teams:``, ...), and the Slack adapter's marks with
    ``slack-active:``; ``votes:`` collides with neither. The runtime's locks are
    named ``run:<id>``, so the lock of the same name is the card's own. Records are
    never deleted (the store has no delete): a few hundred bytes per quorum call.
    """
    return f"votes:{run_id}:{tool_call_id}"


async def load_votes(store: Store, key: str) -> Votes:
    """The votes kept under ``key`` (none yet: empty)."""
    stored = await store.get_reference(key) or {}
    votes: Votes = {}
    for vote in stored.get("votes", []):
        user = vote.get("user") if isinstance(vote, dict) else None
        if isinstance(user, str) and user:
            name = vote.get("name")
            votes[user] = name if isinstance(name, str) else None
    return votes


async def save_votes(store: Store, key: str, votes: Votes, *, strict: bool = False) -> None:
    """Keep the votes; with ``strict=False`` a failure is only logged.

    Non-strict is for the vote that decided: the call is decided already, so the
    list is only a record by then.
    """
    data = {"votes": [{"user": user, "name": name} for user, name in votes.items()]}
    try:
        await store.put_reference(key, data)
    except Exception:
        if strict:
            raise
        log.exception("could not record the final votes under %s", key)


async def audit_vote(store: Store, click: Click, call: PendingInfo) -> None:
    """One line of the audit log for one vote."""
    await store.append_audit(
        AuditEntry(
            event="voted",
            run_id=call.run_id,
            thread_id=click.thread.id,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=dict(call.args),
            kind=call.kind,
            requester=call.requester,
            actor=click.user_id,
        )
    )
