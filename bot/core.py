"""The chat core: messages and clicks in, agent runs and views out.

Adapters call ``on_message`` and ``on_click``; the core decides what the agent
does and answers through the adapter's ``Messenger``. Acks never wait for the
agent: everything after a message's dedupe, and after a click's decision, runs
in tracked background tasks. Work on one thread is serialized (in this process)
so a thread's replies come out in the order people wrote.

``ChatBot`` handles messages itself and has the other parts: a ``Presenter``
(streams into views, posting, people), ``Decisions`` (clicks, policy, quorum)
and ``Housekeeping`` (expiry sweep, crash recovery). Locks: ``CONCURRENCY.md``.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from agents import (
    DEFAULT_LEASE,
    Agent,
    AgentStream,
    AlreadyDecidedError,
    CallExpiredError,
    PendingInfo,
    ResumeDataInvalidError,
    RunChangedError,
    Store,
    ToolCallNotPendingError,
)

from . import messages
from .chat_state import ChatState, open_chat_state
from .decisions import Decisions
from .following import Following
from .housekeeping import Housekeeping
from .metrics import Metrics
from .policy import ApprovalPolicy
from .presenter import Presenter
from .tasks import KeyedLocks, TaskTracker, every
from .types import Click, ClickResult, IncomingMessage, Messenger, Notice, Text, ThreadKey
from .views import prompt, run_metadata

log = logging.getLogger(__name__)


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
    """

    def __init__(
        self,
        agent: Agent,
        *,
        policy: ApprovalPolicy | None = None,
        chat: ChatState | None = None,
        dedupe_ttl: float = 3600.0,
        lease: timedelta = DEFAULT_LEASE,
    ) -> None:
        self.agent = agent
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
        self._threads = KeyedLocks()
        self.presenter = Presenter(
            agent_id=agent.id,
            chat=self.chat,
            following=self.following,
            policy=self.policy,
            metrics=self.metrics,
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
        self.housekeeping = Housekeeping(
            agent=agent,
            chat=self.chat,
            presenter=self.presenter,
            tasks=self.tasks,
            threads=self._threads,
            metrics=self.metrics,
        )
        self._sweeper: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def busy(self) -> bool:
        """Whether background work (runs, decisions) is still going on."""
        return self.tasks.running > 0

    @property
    def store(self) -> Store:
        """The agent's store (runs, thread history, audit)."""
        return self.agent.engine.store

    # -- the adapter port -------------------------------------------------------

    def register(self, platform: str, messenger: Messenger) -> None:
        """Answer threads of ``platform`` through ``messenger``."""
        self.presenter.register(platform, messenger)

    def messenger(self, platform: str) -> Messenger:
        """The messenger registered for a platform (``LookupError`` if none)."""
        return self.presenter.messenger(platform)

    async def follows(self, thread: ThreadKey) -> bool:
        """Whether the bot takes part in ``thread``: replies there are for it."""
        return await self.following.follows(thread)

    async def on_click(self, click: Click) -> ClickResult:
        """Decide on a card now; update it and continue the run in the background."""
        return await self.decisions.on_click(click)

    async def check_click(self, click: Click) -> Text | None:
        """Why this click would be refused, or ``None``; changes nothing.

        For adapters that ask for more before deciding (a reason dialog):
        a refusal is better said before someone types a reason.
        """
        return await self.decisions.check(click)

    # -- housekeeping -----------------------------------------------------------

    async def sweep_expired(self, now: datetime | None = None) -> int:
        """Expire every call past its time; see ``Housekeeping.sweep_expired``."""
        return await self.housekeeping.sweep_expired(now)

    async def recover_interrupted(self, now: datetime | None = None) -> int:
        """Report runs a crash left in flight; see ``Housekeeping.recover_interrupted``."""
        return await self.housekeeping.recover_interrupted(now)

    def start_sweeper(self, interval: float = 30.0) -> None:
        """Expire overdue calls and recover interrupted ones every ``interval`` s, until closed."""
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(
                every(interval, self.housekeeping.run_once, what="expiry sweep"),
                name="expiry-sweeper",
            )

    # -- lifecycle --------------------------------------------------------------

    async def drain(self) -> None:
        """Wait until no background work is running (tests, console turns)."""
        await self.tasks.drain()

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
        await self.tasks.aclose(timeout)
        if self._owns_chat:
            await self.chat.close()

    # -- messages ---------------------------------------------------------------

    async def on_message(self, message: IncomingMessage) -> None:
        """Take a person's message: drop redeliveries, handle the rest in the background."""
        self.metrics.messages_received.inc()
        messenger = self.presenter.messenger(message.thread.platform)
        self.presenter.remember_name(message.thread, message.user_id, message.user_name)
        if await self._is_duplicate(message):
            self.metrics.messages_duplicate.inc()
            log.debug("dropping a redelivered message in %s", message.thread.id)
            return
        if message.addressed:
            await self.following.follow(message.thread)
        self.tasks.spawn(
            self._handle_message(message, messenger), name=f"message:{message.thread.id}"
        )

    async def _is_duplicate(self, message: IncomingMessage) -> bool:
        # All keys at once: a copy may share only one of them with the first
        # delivery (one message delivered as two kinds of event), and a copy must
        # never take a key from the delivery that will be handled.
        if not message.dedupe_keys:
            return False
        keys = [f"dedupe:{message.thread.platform}:{key}" for key in message.dedupe_keys]
        try:
            return not await self.chat.first_delivery(keys, ttl=self.dedupe_ttl)
        except Exception:
            # A duplicate answer is better than a lost message.
            log.exception("dedupe check failed; handling the message anyway")
            return False

    async def _handle_message(self, message: IncomingMessage, messenger: Messenger) -> None:
        thread = message.thread
        async with self._threads.hold(thread.id):
            try:
                stream = await self._stream_for(message, messenger)
            except Exception:
                log.exception("could not start work on a message in %s", thread.id)
                self.metrics.runs_failed.inc()
                await self.presenter.say(messenger, thread, Notice(text=messages.INTERNAL_ERROR))
                return
            if stream is not None:
                await self.presenter.consume(thread, messenger, stream)

    async def _stream_for(
        self, message: IncomingMessage, messenger: Messenger
    ) -> AgentStream | None:
        """Resume the thread's question, point at its card, or start a new run."""
        thread = message.thread
        pending = await self._pending(thread.id)
        questions = [p for p in pending if p.kind == "suspension"]
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
                await self.presenter.say(messenger, thread, again)
                return None
            except (AlreadyDecidedError, CallExpiredError, ToolCallNotPendingError):
                # Another replica took the answer first, or the question expired meanwhile.
                await self.presenter.say(messenger, thread, Notice(text=messages.QUESTION_GONE))
                return None
            except RunChangedError:
                await self.presenter.say(messenger, thread, Notice(text=messages.ANSWER_RACED))
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
        )

    async def _pending(self, thread_id: str) -> list[PendingInfo]:
        now = datetime.now(UTC)
        pending = await self.agent.list_suspended_runs(thread_id=thread_id)
        return [p for p in pending if p.expires_at > now]


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
