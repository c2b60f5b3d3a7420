"""Standing grants: "Approve for this thread (1h)", its mirror "Decline, don't ask
again here (1h)", and what ends them.

A grant approves a call and lets the same tool's later calls by the same requester
in that thread run without a card until it lapses (the runtime asks ``standing``).
A standing decline declines a call and every later call of that tool in the thread,
whoever asks, without a card, until it lapses (``refused``); the model is told why.
Both end at their time, by ``revoke`` in their thread, or by ``/approvals revoke`` of
whoever gave them; a grant also by the End grant button on the notice of a call that
ran under it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from agents import Agent, AuditEntry, PendingInfo, Refusal, StandingAsk

from . import texts
from .chat_state import GrantState, grant_key, never_key
from .metrics import DecisionOutcome
from .people import scope_of
from .policy import ApprovalPolicy, EffectiveRule, parse_duration
from .presenter import Presenter
from .records import GRANT_GIVEN, NEVER_GIVEN, REFUSED, REVOKED, call_entry
from .types import Click, Messenger, Notice, Text, ThreadKey

log = logging.getLogger(__name__)


class Grants:
    """Gives, looks up and ends the standing grants of every thread.

    Args:
        agent: The root agent, whose audit log says which grant a call ran under.
        policy: Which tools offer grants, and who may end one.
        chat: Where grants are kept.
        presenter: How the end of a grant is said.
    """

    def __init__(
        self, *, agent: Agent, policy: ApprovalPolicy, chat: GrantState, presenter: Presenter
    ) -> None:
        self._agent = agent
        self._policy = policy
        self._chat = chat
        self._presenter = presenter

    async def standing(self, ask: StandingAsk, rule: EffectiveRule) -> str | None:
        """Who granted the thread a standing approval covering this call (``rule``: the
        policy's for it), if anyone (a tool the policy no longer offers grants for has
        none)."""
        if not rule.grant_for:
            return None
        # A grant holds in its tier.
        return await self._held(ask, grant_key(ask.requester, ask.tool_name, rule.tier))

    async def refused(self, ask: StandingAsk, rule: EffectiveRule) -> Refusal | None:
        """The standing decline of this call's tool in its thread (``rule``: the policy's
        for it), if anyone gave one (a tool the policy no longer offers it for has none)."""
        if not rule.never_for:
            return None
        by = await self._held(ask, never_key(ask.tool_name))
        if by is None:
            return None
        return Refusal(by=by, reason=texts.NEVER_STANDING.format(tool=ask.tool_name))

    async def _held(self, ask: StandingAsk, key: str) -> str | None:
        """Who gave the standing answer ``key`` in ``ask``'s thread, while it holds."""
        if ask.thread_id is None:
            return None
        return await self._chat.grant(ask.thread_id, key, datetime.now(UTC).timestamp())

    async def refuse(self, thread: ThreadKey, call: PendingInfo, duration: str, by: str) -> None:
        """Keep a standing decline: later calls of this tool in this thread, whoever asks,
        are declined without a card until it lapses. The call itself is declined by now,
        so a failure to keep it is logged, not raised."""
        if await self._keep(thread, never_key(call.tool_name), duration, by):
            await self._given(NEVER_GIVEN, thread, call, duration, by)

    async def give(self, thread: ThreadKey, call: PendingInfo, duration: str, by: str) -> None:
        """Keep the standing approval a grant gives: later calls of this tool in this
        thread, by the same requester, run without a card until it lapses. The call
        itself is approved by now, so a failure to keep it is logged, not raised."""
        tier = self._policy.rule(call.tool_name, call).tier
        key = grant_key(call.requester, call.tool_name, tier)
        if await self._keep(thread, key, duration, by):
            await self._given(GRANT_GIVEN, thread, call, duration, by)

    async def _given(
        self, event: str, thread: ThreadKey, call: PendingInfo, duration: str, by: str
    ) -> None:
        """Put a standing answer given on record (the call itself is decided by now)."""
        await self._on_record(
            call_entry(event, call, thread.id, actor=by, reason=f"for {duration}")
        )

    async def _on_record(self, entry: AuditEntry) -> None:
        """Put what was done to grants on record; logged, not raised, when it cannot be:
        it is done, and a retry would find nothing left to do."""
        try:
            await self._agent.record(entry)
        except Exception:
            log.exception("could not put %s of %s on record", entry.event, entry.tool_name)

    async def _keep(self, thread: ThreadKey, key: str, duration: str, by: str) -> bool:
        """Keep the standing answer ``key`` in ``thread`` for ``duration``, given by ``by``
        (logged, not raised, when it cannot be: the call itself is decided by now);
        whether it was kept."""
        until = datetime.now(UTC) + parse_duration(duration)
        try:
            await self._chat.set_grant(thread.id, key, until.timestamp(), by)
        except Exception:
            log.exception("could not keep %s in %s", key, thread.id)
            return False
        return True

    async def end(self, click: Click) -> tuple[Text, DecisionOutcome] | None:
        """End the grant a call ran under (the End grant button on its notice): for its
        requester, whoever granted it, or anyone who may approve the tool. ``None`` when
        it ended (and the thread is told); else why not, and how to count the click."""
        entries = await self._agent.audit(run_id=click.run_id)
        granted = next(
            (
                e
                for e in reversed(entries)
                if e.event == "granted" and e.tool_call_id == click.tool_call_id
            ),
            None,
        )
        if granted is None or granted.thread_id != click.thread.id:
            return (texts.GRANT_UNKNOWN,), "stale"
        tool = granted.tool_name
        names = self._policy.anyone_of(tool)  # whichever tier the grant was given in
        people = self._presenter.people
        messenger = self._presenter.messenger_of(click.thread)
        allowed = await people.groups.expand(click.thread.platform, messenger, names)
        if allowed and click.user_id not in allowed | {granted.requester, granted.actor}:
            said = texts.GRANT_NOT_YOURS.format(tool=tool)
            await self._on_record(_about(granted, REFUSED, click.user_id, reason=said))
            return (said,), "refused"
        ended_any = False
        for tier in self._policy.tiers_of(tool):
            key = grant_key(granted.requester, tool, tier)
            ended_any |= await self._chat.revoke_grant(click.thread.id, key)
        if not ended_any:
            return (texts.GRANT_GONE.format(tool=tool),), "stale"
        await self._on_record(_about(granted, REVOKED, click.user_id))
        ended = texts.GRANT_ENDED.format(tool=tool)
        notice = Notice(text=ended, to=people.who(click.thread, click.user_id))
        await self._presenter.say(
            self._presenter.messenger(click.thread.platform), click.thread, notice
        )
        return None

    async def end_in_thread(self, thread: ThreadKey, messenger: Messenger, by: str) -> None:
        """End the thread's grants (``revoke`` in it, by ``by``), saying how many there were."""
        count = await self._chat.revoke_grants(thread.id)
        await self._revoked(thread.id, by, count)
        text = texts.GRANTS_REVOKED.format(count=count) if count else texts.NO_GRANTS
        await self._presenter.say(messenger, thread, Notice(text=text))

    async def end_given(self, thread: ThreadKey, user_id: str) -> Text:
        """End every standing grant ``user_id`` gave in ``thread``'s workspace."""
        scope = scope_of(thread)
        given = await self._chat.grants_given(user_id, scope, datetime.now(UTC).timestamp())
        count = 0
        for thread_id, key in given:
            ended = await self._chat.revoke_grant(thread_id, key)
            await self._revoked(thread_id, user_id, int(ended))
            count += ended
        if not count:
            return (texts.NO_GRANTS_GIVEN,)
        return (texts.GRANTS_GIVEN_ENDED.format(count=count),)

    async def _revoked(self, thread_id: str, by: str, count: int) -> None:
        """Put ``count`` grants of a thread ended by ``by`` on record (none: nothing)."""
        if count:
            reason = f"{count} standing grant{'s' if count > 1 else ''} ended"
            entry = AuditEntry(
                event=REVOKED,
                run_id="",
                thread_id=thread_id,
                tool_call_id="",
                tool_name="",
                actor=by,
                reason=reason,
            )
            await self._on_record(entry)


def _about(granted: AuditEntry, event: str, actor: str, *, reason: str | None = None) -> AuditEntry:
    """An entry about the grant ``granted`` records (its call, its requester), by ``actor``."""
    return AuditEntry(
        event=event,
        run_id=granted.run_id,
        thread_id=granted.thread_id,
        tool_call_id=granted.tool_call_id,
        tool_name=granted.tool_name,
        args=granted.args,
        kind=granted.kind,
        requester=granted.requester,
        requester_name=granted.requester_name,
        actor=actor,
        reason=reason,
    )
