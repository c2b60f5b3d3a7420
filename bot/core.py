"""The chat core: messages and clicks in, agent runs and views out.

Adapters call ``on_message`` and ``on_click``; the core decides what the agent
does and answers through the adapter's ``Messenger``. Acks never wait for the
agent: everything after a message's dedupe, and after a click's decision, runs
in tracked background tasks. Work on one thread is serialized (in this process)
so a thread's replies come out in the order people wrote.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Literal

from agents import (
    Agent,
    AgentStream,
    AlreadyDecidedError,
    ApprovalExpiredError,
    ErrorChunk,
    ExpiredCall,
    FinishChunk,
    LockTimeout,
    PendingInfo,
    RecoveredRun,
    ResumeDataInvalidError,
    RunNotFoundError,
    RunNotPausedError,
    Store,
    TextDeltaChunk,
    ToolCallApprovalChunk,
    ToolCallNotPendingError,
    ToolCallSuspendedChunk,
)

from . import messages
from .metrics import DecisionOutcome, Metrics
from .policy import ApprovalPolicy
from .tasks import KeyedLocks, TaskTracker, every
from .types import (
    ApprovalCard,
    CardStatus,
    Click,
    ClickResult,
    IncomingMessage,
    MessageRef,
    Messenger,
    Notice,
    Reply,
    ThreadKey,
    View,
)
from .views import (
    ReplyBuffer,
    approval_card,
    card_data,
    card_ref,
    card_thread,
    prompt,
    run_metadata,
    thread_of,
)
from .votes import audit_vote, load_votes, save_votes, votes_key

log = logging.getLogger(__name__)

_NAME_CACHE_SIZE = 10_000
_AUDIT_ACTIONS = {"approved": "approve", "declined": "decline", "resumed": "resume"}


class ChatBot:
    """Routes chat messages and card clicks to an agent and posts what happens.

    Args:
        agent: The root agent; its store holds every paused run.
        policy: Who may decide what; by default anyone may, the requester included.
        dedupe_ttl: How long (seconds) a message's dedupe keys are remembered.
        interrupted_after: How long a decided call may run before a crash is assumed
            (another replica may still be running it until then).
    """

    def __init__(
        self,
        agent: Agent,
        *,
        policy: ApprovalPolicy | None = None,
        dedupe_ttl: float = 3600.0,
        interrupted_after: timedelta = timedelta(minutes=15),
    ) -> None:
        self.agent = agent
        self.interrupted_after = interrupted_after
        self.policy = policy or ApprovalPolicy()
        self.dedupe_ttl = dedupe_ttl
        self.tasks = TaskTracker()
        self.metrics = Metrics(background_tasks=lambda: float(self.tasks.running))
        self._messengers: dict[str, Messenger] = {}
        self._locks = KeyedLocks()
        self._names: dict[str, str] = {}
        self._sweeper: asyncio.Task[None] | None = None
        # The policy's expiry is the runtime's: the sweep, clicks and replies agree.
        agent.set_expiry(self.policy.expires_in)
        unknown = self.policy.tool_names - _tool_names(agent)
        if unknown:
            log.warning("approval policy names tools the agent does not have: %s", sorted(unknown))

    @property
    def store(self) -> Store:
        """The agent's store (paused runs, dedupe keys, references, audit)."""
        return self.agent.engine.store

    def register(self, platform: str, messenger: Messenger) -> None:
        """Answer threads of ``platform`` through ``messenger``."""
        self._messengers[platform] = messenger

    def messenger(self, platform: str) -> Messenger:
        """The messenger registered for a platform.

        Raises:
            LookupError: No adapter registered one (a wiring bug).
        """
        try:
            return self._messengers[platform]
        except KeyError:
            raise LookupError(f"no messenger registered for platform {platform!r}") from None

    # -- messages ---------------------------------------------------------------

    async def on_message(self, message: IncomingMessage) -> None:
        """Take a person's message: drop redeliveries, handle the rest in the background."""
        self.metrics.messages_received.inc()
        messenger = self.messenger(message.thread.platform)
        self._remember_name(message.user_id, message.user_name)
        if await self._is_duplicate(message):
            self.metrics.messages_duplicate.inc()
            log.debug("dropping a redelivered message in %s", message.thread.id)
            return
        self.tasks.spawn(
            self._handle_message(message, messenger), name=f"message:{message.thread.id}"
        )

    async def _is_duplicate(self, message: IncomingMessage) -> bool:
        # Record every key, not just up to the first hit: a later redelivery may
        # carry only one of them (Slack's app_mention vs message events).
        seen = False
        for key in message.dedupe_keys:
            try:
                seen |= await self.store.seen_before(
                    f"dedupe:{message.thread.platform}:{key}", ttl=self.dedupe_ttl
                )
            except Exception:
                # A duplicate answer is better than a lost message.
                log.exception("dedupe check failed; handling the message anyway")
        return seen

    async def _handle_message(self, message: IncomingMessage, messenger: Messenger) -> None:
        thread = message.thread
        async with self._locks.hold(thread.id):
            try:
                stream = await self._stream_for(message, messenger)
            except Exception:
                log.exception("could not start work on a message in %s", thread.id)
                self.metrics.runs_failed.inc()
                await self._say(messenger, thread, Notice(text=messages.INTERNAL_ERROR))
                return
            if stream is not None:
                await self._consume(thread, messenger, stream)

    async def _stream_for(
        self, message: IncomingMessage, messenger: Messenger
    ) -> AgentStream | None:
        """Resume the thread's question, point at its card, or start a new run."""
        thread = message.thread
        waiting = await self._waiting(thread.id)
        questions = [p for p in waiting if p.kind == "suspension"]
        if questions:
            try:
                stream = await self.agent.stream(
                    message.text,
                    thread_id=thread.id,
                    resource_id=message.user_id,
                    auto_resume_suspended_tools=True,
                    metadata=run_metadata(thread),
                )
            except ResumeDataInvalidError as exc:
                asked = next((p for p in questions if p.tool_call_id == exc.tool_call_id), None)
                again = prompt(asked or questions[-1], error="; ".join(exc.errors))
                await self._say(messenger, thread, again)
                return None
            except (AlreadyDecidedError, ApprovalExpiredError, ToolCallNotPendingError):
                # Another replica took the answer first, or the question expired meanwhile.
                await self._say(messenger, thread, Notice(text=messages.QUESTION_GONE))
                return None
            if stream.run_id in {q.run_id for q in questions}:
                return stream
            # The question went away between the look and the answer: the runtime
            # would start a new run, which only a message addressed to the bot may do.
            if not message.addressed:
                return None
            self.metrics.runs_started.inc()
            return stream
        if not message.addressed:
            return None
        if waiting:
            notice = messages.APPROVAL_PENDING.format(tool=waiting[-1].tool_name)
            await self._say(messenger, thread, Notice(text=notice))
            return None
        self.metrics.runs_started.inc()
        return await self.agent.stream(
            message.text,
            thread_id=thread.id,
            resource_id=message.user_id,
            auto_resume_suspended_tools=False,
            metadata=run_metadata(thread),
        )

    async def _waiting(self, thread_id: str) -> list[PendingInfo]:
        now = _now()
        pending = await self.agent.list_suspended_runs(thread_id=thread_id)
        return [p for p in pending if p.expires_at > now]

    # -- streams ----------------------------------------------------------------

    async def _consume(self, thread: ThreadKey, messenger: Messenger, stream: AgentStream) -> None:
        """Drive a run segment to its end, posting cards, questions, errors and the answer."""
        top = (self.agent.id,)
        reply = ReplyBuffer()
        await self._status(messenger, thread, messages.THINKING)
        try:
            async for chunk in stream:
                if isinstance(chunk, TextDeltaChunk):
                    if chunk.agent_path == top:
                        reply.add(chunk.text)
                    continue
                reply.step_ended()
                if isinstance(chunk, ToolCallApprovalChunk | ToolCallSuspendedChunk):
                    # The text so far introduces the card: keep it above the card.
                    await self._flush(messenger, thread, reply)
                    await self._show_waiting(messenger, thread, chunk.payload)
                elif isinstance(chunk, ErrorChunk):
                    if chunk.agent_path != top:
                        # A sub-agent's failure is its supervisor's tool result to handle.
                        log.info("sub-agent %s failed: %s", chunk.agent_path, chunk.error)
                        continue
                    await self._flush(messenger, thread, reply)
                    self.metrics.runs_failed.inc()
                    error = messages.RUN_FAILED.format(error=chunk.error)
                    await self._say(messenger, thread, Notice(text=error))
                elif isinstance(chunk, FinishChunk):
                    await self._flush(messenger, thread, reply)
                    if chunk.finish_reason not in ("suspended", "error"):
                        self.metrics.runs_finished.inc()
                    # A model that stops for its own reasons must not leave the thread silent.
                    why = messages.FINISH_NOTES.get(chunk.finish_reason)
                    if why is not None and chunk.agent_path == top:
                        await self._say(messenger, thread, Notice(text=why))
        except Exception:
            log.exception("run %s failed while streaming in %s", stream.run_id, thread.id)
            self.metrics.runs_failed.inc()
            await self._flush(messenger, thread, reply)
            await self._say(messenger, thread, Notice(text=messages.INTERNAL_ERROR))
        finally:
            await self._status(messenger, thread, None)

    async def _flush(self, messenger: Messenger, thread: ThreadKey, reply: ReplyBuffer) -> None:
        text = reply.take()
        if text:
            await self._say(messenger, thread, Reply(text=text))

    async def _show_waiting(
        self, messenger: Messenger, thread: ThreadKey, info: PendingInfo
    ) -> None:
        view: View = self._card(info) if info.kind == "approval" else prompt(info)
        ref = await self._say(messenger, thread, view)
        if ref is None:
            return
        try:
            # The thread goes along so the expiry sweep knows where to say so.
            await self.agent.attach_card(
                run_id=info.run_id,
                tool_call_id=info.tool_call_id,
                card=card_data(ref, thread),
            )
        except Exception:
            log.exception("could not remember the card of %s/%s", info.run_id, info.tool_call_id)

    # -- clicks -----------------------------------------------------------------

    async def on_click(self, click: Click) -> ClickResult:
        """Decide on a card now; update it and continue the run in the background."""
        self.metrics.clicks.inc()
        self._remember_name(click.user_id, click.user_name)
        try:
            return await self._decide(click)
        except Exception:
            log.exception("click on %s/%s failed", click.run_id, click.tool_call_id)
            return ClickResult(accepted=False, message=messages.CLICK_UNAVAILABLE)

    async def check_click(self, click: Click) -> str | None:
        """Why this click would be refused, or ``None``; changes nothing.

        For adapters that ask for more before deciding (Slack's reason dialog):
        a refusal is better said before someone types a reason.
        """
        _, refusal = await self._check(click)
        return refusal[0] if refusal else None

    async def _check(
        self, click: Click
    ) -> tuple[PendingInfo | None, tuple[str, DecisionOutcome] | None]:
        """The waiting call a click is about, or why it is refused (and how to count it)."""
        waiting = await self.agent.list_suspended_runs(thread_id=click.thread.id)
        call = next(
            (
                p
                for p in waiting
                if p.run_id == click.run_id and p.tool_call_id == click.tool_call_id
            ),
            None,
        )
        if call is None:
            return None, (await self._why_not_pending(click), "stale")
        if call.kind != "approval":
            return None, (messages.CLICK_NOT_AN_APPROVAL, "stale")
        if call.expires_at <= _now():
            return None, (messages.CLICK_EXPIRED, "stale")
        refusal = self.policy.check(
            call.tool_name, call.requester, click.user_id, action=click.action
        )
        if refusal is not None:
            return None, (refusal, "refused")
        return call, None

    async def _decide(self, click: Click) -> ClickResult:
        call, refusal = await self._check(click)
        if call is None:
            assert refusal is not None
            return self._refuse(refusal[0], outcome=refusal[1])
        quorum = self.policy.quorum(call.tool_name)
        if quorum == 1:
            return await self._carry_out(click, call)
        # Votes and declines on a quorum card are serialized by a store lock, across
        # replicas: a vote's count and card update finish before the next click on
        # the card is looked at, so the last card shown is the latest state.
        async with self.store.lock(votes_key(call.run_id, call.tool_call_id)):
            # Look again under the lock: the vote that reached the quorum, or a
            # decline, may have decided the call since.
            call, refusal = await self._check(click)
            if call is None:
                assert refusal is not None
                return self._refuse(refusal[0], outcome=refusal[1])
            if click.action == "decline":
                return await self._carry_out(click, call)
            return await self._vote(click, call, quorum)

    async def _vote(self, click: Click, call: PendingInfo, quorum: int) -> ClickResult:
        """Count an allowed Approve towards the quorum (under the card's vote lock)."""
        key = votes_key(call.run_id, call.tool_call_id)
        votes = await load_votes(self.store, key)
        for user, name in votes.items():
            self._remember_name(user, name)  # another replica may have heard the name
        voted = click.user_id in votes
        if voted and len(votes) < quorum:
            more = quorum - len(votes)
            return self._refuse(messages.CLICK_ALREADY_VOTED.format(more=more), outcome="refused")
        votes[click.user_id] = click.user_name or votes.get(click.user_id)
        if len(votes) >= quorum:
            if not voted:
                # Logged before the decision, so the audit reads "voted, ..., approved".
                await audit_vote(self.store, click, call)
            result = await self._carry_out(click, call, voters=tuple(votes))
            if result.accepted:
                # Only a vote that decided is kept: a click that lost the decision
                # (it expired meanwhile) leaves the list as it was.
                await save_votes(self.store, key, votes)
            return result
        await save_votes(self.store, key, votes, strict=True)
        await audit_vote(self.store, click, call)
        self.metrics.decided("voted")
        card = self._card(call, approvals=tuple(votes))
        # Updated before the lock is released, so no later decision's card can be
        # overwritten by this one.
        ref = click.message_ref or card_ref(call)
        if ref is not None:
            await self._update(self.messenger(click.thread.platform), click.thread, ref, card)
        return ClickResult(accepted=True, card=card)

    async def _carry_out(
        self, click: Click, call: PendingInfo, *, voters: tuple[str, ...] = ()
    ) -> ClickResult:
        """Approve or decline ``call`` in the runtime; the card and the run follow.

        ``voters`` are the user ids whose votes approve it, when a quorum does.
        """
        messenger = self.messenger(click.thread.platform)
        reason = (click.reason or "").strip() or None
        decided_by = ",".join(voters) if voters else click.user_id
        try:
            if click.action == "approve":
                stream = await self.agent.approve_tool_call(
                    run_id=call.run_id, tool_call_id=call.tool_call_id, decided_by=decided_by
                )
            else:
                stream = await self.agent.decline_tool_call(
                    run_id=call.run_id,
                    tool_call_id=call.tool_call_id,
                    reason=reason,
                    decided_by=decided_by,
                )
        except AlreadyDecidedError as exc:
            decided = self._already(exc.decision.action, exc.decision.decided_by)
            return self._refuse(decided, outcome="stale")
        except ApprovalExpiredError:
            return self._refuse(messages.CLICK_EXPIRED, outcome="stale")
        except (ToolCallNotPendingError, RunNotPausedError, RunNotFoundError):
            return self._refuse(messages.CLICK_UNKNOWN, outcome="stale")
        status: Literal["approved", "declined"] = (
            "approved" if click.action == "approve" else "declined"
        )
        self.metrics.decided(status)
        card = self._card(
            call, status=status, decided_by=decided_by, reason=reason, approvals=voters
        )
        ref = click.message_ref or card_ref(call)
        try:
            self.tasks.spawn(
                self._after_decision(click.thread, messenger, ref, card, stream),
                name=f"decision:{call.run_id}",
            )
        except RuntimeError:
            # The decision stands; only this process is going away before carrying it out.
            log.error("run %s: decided during shutdown, not continued here", call.run_id)
        return ClickResult(accepted=True, card=card)

    def _refuse(self, message: str, *, outcome: DecisionOutcome) -> ClickResult:
        self.metrics.decided(outcome)
        return ClickResult(accepted=False, message=message)

    async def _why_not_pending(self, click: Click) -> str:
        """Explain a click on a call that no longer waits, naming who decided when known."""
        try:
            snap = await self.agent.get_run(click.run_id)
        except RunNotFoundError:
            return messages.CLICK_UNKNOWN
        if snap.thread_id != click.thread.id:
            return messages.CLICK_OTHER_THREAD
        call = snap.find_pending(click.tool_call_id)
        if call is not None and call.decision is not None:
            return self._already(call.decision.action, call.decision.decided_by)
        # Once its outcome is recorded a call leaves the snapshot; the audit log remembers.
        for entry in reversed(await self.store.list_audit(run_id=click.run_id)):
            if entry.tool_call_id != click.tool_call_id:
                continue
            if entry.event == "expired":
                return messages.CLICK_EXPIRED
            if entry.event == "interrupted":
                return messages.CLICK_INTERRUPTED
            if entry.event in _AUDIT_ACTIONS:
                return self._already(_AUDIT_ACTIONS[entry.event], entry.actor)
        return messages.CLICK_UNKNOWN

    def _already(self, action: str, decided_by: str | None) -> str:
        if action == "expire":
            return messages.CLICK_EXPIRED
        if decided_by is None:
            return messages.CLICK_ALREADY_DECIDED_UNKNOWN
        past = messages.PAST_TENSE.get(action, messages.DECIDED)
        return messages.CLICK_ALREADY_DECIDED.format(action=past, who=self._who_all(decided_by))

    async def _after_decision(
        self,
        thread: ThreadKey,
        messenger: Messenger,
        ref: MessageRef | None,
        card: ApprovalCard,
        stream: AgentStream,
    ) -> None:
        if ref is not None:
            await self._update(messenger, thread, ref, card)
        async with self._locks.hold(thread.id):
            await self._consume(thread, messenger, stream)

    # -- expiry -----------------------------------------------------------------

    async def sweep_expired(self, now: datetime | None = None) -> int:
        """Expire every call past its time; cards, notices and answers follow in the background.

        Returns:
            How many waiting calls expired.
        """
        expired = await self.agent.expire_due(now)
        by_run: dict[str, list[ExpiredCall]] = defaultdict(list)
        for item in expired:
            self.metrics.decided("expired")
            by_run[item.pending.run_id].append(item)
        for run_id, items in by_run.items():
            # One task per run: the runtime wants a run's streams consumed in order.
            self.tasks.spawn(self._after_expiry(items), name=f"expiry:{run_id}")
        return len(expired)

    async def _after_expiry(self, items: list[ExpiredCall]) -> None:
        run_id = items[0].pending.run_id
        thread = await self._thread_of_run(run_id, items[0].pending)
        messenger = self._messengers.get(thread.platform) if thread else None
        if thread is None or messenger is None:
            log.warning("run %s expired outside any known thread; finishing it quietly", run_id)
            for item in items:
                await item.stream.result()
            return
        async with self._locks.hold(thread.id):
            # Read the cards now: one posted just before the sweep is attached by now.
            cards = await self._cards(run_id)
            for item in items:
                info = item.pending
                ref = card_ref(cards.get(info.tool_call_id, info))
                if info.kind == "approval" and ref is not None:
                    expired = self._card(info, status="expired")
                    # A quorum card's votes update it under this lock: take it too, so
                    # a vote counted just before the expiry cannot show up after it.
                    try:
                        async with self.store.lock(votes_key(info.run_id, info.tool_call_id)):
                            await self._update(messenger, thread, ref, expired)
                    except LockTimeout:
                        await self._update(messenger, thread, ref, expired)
                template = (
                    messages.EXPIRED_APPROVAL
                    if info.kind == "approval"
                    else messages.EXPIRED_QUESTION
                )
                who = self._who(info.requester) if info.requester else messages.NO_REQUESTER
                await self._say(
                    messenger, thread, Notice(text=template.format(who=who, tool=info.tool_name))
                )
                await self._consume(thread, messenger, item.stream)

    async def _thread_of_run(self, run_id: str, info: PendingInfo | None) -> ThreadKey | None:
        """Where a run was asked: its card's thread, else what the run remembers."""
        thread = card_thread(info) if info is not None else None
        if thread is None:
            try:
                thread = thread_of((await self.agent.get_run(run_id)).metadata)
            except RunNotFoundError:
                return None
        return thread

    async def _cards(self, run_id: str) -> dict[str, PendingInfo]:
        try:
            snap = await self.agent.get_run(run_id)
        except RunNotFoundError:
            return {}
        return {p.tool_call_id: PendingInfo.of(run_id, p) for p in snap.pending}

    # -- crash recovery ---------------------------------------------------------

    async def recover_interrupted(self, now: datetime | None = None) -> int:
        """Report runs a crash left in flight (repeatable decisions are carried out again).

        Returns:
            How many runs were found.
        """
        found = await self.agent.recover_interrupted(older_than=self.interrupted_after, now=now)
        for item in found:
            self.tasks.spawn(self._after_interruption(item), name=f"recover:{item.run_id}")
        return len(found)

    async def _after_interruption(self, item: RecoveredRun) -> None:
        thread = await self._thread_of_run(item.run_id, item.pending)
        messenger = self._messengers.get(thread.platform) if thread else None
        if thread is None or messenger is None:
            log.warning("run %s was interrupted outside any known thread", item.run_id)
            if item.stream is not None:
                await item.stream.result()
            return
        async with self._locks.hold(thread.id):
            if item.stream is not None:
                await self._consume(thread, messenger, item.stream)
                return
            # Cards of the dead run must not keep live buttons.
            for call in item.dropped:
                ref = card_ref(call)
                if call.kind == "approval" and ref is not None:
                    await self._update(messenger, thread, ref, self._card(call, status="expired"))
            requester = item.pending.requester if item.pending else item.requester
            who = self._who(requester) if requester else messages.NO_REQUESTER
            text = messages.INTERRUPTED.format(who=who, error=item.error)
            await self._say(messenger, thread, Notice(text=text))

    async def _housekeeping(self) -> None:
        await self.sweep_expired()
        await self.recover_interrupted()

    def start_sweeper(self, interval: float = 30.0) -> None:
        """Expire overdue calls and recover interrupted ones every ``interval`` s, until closed."""
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(
                every(interval, self._housekeeping, what="expiry sweep"), name="expiry-sweeper"
            )

    # -- lifecycle --------------------------------------------------------------

    async def drain(self) -> None:
        """Wait until no background work is running (tests, console turns)."""
        await self.tasks.drain()

    async def aclose(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109 (grace period)
        """Stop the sweeper, let background work finish for ``timeout`` s, cancel the rest."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None
        await self.tasks.aclose(timeout)

    # -- views ------------------------------------------------------------------

    def _card(
        self,
        info: PendingInfo,
        *,
        status: CardStatus = "pending",
        decided_by: str | None = None,
        reason: str | None = None,
        approvals: tuple[str, ...] = (),
    ) -> ApprovalCard:
        # Cards show people by name where an adapter told us one; ids stay in the
        # snapshot, the audit log and the policy.
        return approval_card(
            info,
            expires_at=info.expires_at,
            status=status,
            requester=self._who(info.requester) if info.requester else None,
            decided_by=self._who_all(decided_by) if decided_by else None,
            reason=reason,
            approvals=tuple(self._who(user) for user in approvals),
            quorum=self.policy.quorum(info.tool_name),
        )

    # -- helpers ----------------------------------------------------------------

    async def _say(self, messenger: Messenger, thread: ThreadKey, view: View) -> MessageRef | None:
        # A platform hiccup must not stop the run that is being streamed.
        try:
            return await messenger.post(thread, view)
        except Exception:
            log.exception("posting a %s to %s failed", type(view).__name__, thread.id)
            return None

    async def _update(
        self, messenger: Messenger, thread: ThreadKey, ref: MessageRef, view: View
    ) -> None:
        try:
            await messenger.update(thread, ref, view)
        except Exception:
            log.exception("updating a %s in %s failed", type(view).__name__, thread.id)

    async def _status(self, messenger: Messenger, thread: ThreadKey, status: str | None) -> None:
        try:
            await messenger.set_status(thread, status)
        except Exception:
            log.warning("setting the status in %s failed", thread.id, exc_info=True)

    def _remember_name(self, user_id: str, user_name: str | None) -> None:
        if not user_name or self._names.get(user_id) == user_name:
            return
        if len(self._names) >= _NAME_CACHE_SIZE:
            self._names.pop(next(iter(self._names)))
        self._names[user_id] = user_name

    def _who(self, user_id: str) -> str:
        return self._names.get(user_id, user_id)

    def _who_all(self, decided_by: str) -> str:
        """``"U1,U2"`` (a quorum's voters, as the runtime records them) -> ``"Ann, Bob"``."""
        return ", ".join(self._who(user.strip()) for user in decided_by.split(",") if user.strip())


def _tool_names(agent: Agent) -> set[str]:
    names = {spec.name for spec in agent.tool_specs()}
    for sub in agent.agents.values():
        names |= _tool_names(sub)
    return names


def _now() -> datetime:
    return datetime.now(UTC)
