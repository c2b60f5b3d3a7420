"""The approval service: what the team's other agents ask (``bot.clients``), as the
HTTP API (``bot.api``) and the MCP server (``bot.mcp_server``) both serve it.

An approval (or a question) is a run of the client's peer agent, named after the
client and the caller's idempotency key (``request_id``): however often a request is
sent, and on whichever replica, one run, one card. Its state is read from that run
whenever asked (``approval_of``): a decision is on record once claimed, so every
replica answers the same. A caller waiting for it (a long poll, an MCP call) is woken
in the process where the decision is claimed (``Presenter.settle``), and reads again
every ``POLL`` seconds for one decided on another.

A decision is also POSTed to the request's ``callback_url``, signed with the client's
token, until the receiver takes it (``Callbacks``): at least once, across restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Protocol, TypeVar

from agents import (
    Agent,
    PendingInfo,
    RunNotFoundError,
    RunSnapshot,
    StandingAsk,
    StoreConflict,
)
from agents.provenance import arriving

from . import texts
from .asks import (
    ANSWER_SCHEMA,
    APPROVAL,
    QUESTION_KIND,
    Approval,
    ApprovalRequest,
    Question,
    QuestionRequest,
    ServiceError,
    approval_of,
    call_id,
    check_answer_schema,
    pending_approval,
    pending_question,
    question_of,
    request_id,
)
from .callbacks import PENDING, Callbacks, Owed
from .chat_state import ChatState
from .clients import QUESTION, Client, Clients, client_via, request_message
from .following import Following
from .links import LinkFor, Links
from .people import MAX_DIRECT
from .presenter import Presenter
from .tasks import TaskTracker
from .types import (
    Destination,
    Messenger,
    Notice,
    NotReachedYet,
    Person,
    ThreadKey,
    Undeliverable,
)
from .views import run_metadata, thread_of

log = logging.getLogger(__name__)

POLL = 1.0
"""Seconds between two reads of a waited-for approval (for a decision another replica
saw: one seen here wakes the waiter at once)."""
MAX_WAIT = 60.0
"""The longest one long poll (or MCP wait, between progress notes) waits."""
MAX_TOOL_NAME = 64
"""The longest ``<client>__<tool>`` name (as an MCP tool's)."""


class _Waitable(Protocol):
    @property
    def status(self) -> str: ...


Waited = TypeVar("Waited", bound=_Waitable)


@dataclass(frozen=True, kw_only=True)
class Asked:
    """Where and how a client's request is asked: the thread's header, for whom, where,
    for how long at most, and where its decision is POSTed."""

    header: str
    requested_by: str | None = None
    channel: str | None = None
    thread: str | None = None
    expires_in: timedelta | None = None
    callback: str | None = None


class ApprovalService:
    """Approvals and notes of the team's other agents, for the API and the MCP server.

    Args:
        agent: The bot's agent, whose peers the clients are (``Clients.peers``).
        clients: Who may ask, by token.
        presenter: How cards and notes reach the chat.
        tasks: Where each request's run is driven (in the background).
        chat: Where the callbacks owed are kept (``Callbacks``).
        following: A thread a request starts is followed (a reply there is for the bot).
        links: Each approver's decision page, linked in a pending approval's answers.
    """

    def __init__(
        self,
        *,
        agent: Agent,
        clients: Clients,
        presenter: Presenter,
        tasks: TaskTracker,
        chat: ChatState,
        following: Following,
        links: Links,
    ) -> None:
        self.clients = clients
        self._links = links
        self._agent = agent
        self._presenter = presenter
        self._tasks = tasks
        self.callbacks = Callbacks(chat, self._owed)
        """The signed decisions owed to callback URLs."""
        self._following = following
        self._places: dict[tuple[str, str, str | None], ThreadKey] = {}
        self._ended: dict[str, tuple[asyncio.Event, int]] = {}
        """Requests waited for here: woken when decided or ended (and how many wait)."""
        presenter.on_settle.append(self._settled)
        self.closing = False
        """The process shuts down: waits answer as things stand (the caller asks again,
        of another replica or of this one restarted)."""

    # -- places --------------------------------------------------------------------

    async def check_places(self) -> list[tuple[str | None, str]]:
        """A problem per client whose channel the bot cannot post in (at start)."""
        problems: list[tuple[str | None, str]] = []
        for client in self.clients:
            if client.channel is None:
                continue
            try:
                await self._channel(client, client.channel)
            except ServiceError as exc:
                if isinstance(exc.__cause__, NotReachedYet):
                    log.warning("clients.%s.channel: %s", client.name, exc.message)
                    continue
                problems.append((f"clients.{client.name}.channel", exc.message))
        return problems

    async def _channel(self, client: Client, channel: str) -> ThreadKey:
        """Where a new conversation of ``client`` in ``channel`` starts (asked once)."""
        key = (client.name, channel, client.workspace)
        if key in self._places:
            return self._places[key]
        for messenger in self._presenter.messengers():
            try:
                place = await messenger.channel_place(channel, client.workspace)
            except Undeliverable as exc:
                raise _unreachable(exc) from exc
            except LookupError as exc:
                raise ServiceError(400, str(exc), field="channel") from exc
            if place is not None:
                self._places[key] = place
                return place
        raise ServiceError(
            400, f"the bot cannot post in channel {channel} (is it invited?)", field="channel"
        )

    async def _thread(
        self, client: Client, channel: str | None, root: str | None, header: Notice
    ) -> tuple[ThreadKey, Messenger]:
        """The thread a request is asked in, ``header`` posted first: ``root`` of its
        channel (the client's by default), else a new one there, started by ``header``."""
        channel = _channel_or_default(client, channel)
        near = await self._channel(client, channel)
        messenger = self._presenter.messenger(near.platform)
        if root is not None:
            thread = replace(near, channel=channel, root=root)
            await self._presenter.say(messenger, thread, header)
            return thread, messenger
        try:
            posted = await messenger.post_elsewhere(near, Destination(channel=channel), header)
        except Undeliverable as exc:
            raise _unreachable(exc) from exc
        except Exception as exc:  # the channel changed since (archived, the bot removed)
            log.warning("client %s: posting in %s failed: %s", client.name, channel, exc)
            self._places.pop((client.name, channel, client.workspace), None)
            posted = None
        if posted is None:
            raise ServiceError(400, f"cannot start a thread in {channel}", field="channel")
        await self._following.follow(posted.thread)
        return posted.thread, messenger

    @staticmethod
    def _asks(client: Client, request: ApprovalRequest) -> str:
        if request.summary:
            return texts.CLIENT_ASKS_WHY.format(
                client=client.name, tool=request.tool, summary=request.summary
            )
        return texts.CLIENT_ASKS.format(client=client.name, tool=request.tool)

    # -- approvals and questions ----------------------------------------------------

    async def request(
        self, client: Client, request: ApprovalRequest, key: str | None = None
    ) -> tuple[Approval, bool]:
        """Ask for an approval (once per ``key``); whether this call asked it.

        Raises:
            ServiceError: 403 for a tool the client may not ask about; 400 for a
                channel the bot cannot post in; 503 when the chat cannot be reached
                (nothing is asked: send it again, with the same key).
        """
        if not client.may_ask(request.tool):
            raise ServiceError(
                403, f"client {client.name} may not ask about {request.tool}", field="tool"
            )
        if len(client.tool_name(request.tool)) > MAX_TOOL_NAME:
            raise ServiceError(
                400, f"longer than {MAX_TOOL_NAME} with the client's name", field="tool"
            )
        run_id = request_id(client, key or uuid.uuid4().hex)
        started = await self._start(
            client,
            run_id,
            request_message(request.tool, request.args, call_id=call_id(run_id)),
            Asked(
                header=self._asks(client, request),
                requested_by=request.requested_by,
                channel=request.channel,
                thread=request.thread,
                expires_in=request.expires_in,
                callback=str(request.callback_url) if request.callback_url else None,
            ),
        )
        if isinstance(started, RunSnapshot):
            return await self._linked(client, started), False
        found = pending_approval(run_id, request.tool, request.args)
        asked = _as_asked(client, found, started.id, request.requested_by)
        return await self._with_links(found, started, asked), True

    async def ask(
        self, client: Client, request: QuestionRequest, key: str | None = None
    ) -> tuple[Question, bool]:
        """Ask a question in a thread (once per ``key``); whether this call asked it.

        Raises:
            ServiceError: 400 for a schema no form can ask (or one that is no JSON
                schema), or a channel the bot cannot post in; 503 as ``request``.
        """
        schema = request.schema_ or ANSWER_SCHEMA
        check_answer_schema(schema)
        run_id = request_id(client, key or uuid.uuid4().hex, QUESTION_KIND)
        args = {"question": request.question, "schema": schema}
        started = await self._start(
            client,
            run_id,
            request_message(QUESTION, args, call_id=call_id(run_id)),
            Asked(
                header=texts.CLIENT_ASKS_QUESTION.format(client=client.name),
                requested_by=request.requested_by,
                channel=request.channel,
                thread=request.thread,
                expires_in=request.expires_in,
            ),
        )
        if isinstance(started, RunSnapshot):
            return question_of(started), False
        return pending_question(run_id, request.question), True

    async def _start(
        self, client: Client, run_id: str, message: str, asked: Asked
    ) -> RunSnapshot | ThreadKey:
        """The run ``run_id`` of ``client`` as it was started before, or the thread
        this call started it in now (driven in the background)."""
        known = await self._load(client, run_id)
        if known is not None:
            return known
        header = Notice(
            text=asked.header,
            also=(Person(id=asked.requested_by),) if asked.requested_by else (),
        )
        thread, messenger = await self._thread(client, asked.channel, asked.thread, header)
        metadata = run_metadata(thread)
        if asked.callback is not None:
            metadata["callback"] = asked.callback
        with arriving(client_via(client.name)):
            try:
                stream = await self._agent.stream(
                    message,
                    thread_id=thread.id,
                    resource_id=asked.requested_by,
                    metadata=metadata,
                    run_id=run_id,
                    peer=client.name,
                    expires_in=asked.expires_in,
                )
            except StoreConflict:  # the same key, sent twice at once: one of them asks
                return await self._agent.get_run(run_id)
            if asked.callback is not None:
                await self.callbacks.expect(run_id)
            self._tasks.spawn(
                self._presenter.consume(thread, messenger, stream, requester=asked.requested_by),
                name=f"client request {run_id}",
            )
        return thread

    async def state(self, client: Client, approval: str) -> Approval:
        """An approval of ``client`` as it stands, with its approvers' links while it
        waits (404: none by that id)."""
        return await self._linked(client, await self._approval(client, approval))

    async def _linked(self, client: Client, snap: RunSnapshot) -> Approval:
        """The approval ``snap`` is, with its approvers' links while it waits."""
        found = approval_of(snap)
        thread = thread_of(snap.metadata)
        if thread is None:
            return found
        waiting = next((c for c in snap.pending if c.state == "pending"), None)
        asked: PendingInfo | StandingAsk = (
            PendingInfo.of(snap.run_id, waiting)
            if waiting is not None
            else _as_asked(client, found, snap.thread_id, snap.resource_id)  # not asked yet
        )
        return await self._with_links(found, thread, asked)

    async def _with_links(
        self, found: Approval, thread: ThreadKey, call: PendingInfo | StandingAsk
    ) -> Approval:
        """``found`` with, while it waits, each approver's decision page (none when
        anyone may decide: a link is one person's)."""
        if found.status != "pending":
            return found
        people = self._presenter.people
        approvers = people.approvers(call, await people.deciders(thread, call))[:MAX_DIRECT]
        asked = call_id(found.id)
        links = {
            user: await self._links.url(LinkFor(run_id=found.id, tool_call_id=asked, user_id=user))
            for user in approvers
        }
        return found.model_copy(update={"links": links})

    async def question(self, client: Client, question: str) -> Question:
        """A question of ``client`` as it stands (404: none by that id)."""
        snap = await self._load(client, question)
        if snap is None or not question.startswith(f"{QUESTION_KIND}_"):
            raise ServiceError(404, f"no question {question}")
        return question_of(snap)

    async def wait(
        self,
        client: Client,
        approval: str,
        seconds: float,
        progress: Callable[[], Awaitable[None]] | None = None,
    ) -> Approval:
        """The approval once decided, or as it stands after ``seconds``.

        ``progress`` is called every ``POLL`` seconds while it waits (an MCP call's
        progress notifications)."""
        last: list[RunSnapshot] = []

        async def read() -> Approval:
            last[:] = [await self._approval(client, approval)]
            return approval_of(last[0])

        found = await self._wait(read, approval, seconds, progress)
        # The approvers' links only on the answer (of the run as last read), not on every
        # read while it waits.
        return await self._linked(client, last[0]) if found.status == "pending" else found

    async def wait_answer(
        self,
        client: Client,
        question: str,
        seconds: float,
        progress: Callable[[], Awaitable[None]] | None = None,
    ) -> Question:
        """The question once answered (or declined...), or as it stands after ``seconds``."""
        return await self._wait(
            lambda: self.question(client, question), question, seconds, progress
        )

    async def _wait(
        self,
        read: Callable[[], Awaitable[Waited]],
        run_id: str,
        seconds: float,
        progress: Callable[[], Awaitable[None]] | None,
    ) -> Waited:
        deadline = time.monotonic() + max(0.0, seconds)
        event, waiting = self._ended.get(run_id, (asyncio.Event(), 0))
        self._ended[run_id] = (event, waiting + 1)
        try:
            while True:
                found = await read()
                left = deadline - time.monotonic()
                if found.status != "pending" or left <= 0 or self.closing:
                    return found
                if progress is not None:
                    await progress()
                if event.is_set():  # woken here before, and still pending: read each POLL
                    await asyncio.sleep(min(POLL, left))
                    continue
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(POLL, left)):
                        await event.wait()
        finally:
            event, waiting = self._ended.pop(run_id, (event, 1))
            if waiting > 1:
                self._ended[run_id] = (event, waiting - 1)

    def waiting(self, run_id: str) -> int:
        """How many waits for ``run_id`` are under way in this process."""
        found = self._ended.get(run_id)
        return found[1] if found is not None else 0

    def close(self) -> None:
        """Answer every wait now (``closing``): a shutdown must not wait for decisions."""
        self.closing = True
        for event, _ in self._ended.values():
            event.set()

    async def cancel(self, client: Client, approval: str) -> Approval:
        """Withdraw a pending approval: its card says so, its run ends (an approval
        decided already stays as it was: the answer says which)."""
        snap = await self._approval(client, approval)
        current = approval_of(snap)
        if current.status != "pending":
            return current
        with arriving(client_via(client.name)):
            stopped = await self._agent.stop_run(approval, stopped_by=client_via(client.name))
        thread = thread_of(snap.metadata)
        if stopped is not None and thread is not None:
            messenger = self._presenter.messenger(thread.platform)
            for call in stopped.dropped:
                await self._presenter.close_card(messenger, thread, call, "stopped")
            said = texts.CLIENT_WITHDREW.format(client=client.name, tool=current.tool)
            await self._presenter.say(messenger, thread, Notice(text=said))
        self._settled(approval)
        return await self.state(client, approval)

    async def notify(self, client: Client, text: str, channel: str | None = None) -> None:
        """Say ``text`` in the client's channel (or ``channel``), as a new message."""
        where = _channel_or_default(client, channel)
        near = await self._channel(client, where)
        messenger = self._presenter.messenger(near.platform)
        note = Notice(text=texts.CLIENT_SAYS.format(client=client.name, text=text))
        try:
            await messenger.post_elsewhere(near, Destination(channel=where), note)
        except Undeliverable as exc:
            raise _unreachable(exc) from exc

    async def _approval(self, client: Client, approval: str) -> RunSnapshot:
        """The run of ``client``'s approval (404: none by that id)."""
        snap = await self._load(client, approval)
        if snap is None or not approval.startswith(f"{APPROVAL}_"):
            raise ServiceError(404, f"no approval {approval}")
        return snap

    async def _load(self, client: Client, approval: str) -> RunSnapshot | None:
        """The run of ``client``'s approval, if it is one (another's is none of its)."""
        try:
            snap = await self._agent.get_run(approval)
        except RunNotFoundError:
            return None
        return snap if snap.agent_path[:1] == [client.name] else None

    async def _owed(self, approval: str) -> Owed | str | None:
        """What ``approval``'s callback is now (``Callbacks.lookup``)."""
        try:
            snap = await self._agent.get_run(approval)
        except RunNotFoundError:
            return None
        url = snap.metadata.get("callback")
        client = self.clients.get(snap.agent_path[0])
        if not isinstance(url, str) or client is None:
            return None
        found = approval_of(snap)
        if found.status == "pending":
            return PENDING
        return Owed(url=url, token=client.token, body=found.model_dump_json().encode())

    def _settled(self, run_id: str) -> None:
        """A client's run (or any top run) was decided or ended here: wake its waiters,
        send its callback."""
        waited = self._ended.get(run_id)
        if waited is not None:
            waited[0].set()
        if run_id.startswith(f"{APPROVAL}_"):
            self._tasks.spawn(self.callbacks.deliver(run_id), name=f"callback {run_id}")


def _channel_or_default(client: Client, channel: str | None) -> str:
    """``channel``, else the client's default (a 400 naming the field: neither)."""
    found = channel or client.channel
    if found is None:
        raise ServiceError(
            400, "no channel: give one, or a default for the client", field="channel"
        )
    return found


def _unreachable(exc: Undeliverable) -> ServiceError:
    """The 503 of a chat platform that did not answer (send it again)."""
    return ServiceError(503, f"the chat platform cannot be reached: {exc}")


def _as_asked(
    client: Client, found: Approval, thread_id: str | None, requester: str | None
) -> StandingAsk:
    """A client's request not asked yet, as the policy will see it once it is."""
    return StandingAsk(
        thread_id=thread_id,
        requester=requester,
        tool_name=client.tool_name(found.tool),
        args=found.requested_args,
        agent_path=(client.name,),
    )
