"""The chat core's shared machinery: wiring, streams into views, and how it speaks.

``ChatBot`` (``core.py``) adds messages and clicks on top, ``Housekeeping``
(``housekeeping.py``) the expiry sweep and crash recovery.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from cachetools import LRUCache

from agents import (
    Agent,
    AgentStream,
    ErrorChunk,
    FinishChunk,
    PendingInfo,
    Store,
    TextDeltaChunk,
    ToolCallApprovalChunk,
    ToolCallSuspendedChunk,
)

from . import messages
from .chat_state import CardPlace, ChatState, open_chat_state
from .following import Following
from .metrics import Metrics
from .policy import ApprovalPolicy
from .tasks import KeyedLocks, TaskTracker
from .types import (
    ApprovalCard,
    CardStatus,
    MessageRef,
    Messenger,
    Notice,
    Person,
    Reply,
    ThreadKey,
    View,
)
from .views import ReplyBuffer, approval_card, prompt

log = logging.getLogger(__name__)

_NAME_CACHE_SIZE = 10_000


class CoreBase:
    """Holds the agent, policy, messengers and background work of one chat core."""

    def __init__(
        self,
        agent: Agent,
        *,
        policy: ApprovalPolicy | None = None,
        chat: ChatState | None = None,
        dedupe_ttl: float = 3600.0,
        interrupted_after: timedelta = timedelta(minutes=15),
    ) -> None:
        self.agent = agent
        self.interrupted_after = interrupted_after
        self.policy = policy or ApprovalPolicy()
        self._owns_chat = chat is None
        self.chat = chat if chat is not None else open_chat_state(self.store)
        self.following = Following(self.chat)
        self.dedupe_ttl = dedupe_ttl
        self.tasks = TaskTracker()
        self.metrics = Metrics(background_tasks=lambda: float(self.tasks.running))
        self._messengers: dict[str, Messenger] = {}
        self._locks = KeyedLocks()
        self._names: LRUCache[str, str] = LRUCache(maxsize=_NAME_CACHE_SIZE)
        self._sweeper: asyncio.Task[None] | None = None
        tools, delegations = _tool_names(agent)
        self.policy.check_tools(tools, sub_agents=delegations)
        # The policy's expiry is the runtime's: the sweep, clicks and replies agree.
        agent.set_expiry(self.policy.expires_in)

    @property
    def store(self) -> Store:
        """The agent's store (runs, thread history, audit)."""
        return self.agent.engine.store

    async def follows(self, thread: ThreadKey) -> bool:
        """Whether the bot takes part in ``thread``: replies there are for it."""
        return await self.following.follows(thread)

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
            place = CardPlace(thread=thread, ref=ref)
            await self.chat.set_card(info.run_id, info.tool_call_id, place)
        except Exception:
            log.exception("could not remember the card of %s/%s", info.run_id, info.tool_call_id)

    async def _card_place(self, run_id: str, tool_call_id: str) -> CardPlace | None:
        """Where a call's card was posted, if it was (a failing lookup is logged)."""
        try:
            return await self.chat.card_of(run_id, tool_call_id)
        except Exception:
            log.exception("could not find the card of %s/%s", run_id, tool_call_id)
            return None

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
        if self._owns_chat:
            await self.chat.close()

    # -- views ------------------------------------------------------------------

    def _card(
        self,
        info: PendingInfo,
        *,
        status: CardStatus = "pending",
        decided_by: tuple[str, ...] = (),
        reason: str | None = None,
        approvals: tuple[str, ...] = (),
    ) -> ApprovalCard:
        # Cards name people by what an adapter told us (ids stay in the snapshot,
        # the audit log and the policy).
        return approval_card(
            info,
            expires_at=info.expires_at,
            status=status,
            requester=self._who(info.requester) if info.requester else None,
            decided_by=tuple(self._who(user) for user in decided_by),
            reason=reason,
            approvals=tuple(self._who(user) for user in approvals),
            quorum=self.policy.quorum(info.tool_name),
        )

    # -- helpers ----------------------------------------------------------------

    async def _say(self, messenger: Messenger, thread: ThreadKey, view: View) -> MessageRef | None:
        # A platform hiccup must not stop the run that is being streamed.
        try:
            ref = await messenger.post(thread, view)
        except Exception:
            log.exception("posting a %s to %s failed", type(view).__name__, thread.id)
            return None
        await self.following.follow(thread)
        return ref

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
        if user_name:
            self._names[user_id] = user_name

    def _who(self, user_id: str) -> Person:
        """A person by id, with the name an adapter told us (in this process) if any."""
        return Person(id=user_id, name=self._names.get(user_id))

    def _notice_for(self, requester: str | None, text: str) -> Notice:
        """A notice for whoever asked (named by each platform its way), or for everyone."""
        if requester is None:
            return Notice(text=messages.NO_REQUESTER.format(text=text))
        return Notice(text=text, to=self._who(requester))


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


def _now() -> datetime:
    return datetime.now(UTC)
