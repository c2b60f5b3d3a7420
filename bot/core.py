"""The chat core: messages and clicks in, agent runs and views out.

Adapters call ``on_message`` and ``on_click`` (or ``accept_click``) before they
ack: each writes the delivery to the durable inbox (``intake``), and the ack
is a promise kept by whichever process works the entry off. Acks never wait
for the agent. Work on one thread is serialized (in this process) so a
thread's replies come out in the order people wrote.

``ChatBot`` handles messages itself and has the other parts: a ``Presenter``
(streams into views, posting, people), ``Decisions`` (clicks, policy, quorum)
and ``Housekeeping`` (expiry sweep, crash recovery). Locks: ``CONCURRENCY.md``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from agents import (
    DEFAULT_LEASE,
    Agent,
    AgentStream,
    AlreadyDecidedError,
    AuditEntry,
    CallExpiredError,
    PendingInfo,
    ResumeDataInvalidError,
    RunChangedError,
    RunNotFoundError,
    RunSnapshot,
    StandingAsk,
    Store,
    StoreConflict,
    ToolCallNotPendingError,
)
from agents.mcp import mcp_servers

from . import messages
from .chat_state import ChatState, InboxEntry, ThreadNote, ask_of, grant_key, open_chat_state
from .decisions import RECENT_DECISION, Decisions, recent_key
from .following import Following
from .housekeeping import Housekeeping
from .intake import BUFFERED, DEFAULT_WORKERS, DELIVERY, Attempt, Delivery, Intake
from .metrics import Metrics
from .policy import ApprovalPolicy
from .presenter import Presenter, scope_of
from .stopping import Stopper, says_stop
from .tasks import KeyedLocks, TaskTracker, every
from .types import (
    ApprovalCard,
    Click,
    ClickResult,
    Inbox,
    InboxDecision,
    IncomingMessage,
    Messenger,
    Notice,
    Prompt,
    Reply,
    SuggestedPrompt,
    Text,
    ThreadKey,
    tool_label,
)
from .views import prompt, run_metadata, thread_of

log = logging.getLogger(__name__)

FEEDBACK = "feedback"
"""The audit event of a person's 👍 / 👎 on an answer (``result``: the rating)."""
FEEDBACK_HELPFUL = "helpful"
FEEDBACK_UNHELPFUL = "unhelpful"
SWEEP_INTERVAL = 30.0
"""The longest pause between two housekeeping passes (expiry, crash recovery)."""
CLICK_WAIT = 2.5
"""How long ``on_click`` waits for its decision before answering that it is queued."""


