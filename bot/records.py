"""What the chat core puts on the audit log itself: the runtime writes each request,
decision and outcome with the save that makes it true; these are the events around
them that only the chat sees. Each is stamped with where the request being handled
came from and who was in it (``agents.provenance``).
"""

from __future__ import annotations

from typing import Final

from agents import Agent, AuditEntry, PendingInfo

REFUSED: Final = "refused"
"""A click the policy refused (who clicked is the actor, why the reason)."""
SHOWN: Final = "shown"
"""A card was posted (``where``: the thread, channel or person's DMs it went to)."""
REMINDED: Final = "reminded"
"""The deciders of a card left waiting were reminded (``actor``: who was pinged)."""
ESCALATED: Final = "escalated"
"""The people an escalation adds were told they may decide (``actor``: them)."""
GRANT_GIVEN: Final = "grant_given"
"""A person approved a call and its like in the thread for a while (``reason``: how
long); each later call it approves is ``granted``."""
NEVER_GIVEN: Final = "never_given"
"""A person declined a call and its like in the thread for a while (``reason``: how
long); each later call it declines is ``declined``, by them."""
REVOKED: Final = "revoked"
"""A standing grant was ended (``actor``: who ended it)."""
POLICY_LOADED: Final = "policy_loaded"
"""The approval policy was loaded (``where``: its file, ``digest``: of its bytes)."""
CONFIG_LOADED: Final = "config_loaded"
"""The bot's config file was loaded (``where``: its file, ``digest``: of its bytes)."""


def call_entry(
    event: str,
    call: PendingInfo,
    thread_id: str | None,
    *,
    actor: str | None = None,
    reason: str | None = None,
    where: str | None = None,
) -> AuditEntry:
    """An entry about ``call`` (waiting in ``thread_id``)."""
    return AuditEntry(
        event=event,
        run_id=call.run_id,
        thread_id=thread_id,
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        args=dict(call.args),
        kind=call.kind,
        requester=call.requester,
        requester_name=call.requester_name,
        actor=actor,
        reason=reason,
        where=where,
    )


async def record_loaded(agent: Agent, event: str, where: str | None, digest: str | None) -> None:
    """Put a policy or config file's load on record: where it was, and the digest of the
    bytes read and parsed (``None``: no file, nothing to record)."""
    if where is None or digest is None:
        return
    entry = AuditEntry(
        event=event, run_id="", tool_call_id="", tool_name="", where=where, digest=digest
    )
    await agent.record(entry)
