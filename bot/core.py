"""The chat core: messages and clicks in, agent runs and views out.

Adapters call ``on_message`` and ``on_click`` (or ``accept_click``) before they
ack: each writes the delivery to the durable intake queue (``intake``), and the ack
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
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime, timedelta

from agents import (
    DEFAULT_LEASE,
    Agent,
    AuditEntry,
    Refusal,
    Remark,
    RunNotFoundError,
    RunSnapshot,
    StandingAsk,
    Store,
    StoreConflict,
    run_id_for,
)
from agents.chain import Seal
from agents.mcp import mcp_servers
from agents.provenance import Origin, arriving

from . import texts
from .callbacks import CALLBACK
from .chat_state import ChatState, IntakeEntry, ThreadNote, open_chat_state
from .clients import Clients
from .config import ConfigError
from .decisions import Decisions
from .feedback import Feedback
from .following import Following
from .followups import FollowUps
from .grants import Grants
from .housekeeping import DEFAULT_RUN_RETENTION, Housekeeping
from .inbox import Inboxes
from .intake import BUFFERED, DEFAULT_WORKERS, DELIVERY, Attempt, Delivery, Intake
from .links import Links
from .metrics import Metrics
from .pages import DecisionPages
from .policy import POLICY_ACTOR, ApprovalPolicy, EffectiveRule, treated_otherwise
from .presenter import Presenter
from .replies import Replies
from .reviewer import AUTO_APPROVED, REVIEWER_ACTOR, Reviewer
from .service import ApprovalService
from .sink import AuditSink
from .stopping import Stopper, says_stop
from .tasks import KeyedLocks, TaskTracker, every
from .traces import message_span
from .types import (
    ApprovalCard,
    Click,
    ClickResult,
    Inbox,
    IncomingMessage,
    Messenger,
    Notice,
    Prompt,
    SuggestedPrompt,
    Text,
    ThreadKey,
)

log = logging.getLogger(__name__)

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
        workers: How many intake entries (messages, clicks) this process works on
            at once; the rest wait in the intake queue.
        suggested_prompts: Requests to offer a person starting a conversation, where
            the platform offers them (Slack's assistant view).
        run_retention: How long finished runs and idle threads' history are kept; the
            sweeper prunes them hourly (``Housekeeping.prune_finished``).
        audit_retention: How long audit entries are kept (``None``: for ever).
        seal: Signs the audit chain's head (now and then, and on closing) and what a
            retention prune leaves (``AUDIT_SIGNING_KEY``; ``None``: nothing is signed).
        sink: Delivers every audit entry to a file or a webhook (``AUDIT_SINK``), every
            ``sink.interval`` s once the sweeper starts, and once more on closing.
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
        run_retention: timedelta = DEFAULT_RUN_RETENTION,
        audit_retention: timedelta | None = None,
        clients: Clients | None = None,
        public_url: str | None = None,
        shadow: ApprovalPolicy | None = None,
        seal: Seal | None = None,
        sink: AuditSink | None = None,
    ) -> None:
        self.suggested_prompts = suggested_prompts
        self.policy = policy or ApprovalPolicy()
        self.shadow = shadow
        """A policy tried beside the one in force (``POLICY_MODE=shadow``): where it would
        treat a call otherwise is logged, never acted on."""
        self.clients = clients or Clients()
        tools, delegations = _tool_names(agent)
        for checked in (self.policy, *([shadow] if shadow else [])):
            named = tools | self.clients.policy_names(checked.tool_names)
            checked.check_tools(named, sub_agents=delegations)
        # The policy's expiry is the runtime's (the sweep, clicks and replies agree), and
        # the grants of a thread are its standing approvals. Clients are peer agents.
        agent = agent.configured(
            lease=lease,
            expiry=self.policy.expires_in,
            standing_approval=self._standing,
            peers=self.clients.peers(),
        )
        self.agent = agent
        """The agent as this core runs it: the given one, with the core's settings."""
        self.reviewer = Reviewer(agent.model)
        """Reviews calls of rules with ``review = "model"`` (the agent's model unless told)."""
        self._owns_chat = chat is None
        self.chat = chat if chat is not None else open_chat_state(self.store)
        self.following = Following(self.chat)
        self.dedupe_ttl = dedupe_ttl
        self.tasks = TaskTracker()
        self.metrics = Metrics(background_tasks=lambda: float(self.tasks.running))
        self.feedback = Feedback(agent=agent, metrics=self.metrics)
        self.mcp_servers = mcp_servers(agent)
        """The agent tree's MCP connections (fixed with the agents), for health and metrics."""
        self.metrics.watch_mcp(self.mcp_servers)
        self._threads = KeyedLocks()
        self.links = Links(self.chat, public_url)
        """Decision links, one per approver and call (``public_url``: where browsers reach
        the bot; without it links are paths, and cards sent to people carry none)."""
        self.presenter = Presenter(
            agent_id=agent.id,
            chat=self.chat,
            following=self.following,
            policy=self.policy,
            metrics=self.metrics,
            schema_of=agent.input_schema,
            links=self.links,
            record=agent.record,
        )
        self.grants = Grants(
            agent=agent, policy=self.policy, chat=self.chat, presenter=self.presenter
        )
        self.inboxes = Inboxes(
            agent=agent,
            policy=self.policy,
            chat=self.chat,
            presenter=self.presenter,
            tasks=self.tasks,
        )
        self.decisions = Decisions(
            agent=agent,
            policy=self.policy,
            chat=self.chat,
            presenter=self.presenter,
            inboxes=self.inboxes,
            grants=self.grants,
            tasks=self.tasks,
            threads=self._threads,
            metrics=self.metrics,
        )
        self.replies = Replies(
            agent=agent,
            policy=self.policy,
            presenter=self.presenter,
            grants=self.grants,
            followups=FollowUps(agent, self.chat),
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
            retention=run_retention,
            audit_retention=audit_retention,
            seal=seal,
        )
        self.intake = Intake(
            self.chat,
            self._work,
            tasks=self.tasks,
            lease=lease.total_seconds(),
            workers=workers,
            on_delay=self._delayed,
        )
        self.service = ApprovalService(
            agent=agent,
            clients=self.clients,
            presenter=self.presenter,
            tasks=self.tasks,
            chat=self.chat,
            following=self.following,
            links=self.links,
        )
        """What the team's other agents ask (the HTTP API and the MCP server serve it)."""
        self.pages = DecisionPages(
            agent=agent,
            links=self.links,
            people=self.presenter.people,
            card_now=self.decisions.card_now,
            check=self.decisions.check,
            click=self.on_click,
        )
        """Decision pages: a card decided in a browser, through one approver's link."""
        self.housekeeping.timed[CALLBACK] = self.service.callbacks.due
        self._click_waiters: dict[str, asyncio.Future[ClickResult]] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self.sink = sink
        self._sink_task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def busy(self) -> bool:
        """Whether background work (deliveries, runs, decisions) is still going on."""
        return self.tasks.running > 0 or self.intake.busy

    async def _standing(self, ask: StandingAsk) -> str | Remark | Refusal | None:
        """Who already approved calls like ``ask``: the policy, for a tier that needs no
        person (``POLICY_ACTOR`` and the tier); else a standing decline here declines it
        (``Grants.refused``); else a grant here (``Grants.standing``)."""
        rule = self.policy.rule(ask.tool_name, ask)
        if self.shadow is not None:
            self._shadowed(ask, rule)
        if not rule.approval:
            return f"{POLICY_ACTOR}{rule.tier}"
        refused = await self.grants.refused(ask, rule)
        if refused is not None:
            return refused
        granted = await self.grants.standing(ask, rule)
        if granted is not None or not rule.review:  # a rule that reviews has no quorum
            return granted
        return await self._reviewed(ask)

    async def _reviewed(self, ask: StandingAsk) -> str | Remark:
        """The reviewer's word on ``ask``: who approved it (``clear``: the reviewer, on
        record as ``auto_approved`` with its reason), else what the card says."""
        review = await self.reviewer.review(ask)
        if review.verdict is None:
            return Remark(texts.REVIEW_NONE.format(why=review.failure))
        if review.verdict.verdict == "caution":
            return Remark(texts.REVIEW_CAUTION.format(reason=review.verdict.reason))
        actor = f"{REVIEWER_ACTOR}{review.model}"
        await self.agent.record(
            AuditEntry(
                event=AUTO_APPROVED,
                run_id=ask.run_id or "",
                thread_id=ask.thread_id,
                tool_call_id=ask.tool_call_id or "",
                tool_name=ask.tool_name,
                args=dict(ask.args),
                kind="approval",
                requester=ask.requester,
                actor=actor,
                reason=review.verdict.reason,
            )
        )
        return actor

    def _shadowed(self, ask: StandingAsk, rule: EffectiveRule) -> None:
        """Log where the shadow policy would treat ``ask`` otherwise (one line, or none)."""
        assert self.shadow is not None
        try:
            how = treated_otherwise(rule, self.shadow.rule(ask.tool_name, ask))
        except Exception:  # the shadow never changes what happens
            log.exception("shadow policy: %s could not be looked up", ask.tool_name)
            return
        if how is not None:
            log.warning(
                "shadow policy: %s in %s by %s: %s",
                ask.tool_name,
                ask.thread_id,
                ask.requester,
                how,
            )

    @property
    def store(self) -> Store:
        """The agent's store, beside which the chat state is kept (the core itself reaches
        runs and the audit log through ``Agent``)."""
        store = self.agent.store
        assert store is not None  # set when the agent was configured
        return store

    # -- the adapter port -------------------------------------------------------

    def register(self, platform: str, messenger: Messenger) -> None:
        """Answer threads of ``platform`` through ``messenger``."""
        self.presenter.register(platform, messenger)
        self.metrics.watch_platform(platform, messenger)

    def messenger(self, platform: str) -> Messenger:
        """The messenger registered for a platform (``LookupError`` if none)."""
        return self.presenter.messenger(platform)

    async def on_click(self, click: Click) -> ClickResult:
        """Record a click in the intake queue, then wait a moment for its decision.

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
            return ClickResult(accepted=True, said=(texts.CLICK_DELAYED,))
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), CLICK_WAIT)
        except TimeoutError:
            waiter.cancel()  # told privately instead, if it comes to that
            return ClickResult(accepted=True, said=(texts.CLICK_QUEUED,))
        finally:
            if written is not None:
                self._click_waiters.pop(written, None)

    async def accept_click(self, click: Click) -> None:
        """Record a click in the intake queue; a refusal is told to the clicker privately.

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

    async def check_click(self, click: Click, *, made: bool = False) -> Text | None:
        """Why this click would be refused, or ``None``.

        For adapters that ask for more before deciding (a reason dialog): a refusal
        is better said before someone types a reason. ``made``: a person made the
        click (not a look at what they may do): the policy's no is on record, as for
        a decision it refuses (who, and why); otherwise this changes nothing.
        """
        with self._clicking(click):
            return await self.decisions.check(click, made=made)

    async def show_waiting(self, thread: ThreadKey) -> int:
        """Post again every card and question still waiting in ``thread``; how many."""
        messenger = self.presenter.messenger(thread.platform)
        waiting = await self.replies.pending(thread.id)
        for info in waiting:
            await self.presenter.show_pending(messenger, thread, info)
        return len(waiting)

    async def check_places(self) -> None:
        """Fail closed, at start, on a policy naming a channel or a user group that no
        registered platform has (``PolicyError``); call once every adapter is registered."""
        await self.presenter.check_places()

    async def check_clients(self) -> None:
        """Fail closed, at start, on a client whose channel the bot cannot post in
        (``ConfigError``); call once every adapter is registered."""
        problems = await self.service.check_places()
        if problems:
            raise ConfigError(self.clients.source, problems)

    async def inbox(self, thread: ThreadKey, user_id: str, user_name: str | None = None) -> Inbox:
        """What waits for ``user_id`` in ``thread``'s workspace, and what they decided
        lately (``Inboxes.inbox``)."""
        return await self.inboxes.inbox(thread, user_id, user_name)

    async def revoke_given(self, thread: ThreadKey, user_id: str) -> Text:
        """End every standing grant ``user_id`` gave in ``thread``'s workspace."""
        with self._arriving(thread, user_id):
            return await self.grants.end_given(thread, user_id)

    async def on_feedback(
        self, thread: ThreadKey, user_id: str, run_id: str, *, helpful: bool
    ) -> Text:
        """Keep a person's 👍 / 👎 on an answer: once per person and rating, in the audit
        log (event ``feedback``, ``result`` the rating) and the metrics."""
        with self._arriving(thread, user_id):
            return await self.feedback.rate(thread, user_id, run_id, helpful=helpful)

    async def on_stop(self, thread: ThreadKey, user_id: str, run_id: str | None = None) -> Text:
        """Stop a run of the thread (``run_id``; else each one working or waiting) for
        ``user_id``, if they may: what it ends is said in the thread; the returned
        text, for them only, says why nothing was stopped (empty when something was)."""
        with self._arriving(thread, user_id):
            return await self.stopper.stop(thread, user_id, run_id)

    def _arriving(self, thread: ThreadKey, user_id: str) -> AbstractContextManager[Origin]:
        """What an adapter asks of the core directly (not through the intake), on record
        as coming through its platform, from its person as named here."""
        return arriving(thread.platform, {user_id: self.presenter.people.who(thread, user_id).name})

    async def card_now(self, click: Click) -> ApprovalCard | None:
        """The card a click's ids name, as it reads now (see ``ChatCore.card_now``)."""
        return await self.decisions.card_now(click)

    async def edit_form(self, click: Click) -> Prompt | Text:
        """The form an ``edit`` click opens, or why editing would be refused."""
        with self._clicking(click):
            return await self.decisions.edit_form(click)

    async def respond_form(self, click: Click) -> Prompt | Text:
        """The form a ``respond`` click opens, or why responding would be refused."""
        with self._clicking(click):
            return await self.decisions.respond_form(click)

    async def question_form(self, click: Click) -> Prompt | Text:
        """The question an ``answer`` click opens a form for, or why it would be refused."""
        with self._clicking(click):
            return await self.decisions.question_form(click)

    @staticmethod
    def _clicking(click: Click) -> AbstractContextManager[Origin]:
        """A click on record as coming through its platform (or page), from its person."""
        return arriving(click.via or click.thread.platform, {click.user_id: click.user_name})

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

        By default every ``sweep_interval``. Also starts looking for intake
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
        if self.sink is not None and self._sink_task is None:
            self._sink_task = asyncio.create_task(
                every(self.sink.interval, self.export_audit, what="audit sink"), name="audit-sink"
            )

    async def export_audit(self) -> int:
        """Deliver what the audit sink has not taken yet (``AuditSink.run_once``); how
        many entries. Never raises."""
        if self.sink is None:
            return 0
        return await self.sink.run_once(self.agent, self.chat, self.policy)

    # -- lifecycle --------------------------------------------------------------

    async def drain(self) -> None:
        """Wait until no background work is running (tests, console turns)."""
        while self.busy:
            await self.tasks.drain()
            if self.intake.busy:
                await asyncio.sleep(0.005)

    async def aclose(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109 (grace period)
        """Stop the sweeper, let background work finish for ``timeout`` s, cancel the rest;
        then sign the audit log's head and deliver it to the sink, for ``timeout`` s more
        at most.

        Closing twice is harmless (the server's shutdown and the CLI both close).
        """
        if self._closed:
            return
        self._closed = True
        self.service.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None
        if self._sink_task is not None:
            self._sink_task.cancel()
            await asyncio.gather(self._sink_task, return_exceptions=True)
            self._sink_task = None
        await self.intake.aclose(timeout)
        # What is cancelled past the grace is handed back (runs and intake entries),
        # for another replica to go on with at once rather than a lease later.
        self.agent.closing()
        await self.tasks.aclose(timeout)
        await self.service.callbacks.aclose()
        try:
            # A store or a target that does not answer holds the end up no longer than
            # the grace: the next replica signs and delivers what this one could not.
            async with asyncio.timeout(timeout):
                await self.housekeeping.seal_audit()  # what this process put on record
                if self.sink is not None:  # the last entries, the checkpoint included
                    await self.export_audit()
        except TimeoutError:
            log.warning(
                "the audit log's last signing or delivery took over %s s: left to a replica",
                timeout,
            )
        if self.sink is not None:
            await self.sink.aclose()
        if self._owns_chat:
            await self.chat.close()

    # -- messages ---------------------------------------------------------------

    async def on_message(self, message: IncomingMessage) -> None:
        """Record a person's message in the intake queue, unless it is a copy or not for the bot.

        Returns once it is safe to ack: the message is in the intake queue (or, while the
        store is unreachable, kept in this process to be written when it answers).

        Raises:
            Overloaded: The store is unreachable and this process cannot keep more.
        """
        self.metrics.messages_received.inc()
        self.presenter.messenger(message.thread.platform)  # a wiring bug fails here, loudly
        self.presenter.people.remember_name(message.thread, message.user_id, message.user_name)
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

    async def _work(self, delivery: Delivery, entry: IntakeEntry, attempt: Attempt) -> None:
        """One intake entry's work: a message's run segment, or a click's decision, each
        on record as coming through its platform (or page) from its person."""
        if delivery.message is not None:
            message = delivery.message
            names = {message.user_id: message.user_name}
            with arriving(message.thread.platform, names), message_span(message):
                await self._handle_message(message, entry, attempt)
        elif delivery.click is not None:
            click = delivery.click
            with self._clicking(click):
                await self._handle_click(click, entry, attempt)

    async def _delayed(self, delivery: Delivery) -> None:
        """Tell the people waiting, once per delivery, that the store holds things up."""
        try:
            if delivery.message is not None:
                if delivery.message.only_if_followed or not delivery.message.addressed:
                    return  # perhaps not even for the bot: no word to everyone overheard
                thread = delivery.message.thread
                messenger = self.presenter.messenger(thread.platform)
                notice = self.presenter.notice_for(thread, delivery.message.user_id, texts.DELAYED)
                await self.presenter.say(messenger, thread, notice)
            elif delivery.click is not None:
                click = delivery.click
                await self.presenter.tell(click.thread, click.user_id, (texts.CLICK_DELAYED,))
        except Exception as exc:  # the store may be what is down: best effort
            log.warning("could not say that a request is delayed: %s", exc)

    async def _handle_click(self, click: Click, entry: IntakeEntry, attempt: Attempt) -> None:
        if attempt.retry:  # the process that took it may have handed its run back
            await self.housekeeping.recover_run(click.run_id)
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
        self, message: IncomingMessage, entry: IntakeEntry, attempt: Attempt
    ) -> None:
        thread = message.thread
        messenger = self.presenter.messenger(thread.platform)
        # A message's run is named after its entry: a retry after a crash finds it.
        # (The name predates "intake queue"; runs already started keep being found by it.)
        run_id = run_id_for(f"run_inbox_{entry.id}", thread.id)
        # Not behind the thread's lock: the work it stops holds that.
        if says_stop(message.text) and await self.stopper.stop_by_words(
            message, retry=attempt.retry
        ):
            return
        async with self._threads.hold(thread.id):
            try:
                if attempt.retry and (run := await self._run_of(entry, run_id)) is not None:
                    run_id = run.run_id
                    await self.replies.catch_up(thread, messenger, run_id)
                    if run.released:  # its process shut down: go on with it now
                        await self.housekeeping.recover_run(run_id)
                    return
                stream = await self.replies.stream_for(
                    message, messenger, run_id, retry=attempt.retry
                )
            except StoreConflict:
                # Another worker started it a moment ago (a lease that lapsed while
                # the store was away): that worker shows it.
                log.info("the run of intake entry %s is already started elsewhere", entry.id)
                return
            except Exception:
                if not attempt.last:
                    raise
                log.exception("could not start work on a message in %s", thread.id)
                self.metrics.runs_failed.inc()
                await self.presenter.say(messenger, thread, Notice(text=texts.INTERNAL_ERROR))
                return
            if stream is not None:
                await self.presenter.consume(thread, messenger, stream, requester=message.user_id)

    async def _run(self, run_id: str) -> RunSnapshot | None:
        try:
            return await self.agent.get_run(run_id)
        except RunNotFoundError:
            return None

    async def _run_of(self, entry: IntakeEntry, run_id: str) -> RunSnapshot | None:
        """The run a message's entry started before: by its name, or by the name a
        version before ``run_id_for`` gave it (a retake across an upgrade)."""
        run = await self._run(run_id)
        legacy = f"run_inbox_{entry.id}"
        if run is None and legacy != run_id:
            run = await self._run(legacy)
        return run


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