class ChatBot:
    """Routes chat messages and card clicks to an agent and posts what happens.

    Args:
        agent: The root agent; its store holds every paused run.
        policy: Who may decide what; by default anyone may, the requester included.
            A policy naming a tool no agent has is refused (``PolicyError``).
        chat: The chat state; by default the one beside the agent's store.
        dedupe_ttl: How long (seconds) a message's dedupe keys are remembered.
        lease: How long a process's work outlives its last heartbeat before another
            process (or this one, restarted) takes it over (``DEFAULT_LEASE``).
        workers: How many inbox entries (messages, clicks) this process works on
            at once; the rest wait in the inbox.
        suggested_prompts: Requests to offer a person starting a conversation, where
            the platform offers them (Slack's assistant view).
    """

    def __init__(
        self,
        agent: Agent,
        *,
        policy: ApprovalPolicy | None = None,
        chat: ChatState | None = None,
        dedupe_ttl: float = 3600.0,
        lease: timedelta = DEFAULT_LEASE,
        workers: int = DEFAULT_WORKERS,
        suggested_prompts: tuple[SuggestedPrompt, ...] = (),
    ) -> None:
        self.agent = agent
        self.suggested_prompts = suggested_prompts
        self.policy = policy or ApprovalPolicy()
        tools, delegations = _tool_names(agent)
        self.policy.check_tools(tools, sub_agents=delegations)
        # The policy's expiry is the runtime's: the sweep, clicks and replies agree.
        agent.set_expiry(self.policy.expires_in)
        agent.set_lease(lease)
        self._owns_chat = chat is None
        self.chat = chat if chat is not None else open_chat_state(self.store)
        self.following = Following(self.chat)
        self.dedupe_ttl = dedupe_ttl
        self.tasks = TaskTracker()
        self.metrics = Metrics(background_tasks=lambda: float(self.tasks.running))
        agent.set_standing_approval(self._standing)
        self.mcp_servers = mcp_servers(agent)
        """The agent tree's MCP connections (fixed with the agents), for health and metrics."""
        self.metrics.watch_mcp(self.mcp_servers)
        self._threads = KeyedLocks()
        self.presenter = Presenter(
            agent_id=agent.id,
            chat=self.chat,
            following=self.following,
            policy=self.policy,
            metrics=self.metrics,
            schema_of=agent.input_schema,
        )
        self.decisions = Decisions(
            agent=agent,
            policy=self.policy,
            chat=self.chat,
            presenter=self.presenter,
            tasks=self.tasks,
            threads=self._threads,
            metrics=self.metrics,
        )
        self.stopper = Stopper(agent, self.presenter, self.metrics)
        self.housekeeping = Housekeeping(
            agent=agent,
            policy=self.policy,
            chat=self.chat,
            presenter=self.presenter,
            tasks=self.tasks,
            threads=self._threads,
            metrics=self.metrics,
        )
        self.intake = Intake(
            self.chat,
            self._work,
            tasks=self.tasks,
            lease=lease.total_seconds(),
            workers=workers,
            on_delay=self._delayed,
        )
        self._click_waiters: dict[str, asyncio.Future[ClickResult]] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def busy(self) -> bool:
        """Whether background work (deliveries, runs, decisions) is still going on."""
        return self.tasks.running > 0 or self.intake.busy

    @property
    def store(self) -> Store:
        """The agent's store, beside which the chat state is kept (the core itself reaches
        runs and the audit log through ``Agent``)."""
        store = self.agent.store
        assert store is not None  # set by the runtime once the agent is configured
        return store

    # -- the adapter port -------------------------------------------------------

    def register(self, platform: str, messenger: Messenger) -> None:
        """Answer threads of ``platform`` through ``messenger``."""
        self.presenter.register(platform, messenger)

    def messenger(self, platform: str) -> Messenger:
        """The messenger registered for a platform (``LookupError`` if none)."""
        return self.presenter.messenger(platform)

    async def on_click(self, click: Click) -> ClickResult:
        """Record a click in the inbox, then wait a moment for its decision.

        The card to show when decided within ``CLICK_WAIT`` s (the run goes on in
        the background); otherwise an accepted result without a card, and the
        clicker is told privately if the decision is refused later.

        Raises:
            Overloaded: The store is unreachable and this process cannot keep more.
        """
        waiter: asyncio.Future[ClickResult] = asyncio.get_running_loop().create_future()
        written = await self.intake.submit(
            self._click_write(click, waiter), Delivery(click=click), say_delayed=False
        )
        if written is BUFFERED:
            waiter.cancel()  # the answer below says it is delayed
            return ClickResult(accepted=True, said=(messages.CLICK_DELAYED,))
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), CLICK_WAIT)
        except TimeoutError:
            waiter.cancel()  # told privately instead, if it comes to that
            return ClickResult(accepted=True, said=(messages.CLICK_QUEUED,))
        finally:
            if written is not None:
                self._click_waiters.pop(written, None)

    async def accept_click(self, click: Click) -> None:
        """Record a click in the inbox; a refusal is told to the clicker privately.

        Raises:
            Overloaded: The store is unreachable and this process cannot keep more.
        """
        await self.intake.submit(self._click_write(click, None), Delivery(click=click))

    def _click_write(
        self, click: Click, waiter: asyncio.Future[ClickResult] | None
    ) -> Callable[[], Awaitable[str | None]]:
        body = DELIVERY.dump_json(Delivery(click=click)).decode()
        # One key per click, so a write retried after it landed is a copy.
        keys = (f"click:{uuid.uuid4().hex}",)

        async def write() -> str | None:
            entry_id = await self.chat.enqueue(body, keys=keys, ttl=self.dedupe_ttl)
            if entry_id is not None and waiter is not None and not waiter.done():
                self._click_waiters[entry_id] = waiter
            return entry_id

        return write

    async def check_click(self, click: Click) -> Text | None:
        """Why this click would be refused, or ``None``; changes nothing.

        For adapters that ask for more before deciding (a reason dialog):
        a refusal is better said before someone types a reason.
        """
        return await self.decisions.check(click)

    async def show_waiting(self, thread: ThreadKey) -> int:
        """Post again every card and question still waiting in ``thread``; how many."""
        messenger = self.presenter.messenger(thread.platform)
        waiting = await self._pending(thread.id)
        for info in waiting:
            await self.presenter.show_pending(messenger, thread, info)
        return len(waiting)

    async def check_places(self) -> None:
        """Fail closed, at start, on a policy naming a channel or a user group that no
        registered platform has (``PolicyError``); call once every adapter is registered."""
        await self.presenter.check_places()

    async def inbox(self, thread: ThreadKey, user_id: str, user_name: str | None = None) -> Inbox:
        """What waits for ``user_id`` in ``thread``'s workspace, and what they decided lately.

        Reads only the runs indexed for them (``ChatState.waiting_for``: theirs, anyone's,
        their groups', their own requests), pruning those decided since; the decisions
        come from the audit log.
        """
        self.presenter.remember_name(thread, user_id, user_name)
        scope = scope_of(thread)
        now = datetime.now(UTC)
        waiting: list[ApprovalCard] = []
        requested: list[ApprovalCard] = []
        names = await self.presenter.inbox_names(thread, user_id)
        for run_id in sorted(await self.chat.waiting_for(scope, names)):
            snap = await self._run(run_id)
            origin = thread_of(snap.metadata) if snap is not None else None
            if snap is None or origin is None or not origin.id.startswith(scope):
                continue
            if not any(c.state == "pending" and c.kind == "approval" for c in snap.pending):
                await self.chat.unindex_waiting(scope, names, run_id)  # decided since
                continue
            for call in snap.pending:
                info = PendingInfo.of(run_id, call)
                if call.state != "pending" or call.kind != "approval" or info.expires_at <= now:
                    continue
                card = replace(self.presenter.card(origin, info), requested_in=origin)
                allowed = await self.presenter.deciders(origin, info)
                refusal = self.policy.check(
                    info.tool_name, info.requester, user_id, allowed=allowed
                )
                if refusal is None and not await self._voted(info, user_id):
                    waiting.append(card)
                elif info.requester == user_id:
                    requested.append(card)
        decided = await self._recent_decisions(scope, user_id)
        grants = await self.chat.grants_given(user_id, scope, now.timestamp())
        return Inbox(
            person=self.presenter.who(thread, user_id),
            waiting=tuple(sorted(waiting, key=lambda c: c.expires_at)),
            requested=tuple(sorted(requested, key=lambda c: c.expires_at)),
            decided=decided,
            grants=len(grants),
        )

    async def _run(self, run_id: str) -> RunSnapshot | None:
        try:
            return await self.agent.get_run(run_id)
        except RunNotFoundError:
            return None

    async def _voted(self, call: PendingInfo, user_id: str) -> bool:
        """Whether ``user_id`` already approved a call that needs several approvals (it
        waits for others, not for them)."""
        if self.policy.quorum(call.tool_name) == 1:
            return False
        return any(
            person.id == user_id for person in await self.chat.votes(call.run_id, ask_of(call))
        )

    async def _recent_decisions(self, scope: str, user_id: str) -> tuple[InboxDecision, ...]:
        """``user_id``'s latest decisions in a workspace, newest first (a sensitive
        tool's arguments left out, as the policy says now)."""
        found: list[InboxDecision] = []
        for item in await self.chat.recent(recent_key(scope, user_id)):
            try:
                decision = RECENT_DECISION.validate_json(item)
            except ValueError:
                log.warning("a kept decision of %s is not readable; skipped", user_id)
                continue
            if self.policy.rule(decision.tool_name).sensitive:
                decision = replace(decision, args={})
            found.append(decision)
        return tuple(found)

    async def revoke_given(self, thread: ThreadKey, user_id: str) -> Text:
        """End every standing grant ``user_id`` gave in ``thread``'s workspace."""
        scope = scope_of(thread)
        given = await self.chat.grants_given(user_id, scope, datetime.now(UTC).timestamp())
        count = 0
        for thread_id, key in given:
            count += await self.chat.revoke_grant(thread_id, key)
        if not count:
            return (messages.NO_GRANTS_GIVEN,)
        return (messages.GRANTS_GIVEN_ENDED.format(count=count),)

    async def on_feedback(
        self, thread: ThreadKey, user_id: str, run_id: str, *, helpful: bool
    ) -> Text:
        """Keep a person's 👍 / 👎 on an answer: once per person and rating, in the audit
        log (event ``feedback``, ``result`` the rating) and the metrics."""
        try:
            snap = await self.agent.get_run(run_id)
        except RunNotFoundError:
            return (messages.FEEDBACK_UNKNOWN,)
        if snap.thread_id != thread.id:
            return (messages.FEEDBACK_UNKNOWN,)
        rating = FEEDBACK_HELPFUL if helpful else FEEDBACK_UNHELPFUL
        given = await self.agent.audit(run_id=run_id)
        if any(e.event == FEEDBACK and e.actor == user_id and e.result == rating for e in given):
            return (messages.FEEDBACK_THANKS,)
        await self.agent.record(
            AuditEntry(
                event=FEEDBACK,
                run_id=run_id,
                thread_id=thread.id,
                tool_call_id="",
                tool_name="",
                requester=snap.resource_id,
                actor=user_id,
                result=rating,
            )
        )
        self.metrics.feedback.labels(rating=rating).inc()
        return (messages.FEEDBACK_THANKS,)

    async def on_stop(self, thread: ThreadKey, user_id: str, run_id: str | None = None) -> Text:
        """Stop a run of the thread (``run_id``; else each one working or waiting) for
        ``user_id``, if they may: what it ends is said in the thread; the returned
        text, for them only, says why nothing was stopped (empty when something was)."""
        return await self.stopper.stop(thread, user_id, run_id)

    async def card_now(self, click: Click) -> ApprovalCard | None:
        """The card a click's ids name, as it reads now (see ``ChatCore.card_now``)."""
        return await self.decisions.card_now(click)

    async def edit_form(self, click: Click) -> Prompt | Text:
        """The form an ``edit`` click opens, or why editing would be refused."""
        return await self.decisions.edit_form(click)

    async def question_form(self, click: Click) -> Prompt | Text:
        """The question an ``answer`` click opens a form for, or why it would be refused."""
        return await self.decisions.question_form(click)

    # -- housekeeping -----------------------------------------------------------

    async def sweep_expired(self, now: datetime | None = None) -> int:
        """Expire every call past its time; see ``Housekeeping.sweep_expired``."""
        return await self.housekeeping.sweep_expired(now)

    async def send_reminders(self, now: datetime | None = None) -> int:
        """Send the reminders and escalations due; see ``Housekeeping.send_reminders``."""
        return await self.housekeeping.send_reminders(now)

    async def recover_interrupted(self, now: datetime | None = None) -> int:
        """Report runs a crash left in flight; see ``Housekeeping.recover_interrupted``."""
        return await self.housekeeping.recover_interrupted(now)

    @property
    def sweep_interval(self) -> float:
        """Half a lease, at most 30 s: a crashed run is recovered within 1.5 leases."""
        return min(SWEEP_INTERVAL, self.intake.lease / 2)

    def start_sweeper(self, interval: float | None = None) -> None:
        """Expire overdue calls and recover interrupted ones every ``interval`` s, until closed.

        By default every ``sweep_interval``. Also starts looking for inbox
        entries other processes wrote or left behind.
        """
        if interval is None:
            interval = self.sweep_interval
        if self._sweeper is None:
            self.intake.start()
            self._sweeper = asyncio.create_task(
                every(interval, self.housekeeping.run_once, what="expiry sweep"),
                name="expiry-sweeper",
            )

    # -- lifecycle --------------------------------------------------------------

    async def drain(self) -> None:
        """Wait until no background work is running (tests, console turns)."""
        while self.busy:
            await self.tasks.drain()
            if self.intake.busy:
                await asyncio.sleep(0.005)

    async def aclose(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109 (grace period)
        """Stop the sweeper, let background work finish for ``timeout`` s, cancel the rest.

        Closing twice is harmless (the server's shutdown and the CLI both close).
        """
        if self._closed:
            return
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None
        await self.intake.aclose(timeout)
        await self.tasks.aclose(timeout)
        if self._owns_chat:
            await self.chat.close()

    # -- messages ---------------------------------------------------------------

    async def on_message(self, message: IncomingMessage) -> None:
        """Record a person's message in the inbox, unless it is a copy or not for the bot.

        Returns once it is safe to ack: the message is in the inbox (or, while the
        store is unreachable, kept in this process to be written when it answers).

        Raises:
            Overloaded: The store is unreachable and this process cannot keep more.
        """
        self.metrics.messages_received.inc()
        self.presenter.messenger(message.thread.platform)  # a wiring bug fails here, loudly
        self.presenter.remember_name(message.thread, message.user_id, message.user_name)
        await self.intake.submit(self._message_write(message), Delivery(message=message))

    def _message_write(self, message: IncomingMessage) -> Callable[[], Awaitable[str | None]]:
        thread = message.thread
        keys = [f"dedupe:{thread.platform}:{key}" for key in message.dedupe_keys]
        # Without what says where it came from: a copy's keys must not look new.
        body = DELIVERY.dump_json(Delivery(message=replace(message, reference=None))).decode()

        # Whether it is for the bot is decided in the same step as the dedupe
        # claim, before it: a copy that is not must never take the key of the one
        # that is. Before the ack, this one atomic call is all there is (and, for
        # a reply in a thread not known here to be followed, one read first).
        note = ThreadNote(
            thread_id=thread.id,
            only_if_followed=message.only_if_followed,
            follow=message.addressed and not message.only_if_followed,
            reference=message.reference,
        )

        async def write() -> str | None:
            if message.only_if_followed and not await self.following.follows(thread):
                return None  # not even a store call for a thread nobody asked the bot in
            entry_id = await self.chat.enqueue(body, keys=keys, ttl=self.dedupe_ttl, note=note)
            if entry_id is None:
                self.metrics.messages_duplicate.inc()
                log.debug(
                    "dropping a redelivered message, or one not for the bot, in %s", thread.id
                )
            elif note.follow:
                self.following.remember(thread)
            return entry_id

        return write

    async def _work(self, delivery: Delivery, entry: InboxEntry, attempt: Attempt) -> None:
        """One inbox entry's work: a message's run segment, or a click's decision."""
        if delivery.message is not None:
            await self._handle_message(delivery.message, entry, attempt)
        elif delivery.click is not None:
            await self._handle_click(delivery.click, entry, attempt)

    async def _delayed(self, delivery: Delivery) -> None:
        """Tell the people waiting, once per delivery, that the store holds things up."""
        try:
            if delivery.message is not None:
                if delivery.message.only_if_followed or not delivery.message.addressed:
                    return  # perhaps not even for the bot: no word to everyone overheard
                thread = delivery.message.thread
                messenger = self.presenter.messenger(thread.platform)
                notice = self.presenter.notice_for(
                    thread, delivery.message.user_id, messages.DELAYED
                )
                await self.presenter.say(messenger, thread, notice)
            elif delivery.click is not None:
                click = delivery.click
                await self.presenter.tell(click.thread, click.user_id, (messages.CLICK_DELAYED,))
        except Exception as exc:  # the store may be what is down: best effort
            log.warning("could not say that a request is delayed: %s", exc)

    async def _handle_click(self, click: Click, entry: InboxEntry, attempt: Attempt) -> None:
        if attempt.last:
            result = await self.decisions.on_click(click)
        else:
            result = await self.decisions.decide(click)
        waiter = self._click_waiters.pop(entry.id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(result)
        elif not result.accepted and result.said:
            await self.presenter.tell(click.thread, click.user_id, result.said)

    async def _handle_message(
        self, message: IncomingMessage, entry: InboxEntry, attempt: Attempt
    ) -> None:
        thread = message.thread
        messenger = self.presenter.messenger(thread.platform)
        # A message's run is named after its entry: a retry after a crash finds it.
        run_id = f"run_inbox_{entry.id}"
        # Not behind the thread's lock: the work it stops holds that.
        if says_stop(message.text) and await self._stop_by_words(message, retry=attempt.retry):
            return
        async with self._threads.hold(thread.id):
            try:
                if attempt.retry and await self._run(run_id) is not None:
                    await self._catch_up(thread, messenger, run_id)
                    return
                stream = await self._stream_for(message, messenger, run_id, retry=attempt.retry)
            except StoreConflict:
                # Another worker started it a moment ago (a lease that lapsed while
                # the store was away): that worker shows it.
                log.info("the run of inbox entry %s is already started elsewhere", entry.id)
                return
            except Exception:
                if not attempt.last:
                    raise
                log.exception("could not start work on a message in %s", thread.id)
                self.metrics.runs_failed.inc()
                await self.presenter.say(messenger, thread, Notice(text=messages.INTERNAL_ERROR))
                return
            if stream is not None:
                await self.presenter.consume(thread, messenger, stream, requester=message.user_id)

    async def _stop_by_words(self, message: IncomingMessage, *, retry: bool) -> bool:
        """Stop the thread's work on a message that only says ``stop``; whether it was
        taken so. A question waiting while nothing works is left to hear ``cancel``."""
        thread = message.thread
        runs = await self.stopper.active(thread)
        now = datetime.now(UTC)
        asking = any(
            p.kind == "suspension" and p.state == "pending" and p.expires_at > now
            for run in runs
            for p in run.pending
        )
        if asking and not any(run.in_flight for run in runs):
            return False
        if not runs and (retry or not message.addressed):
            return True  # stopped by this very message before a crash, or not for the bot
        said = await self.stopper.stop_runs(thread, message.user_id, runs)
        if said:
            await self.presenter.tell(thread, message.user_id, said)
        return True

    async def _catch_up(self, thread: ThreadKey, messenger: Messenger, run_id: str) -> None:
        """Show what a run started by a process that died may not have shown yet.

        A card or question not recorded as posted is posted; a finished run's
        answer is posted again (a crash between posting it and marking the
        message done repeats it: better than losing it). A run still in flight
        is crash recovery's, once its heartbeat lapsed.
        """
        log.info("the run of %s was started by a process that stopped; catching up", run_id)
        run = await self.agent.get_run(run_id)
        if run.status == "paused":
            for info in await self._pending(thread.id):
                if info.run_id == run_id and await self.presenter.card_place(info) is None:
                    await self.presenter.show_pending(messenger, thread, info)
        elif run.status in ("finished", "failed"):
            if run.text:
                await self.presenter.say(messenger, thread, Reply(text=run.text))
            if run.status == "failed":
                error = messages.RUN_FAILED.format(error=run.error or messages.INTERNAL_ERROR)
                await self.presenter.say(messenger, thread, Notice(text=error))
            elif (why := messages.FINISH_NOTES.get(run.finish_reason or "")) is not None:
                await self.presenter.say(messenger, thread, Notice(text=why))

    async def _standing(self, ask: StandingAsk) -> str | None:
        """Who granted the thread a standing approval covering this call, if anyone (a
        tool the policy no longer offers grants for has none)."""
        if ask.thread_id is None or not self.policy.rule(ask.tool_name).grant_for:
            return None
        now = datetime.now(UTC).timestamp()
        return await self.chat.grant(ask.thread_id, grant_key(ask.requester, ask.tool_name), now)

    async def _revoke(self, thread: ThreadKey, messenger: Messenger) -> None:
        """End the thread's grants, saying how many there were."""
        count = await self.chat.revoke_grants(thread.id)
        text = messages.GRANTS_REVOKED.format(count=count) if count else messages.NO_GRANTS
        await self.presenter.say(messenger, thread, Notice(text=text))

    async def _cancel_question(
        self, message: IncomingMessage, messenger: Messenger, question: PendingInfo, *, retry: bool
    ) -> AgentStream | None:
        """Leave a question on the words ``cancel``/``stop``: the tool hears it was cancelled."""
        thread = message.thread
        allowed = await self.presenter.deciders(thread, question)
        refused = self.policy.question_refusal(
            question, message.user_id, declining=True, allowed=allowed
        )
        if refused is not None:
            await self.presenter.tell(thread, message.user_id, (refused,))
            return None
        try:
            stream = await self.agent.decline_tool_call(
                run_id=question.run_id,
                tool_call_id=question.tool_call_id,
                decided_by=message.user_id,
                cancel=True,
            )
        except (AlreadyDecidedError, CallExpiredError, ToolCallNotPendingError):
            if not retry:
                await self.presenter.say(messenger, thread, Notice(text=messages.QUESTION_GONE))
            return None
        except RunChangedError:
            await self.presenter.say(messenger, thread, Notice(text=messages.ANSWER_RACED))
            return None
        self.metrics.decided("cancelled")
        await self.presenter.show_settled(messenger, thread, question, "cancelled", message.user_id)
        return stream

    async def _stream_for(
        self, message: IncomingMessage, messenger: Messenger, run_id: str, *, retry: bool = False
    ) -> AgentStream | None:
        """Resume the thread's question, point at its card, or start a new run.

        ``retry``: this message may have been worked on before, so a question
        found answered may have been answered by it: nothing is said then.
        """
        thread = message.thread
        pending = await self._pending(thread.id)
        questions = [p for p in pending if p.kind == "suspension"]
        if " ".join(message.text.lower().split()) in messages.REVOKE_WORDS:
            await self._revoke(thread, messenger)
            return None
        live = [q for q in questions if q.expires_at > datetime.now(UTC)]
        waiting = _not_an_answer(message, live[-1]) if live else None
        if waiting is not None:
            # A new request, by all signs: never taken as the answer without asking.
            await self.presenter.say(messenger, thread, Notice(text=waiting))
            return None
        if live and _cancels(message.text, live[-1]):
            return await self._cancel_question(message, messenger, live[-1], retry=retry)
        if questions:
            refused = (
                self.policy.question_refusal(
                    live[-1],
                    message.user_id,
                    reply=True,
                    allowed=await self.presenter.deciders(thread, live[-1]),
                )
                if live
                else None
            )
            if refused is not None:
                await self.presenter.tell(thread, message.user_id, (refused,))
                return None
            try:
                answered = (
                    await self.agent.answer_question(
                        message.text,
                        thread_id=thread.id,
                        resource_id=message.user_id,
                        run_id=live[-1].run_id,
                        tool_call_id=live[-1].tool_call_id,
                    )
                    if live
                    else None
                )
            except ResumeDataInvalidError as exc:
                asked = next((p for p in questions if p.tool_call_id == exc.tool_call_id), None)
                # Asked again below the reply: that message is the question's card now.
                error = "; ".join(exc.errors)
                await self.presenter.show_pending(messenger, thread, asked or questions[-1], error)
                return None
            except (AlreadyDecidedError, CallExpiredError, ToolCallNotPendingError):
                # Another replica took the answer first, or the question expired meanwhile.
                if not retry:
                    gone = Notice(text=messages.QUESTION_GONE)
                    await self.presenter.say(messenger, thread, gone)
                return None
            except RunChangedError:
                await self.presenter.say(messenger, thread, Notice(text=messages.ANSWER_RACED))
                return None
            if answered is not None:
                await self.presenter.show_settled(
                    messenger, thread, live[-1], "answered", message.user_id
                )
                return answered
            # The question went away between the look and the answer: only a
            # message addressed to the bot may start a new run, as it may below.
            pending = [p for p in pending if p.kind != "suspension"]
        if not message.addressed:
            return None
        if pending:
            notice = messages.APPROVAL_PENDING.format(tool=pending[-1].tool_name)
            await self.presenter.say(messenger, thread, Notice(text=notice))
            return None
        self.metrics.runs_started.inc()
        return await self.agent.stream(
            message.text,
            thread_id=thread.id,
            resource_id=message.user_id,
            auto_resume_suspended_tools=False,
            metadata=run_metadata(thread),
            run_id=run_id,
        )

    async def _pending(self, thread_id: str) -> list[PendingInfo]:
        now = datetime.now(UTC)
        pending = await self.agent.list_suspended_runs(thread_id=thread_id)
        return [p for p in pending if p.expires_at > now]


NEW_REQUEST_WORDS = 3
"""A reply to a choice question with at least this many words, none of them a choice,
is a new request (``_not_an_answer``)."""


def _not_an_answer(message: IncomingMessage, question: PendingInfo) -> str | None:
    """What to say when a reply is clearly a new request, not the question's answer.

    It mentions the bot (where a plain reply would do), or the question says what its
    answers are (a choice of a few) and the reply is a sentence that is none of them.
    """
    asked = prompt(question)
    tool = tool_label(asked)
    if message.mentioned:
        return messages.QUESTION_WAITS.format(tool=tool)
    if len(asked.fields) != 1 or asked.fields[0].kind != "choice":
        return None
    choices = asked.fields[0].choices
    said = " ".join(message.text.lower().strip(" .!").split())
    if said in {c.lower() for c in choices} or len(said.split()) < NEW_REQUEST_WORDS:
        return None  # an answer, or a short slip: asked again as usual if it does not fit
    if said in messages.CANCEL_WORDS:
        return None
    return messages.QUESTION_WAITS_CHOICE.format(tool=tool, choices=", ".join(choices))


def _cancels(text: str, question: PendingInfo) -> bool:
    """Whether a reply only says to leave the question (and is not one of its choices)."""
    said = " ".join(text.lower().strip(" .!").split())
    if said not in messages.CANCEL_WORDS:
        return False
    choices = {c.lower() for f in prompt(question).fields for c in f.choices}
    return said not in choices


def _tool_names(agent: Agent) -> tuple[set[str], set[str]]:
    """The tools of an agent tree that can be approved, and its delegation tools."""
    tools: set[str] = set()
    delegations: set[str] = set()
    for spec in agent.tool_specs():
        tool = agent.tool(spec.name)
        (delegations if tool is not None and tool.delegate_to else tools).add(spec.name)
    for sub in agent.agents.values():
        sub_tools, sub_delegations = _tool_names(sub)
        tools |= sub_tools
        delegations |= sub_delegations
    return tools, delegations
