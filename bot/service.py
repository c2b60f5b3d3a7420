"""The approval service: what the team's other agents ask (``bot.clients``), as the
HTTP API (``bot.api``) and the MCP server (``bot.mcp_server``) both serve it.

An approval is a run of the client's peer agent, named after the client and the
caller's idempotency key (``approval_id``): however often a request is sent, and on
whichever replica, one run, one card. Its state is read from that run whenever asked
(``approval_of``): a decision is on record once claimed, so every replica answers
the same. A caller waiting for it (a long poll, an MCP call) is woken in the process
that saw the run end, and reads again every ``POLL`` seconds for one ended on another.

A decision is also POSTed to the request's ``callback_url``, signed with the client's
token, until the receiver takes it (``Callbacks``): at least once, across restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AnyHttpUrl,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictStr,
)

from agents import (
    Agent,
    RunNotFoundError,
    RunSnapshot,
    StoreConflict,
    ToolCallPart,
)

from . import texts
from .callbacks import PENDING, Callbacks, Owed
from .clients import Client, Clients, request_message, requested_call
from .following import Following
from .policy import parse_duration
from .presenter import Presenter
from .tasks import TaskTracker
from .types import Destination, Messenger, Notice, Person, ThreadKey, Undeliverable
from .views import run_metadata, thread_of

log = logging.getLogger(__name__)

POLL = 1.0
"""Seconds between two reads of a waited-for approval (for a decision another replica
saw: one seen here wakes the waiter at once)."""
MAX_WAIT = 60.0
"""The longest one long poll (or MCP wait, between progress notes) waits."""

Status = Literal["pending", "approved", "declined", "expired", "cancelled"]
_NAME = r"^[A-Za-z0-9_-]{1,40}$"
_DECIDED: dict[str, Status] = {
    "approve": "approved",
    "decline": "declined",
    "expire": "expired",
    "resume": "approved",
}


class ServiceError(Exception):
    """A request the service refuses: ``status`` is the HTTP status it answers with,
    ``field`` the request's field at fault (for a 400)."""

    def __init__(self, status: int, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


def _duration(value: Any) -> timedelta | None:
    return None if value is None else parse_duration(value)


class ApprovalRequest(BaseModel):
    """``POST /v1/approvals``: the call a client asks its team to approve."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: Annotated[StrictStr, Field(pattern=_NAME)]
    args: dict[str, Any] = Field(default_factory=dict)
    summary: Annotated[StrictStr, Field(min_length=1, max_length=2000)] | None = None
    requested_by: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9._:@-]{1,64}$")] | None = None
    """The person the client works for (a platform user id): named on the card, and not
    their own approver unless the policy allows it."""
    channel: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9:@._-]{1,100}$")] | None = None
    thread: Annotated[StrictStr, Field(pattern=r"^[0-9.]{1,40}$")] | None = None
    """A thread of ``channel`` to ask in (Slack: its ``thread_ts``); else a new one."""
    expires_in: Annotated[timedelta | None, BeforeValidator(_duration)] = None
    callback_url: AnyHttpUrl | None = None


class Approval(BaseModel):
    """An approval as its client reads it (``GET /v1/approvals/{id}``)."""

    id: str
    status: Status
    tool: str
    args: dict[str, Any]
    """What was approved (edits included); while pending, what was asked."""
    requested_args: dict[str, Any]
    decided_by: str | None = None
    reason: str | None = None
    decided_at: datetime | None = None
    expires_at: datetime | None = None
    url: str


def approval_id(client: Client, key: str) -> str:
    """The id of the approval ``client`` asks for under idempotency ``key``."""
    digest = hashlib.sha256(f"{client.name}\0{key}".encode()).hexdigest()[:32]
    return f"appr_{digest}"


def approval_of(snap: RunSnapshot, client: Client) -> Approval:
    """An approval as its run says: pending until a decision is claimed (or the run
    stopped: cancelled)."""
    call = _call_of(snap)
    tool = call.tool_name if call else ""
    asked = dict(call.args) if call else {}
    found = Approval(
        id=snap.run_id,
        status="pending",
        tool=tool,
        args=asked,
        requested_args=asked,
        url=f"/v1/approvals/{snap.run_id}",
    )
    pending = next((p for p in snap.pending if call and p.tool_call_id == call.tool_call_id), None)
    if pending is not None:
        found.expires_at = pending.expires_at
    decision = snap.decisions.get(call.tool_call_id) if call else None
    if decision is not None:
        status = _DECIDED[decision.action]
        return found.model_copy(
            update={
                "status": status,
                "args": decision.args if decision.args is not None else asked,
                "decided_by": decision.decided_by,
                "reason": decision.reason,
                "decided_at": decision.decided_at,
            }
        )
    if snap.stop is not None:
        return found.model_copy(
            update={"status": "cancelled", "decided_by": snap.stop.by, "decided_at": snap.stop.at}
        )
    if call is not None and pending is None and call.tool_call_id in snap_results(snap):
        # Approved without a card: a grant standing for calls like it.
        return found.model_copy(update={"status": "approved", "decided_at": snap.updated_at})
    return found


def snap_results(snap: RunSnapshot) -> set[str]:
    """The calls of a run that have a result."""
    done = {r.tool_call_id for r in snap.tool_results} | set(snap.results)
    for message in snap.messages:
        done |= {p.tool_call_id for p in message.parts if p.kind == "tool-result"}
    return done


def _call_of(snap: RunSnapshot) -> ToolCallPart | None:
    """The call a client's run asks about: its request (the last in its messages: the
    thread's history comes first)."""
    for message in reversed(snap.messages):
        if message.role == "user":
            call = requested_call(message)
            if call is not None:
                return call
    return None


class ApprovalService:
    """Approvals and notes of the team's other agents, for the API and the MCP server.

    Args:
        agent: The bot's agent, whose peers the clients are (``Clients.peers``).
        clients: Who may ask, by token.
        presenter: How cards and notes reach the chat.
        tasks: Where each request's run is driven (in the background).
        callbacks: The signed decisions owed to callback URLs.
        following: A thread a request starts is followed (a reply there is for the bot).
    """

    def __init__(
        self,
        *,
        agent: Agent,
        clients: Clients,
        presenter: Presenter,
        tasks: TaskTracker,
        callbacks: Callbacks,
        following: Following,
    ) -> None:
        self.clients = clients
        self._agent = agent
        self._presenter = presenter
        self._tasks = tasks
        self.callbacks = callbacks
        self._following = following
        self._places: dict[tuple[str, str, str | None], ThreadKey] = {}
        self._ended: dict[str, tuple[asyncio.Event, int]] = {}
        """Approvals waited for here: woken when their run ends (and how many wait)."""
        presenter.ended.append(self._run_ended)
        callbacks.lookup = self._owed
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
                raise ServiceError(503, f"the chat platform cannot be reached: {exc}") from exc
            except LookupError as exc:
                raise ServiceError(400, str(exc), field="channel") from exc
            if place is not None:
                self._places[key] = place
                return place
        raise ServiceError(
            400, f"the bot cannot post in channel {channel} (is it invited?)", field="channel"
        )

    async def _thread(
        self, client: Client, request: ApprovalRequest, header: Notice
    ) -> tuple[ThreadKey, Messenger]:
        """The thread a request is asked in, ``header`` posted first: the thread it
        names, else a new one in its channel, started by ``header``."""
        channel = request.channel or client.channel
        if channel is None:
            raise ServiceError(
                400, "no channel: give one, or a default for the client", field="channel"
            )
        near = await self._channel(client, channel)
        messenger = self._presenter.messenger(near.platform)
        if request.thread is not None:
            thread = replace(near, root=request.thread)
            await self._presenter.say(messenger, thread, header)
            return thread, messenger
        try:
            posted = await messenger.post_elsewhere(near, Destination(channel=channel), header)
        except Undeliverable as exc:
            raise ServiceError(503, f"the chat platform cannot be reached: {exc}") from exc
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

    # -- approvals -----------------------------------------------------------------

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
        run_id = approval_id(client, key or uuid.uuid4().hex)
        known = await self._load(client, run_id)
        if known is not None:
            return approval_of(known, client), False
        header = Notice(
            text=self._asks(client, request),
            also=(Person(id=request.requested_by),) if request.requested_by else (),
        )
        thread, messenger = await self._thread(client, request, header)
        metadata = run_metadata(thread)
        if request.callback_url is not None:
            metadata["callback"] = str(request.callback_url)
        try:
            stream = await self._agent.stream(
                request_message(request.tool, request.args, call_id=f"call_{run_id}"),
                thread_id=thread.id,
                resource_id=request.requested_by,
                metadata=metadata,
                run_id=run_id,
                peer=client.name,
                expires_in=request.expires_in,
            )
        except StoreConflict:  # the same key, sent twice at once: one of them asks
            snap = await self._agent.get_run(run_id)
            return approval_of(snap, client), False
        if request.callback_url is not None:
            await self.callbacks.expect(run_id)
        self._tasks.spawn(
            self._presenter.consume(thread, messenger, stream, requester=request.requested_by),
            name=f"client request {run_id}",
        )
        snap = await self._agent.get_run(run_id)
        return approval_of(snap, client), True

    async def state(self, client: Client, approval: str) -> Approval:
        """An approval of ``client`` as it stands (404: none by that id)."""
        snap = await self._load(client, approval)
        if snap is None:
            raise ServiceError(404, f"no approval {approval}")
        return approval_of(snap, client)

    async def wait(
        self,
        client: Client,
        approval: str,
        seconds: float,
        progress: Callable[[Approval], Awaitable[None]] | None = None,
    ) -> Approval:
        """The approval once decided, or as it stands after ``seconds``.

        ``progress`` is called with the approval every ``POLL`` seconds while it waits
        (an MCP call's progress notifications)."""
        deadline = time.monotonic() + max(0.0, seconds)
        event, waiting = self._ended.get(approval, (asyncio.Event(), 0))
        self._ended[approval] = (event, waiting + 1)
        try:
            while True:
                found = await self.state(client, approval)
                left = deadline - time.monotonic()
                if found.status != "pending" or left <= 0 or self.closing:
                    return found
                if progress is not None:
                    await progress(found)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), min(POLL, left))
        finally:
            event, waiting = self._ended.pop(approval, (event, 1))
            if waiting > 1:
                self._ended[approval] = (event, waiting - 1)

    def close(self) -> None:
        """Answer every wait now (``closing``): a shutdown must not wait for decisions."""
        self.closing = True
        for event, _ in self._ended.values():
            event.set()

    async def cancel(self, client: Client, approval: str) -> Approval:
        """Withdraw a pending approval: its card says so, its run ends (an approval
        decided already stays as it was: the answer says which)."""
        snap = await self._load(client, approval)
        if snap is None:
            raise ServiceError(404, f"no approval {approval}")
        if approval_of(snap, client).status != "pending":
            return approval_of(snap, client)
        stopped = await self._agent.stop_run(approval, stopped_by=f"client:{client.name}")
        thread = thread_of(snap.metadata)
        if stopped is not None and thread is not None:
            messenger = self._presenter.messenger(thread.platform)
            for call in stopped.dropped:
                await self._presenter.close_card(messenger, thread, call, "stopped")
            tool = stopped.dropped[0].tool_name if stopped.dropped else ""
            said = texts.CLIENT_WITHDREW.format(
                client=client.name, tool=tool.removeprefix(client.tool_name(""))
            )
            await self._presenter.say(messenger, thread, Notice(text=said))
        self._run_ended(approval)
        return await self.state(client, approval)

    async def notify(self, client: Client, text: str, channel: str | None = None) -> None:
        """Say ``text`` in the client's channel (or ``channel``), as a new message."""
        where = channel or client.channel
        if where is None:
            raise ServiceError(400, "no channel: give one, or a default for the client")
        near = await self._channel(client, where)
        messenger = self._presenter.messenger(near.platform)
        note = Notice(text=texts.CLIENT_SAYS.format(client=client.name, text=text))
        try:
            await messenger.post_elsewhere(near, Destination(channel=where), note)
        except Undeliverable as exc:
            raise ServiceError(503, f"the chat platform cannot be reached: {exc}") from exc

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
        found = approval_of(snap, client)
        if found.status == "pending":
            return PENDING
        return Owed(url=url, token=client.token, body=found.model_dump_json().encode())

    def _run_ended(self, run_id: str) -> None:
        """A client's run (or any top run) ended here: wake its waiters, send its callback."""
        waited = self._ended.get(run_id)
        if waited is not None:
            waited[0].set()
        if run_id.startswith("appr_"):
            self._tasks.spawn(self.callbacks.deliver(run_id), name=f"callback {run_id}")
