"""A local fake of the Bot Connector service: records what the bot sends to Teams.

Serves ``POST /v3/conversations/{id}/activities[/{reply_to}]`` (answering with
a new activity id) and ``PUT /v3/conversations/{id}/activities/{activity_id}``,
the calls botbuilder's ``ConnectorClient`` makes for sends and updates,
``POST /v3/conversations`` (a new conversation: in a channel, a post whose
first activity is the one the parameters carry; else the 1:1 chat with the one
member, the same one each time, as Teams answers), and ``GET
/v3/conversations/{id}/members/{user}`` (a member by Teams or Entra object id,
from ``members``; 404 for anyone else).

Streaming requests (activities with a ``streaminfo`` entity) are checked against
Teams' documented rules ("Stream bot messages") and refused as Teams refuses
them; ``streams`` keeps each stream with every request it accepted, ``refused``
every request it turned down and why.

Teams' limits on demand: ``fail_next`` answers the next writes (``POST``/``PUT``)
with 429 and ``Retry-After``, a 5xx, or no answer in time, as Teams does when it
throttles or has a bad moment; ``attempts`` records every write that arrived,
answered or not, with when it arrived.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from . import activities as act

STREAM_LIMIT_SECONDS = 120.0
"""Teams ends a stream two minutes after its first request."""
INFORMATIVE_LIMIT = 1000
MESSAGE_LIMIT_BYTES = 28_000
"""Teams refuses a message (and a streamed one) above about 28 KB."""


@dataclass(frozen=True)
class ConnectorCall:
    """One recorded request to the connector."""

    method: str
    conversation_id: str
    activity_id: str | None
    body: dict[str, Any]
    authorization: str | None
    response_id: str
    """The activity id the connector answered with (a new id for a POST)."""

    @property
    def is_message(self) -> bool:
        return self.body.get("type") == "message"

    @property
    def card(self) -> dict[str, Any] | None:
        """The Adaptive Card this message carries, if any."""
        for attachment in self.body.get("attachments") or []:
            if attachment.get("contentType") == "application/vnd.microsoft.card.adaptive":
                content: dict[str, Any] = attachment["content"]
                return content
        return None

    @property
    def card_text(self) -> str:
        """Every TextBlock and fact of its card, one a line ("" without a card)."""
        parts: list[str] = []
        for element in (self.card or {}).get("body") or []:
            if element["type"] == "TextBlock":
                parts.append(element["text"])
            elif element["type"] == "FactSet":
                parts.extend(f"{f['title']}: {f['value']}" for f in element["facts"])
        return "\n".join(parts)

    @property
    def card_kind(self) -> str | None:
        """The ``kind`` its card's actions (or its refresh) carry ("approval", "question")."""
        card = self.card or {}
        refresh = (card.get("refresh") or {}).get("action")
        for action in [*(card.get("actions") or []), *([refresh] if refresh else [])]:
            kind = (action.get("data") or {}).get("kind")
            if isinstance(kind, str):
                return kind
        return None

    @property
    def text(self) -> str:
        return str(self.body.get("text") or "")

    @property
    def offers_feedback(self) -> bool:
        """Whether Teams shows its 👍 / 👎 under this message (``channelData``)."""
        return (self.body.get("channelData") or {}).get("feedbackLoopEnabled") is True

    @property
    def stream_info(self) -> dict[str, Any] | None:
        """Its ``streaminfo`` entity, on a streaming request."""
        for entity in self.body.get("entities") or []:
            if entity.get("type") == "streaminfo":
                info: dict[str, Any] = entity
                return info
        return None

    @property
    def stream_type(self) -> str | None:
        """``informative``, ``streaming`` (the default) or ``final``, on a streaming request."""
        info = self.stream_info
        return None if info is None else str(info.get("streamType") or "streaming")

    @property
    def mentions(self) -> list[dict[str, Any]]:
        """The @mention entities: of the message when it has text (a card under it holds
        only buttons), else of its card (``msteams.entities``); each one's ``<at>`` text is
        checked to be in the text it belongs to."""
        if self.card is not None and not self.text:
            entities = (self.card.get("msteams") or {}).get("entities") or []
            shown = self.card_text
        else:
            entities = self.body.get("entities") or []
            shown = self.text
        found = [e for e in entities if e.get("type") == "mention"]
        for entity in found:
            assert entity["text"] in shown, (entity, shown)
        return found


@dataclass(frozen=True)
class Created:
    """One recorded ``POST /v3/conversations``: the parameters, and the ids answered."""

    parameters: dict[str, Any]
    conversation_id: str
    activity_id: str | None
    authorization: str | None

    @property
    def channel(self) -> str | None:
        """The channel a new post was asked for (``channelData.channel.id``)."""
        channel = (self.parameters.get("channelData") or {}).get("channel") or {}
        return channel.get("id")

    @property
    def members(self) -> list[str]:
        return [m.get("id") for m in self.parameters.get("members") or []]


@dataclass
class Stream:
    """One streamed message: every request Teams accepted for it, in order."""

    conversation_id: str
    stream_id: str
    started: float
    requests: list[ConnectorCall] = field(default_factory=list)
    answered: float = 0.0
    """When the last request was answered (Teams counts its rate from requests)."""
    replaced: bool = False
    """Its message was replaced by a plain one (``PUT``): the stream is over."""

    @property
    def sequence(self) -> int:
        numbers = [r.stream_info.get("streamSequence") for r in self.requests if r.stream_info]
        return max((n for n in numbers if isinstance(n, int)), default=0)

    @property
    def final(self) -> ConnectorCall | None:
        return next((r for r in self.requests if r.stream_type == "final"), None)

    @property
    def streamed(self) -> list[str]:
        """The text of each ``streaming`` update, in order."""
        return [r.text for r in self.requests if r.stream_type == "streaming"]

    @property
    def informative(self) -> list[str]:
        return [r.text for r in self.requests if r.stream_type == "informative"]


@dataclass(frozen=True)
class Attempt:
    """One write that reached the connector (``POST``/``PUT``), answered or not."""

    method: str
    conversation_id: str
    at: float
    """When it arrived (``time.monotonic()``, the bot's clock too)."""
    status: int
    retry_after: float | None = None
    """Seconds the connector asked the bot to wait (``Retry-After``), with a 429."""
    text: str = ""


@dataclass(frozen=True)
class Failure:
    """How the connector answers one write it is told to fail (``fail_next``)."""

    status: int
    retry_after: str | None = None
    delay: float = 0.0
    """Seconds before it answers (longer than the bot waits: a time-out)."""


@dataclass(frozen=True)
class Refusal:
    """A request the connector turned down, and the error it answered with."""

    status: int
    code: str
    message: str
    body: dict[str, Any]


class FakeConnector:
    """The fake connector server; ``url`` is the ``serviceUrl`` to put in activities."""

    def __init__(self) -> None:
        self.calls: list[ConnectorCall] = []
        self.created: list[Created] = []
        self.refuse_members: set[str] = set()
        """Members a 1:1 chat cannot be created with (the bot is not installed for them):
        the connector answers 403, as Teams does."""
        self.members: dict[str, list[dict[str, Any]]] = {}
        """Each conversation's members (by its id without ``;messageid=``); one not
        listed has the test people (Alice, Bob, Carol)."""
        self.lookups: list[tuple[str, str]] = []
        """Every member lookup: (conversation, user)."""
        self.lookup_status: int | None = None
        """Answer member lookups with this error status (the roster cannot be read)."""
        self.streams: list[Stream] = []
        self.refused: list[Refusal] = []
        self.stream_gap = 1.0
        """The least time (seconds) between two requests of a stream: Teams allows one a
        second. Tests pace the bot faster and lower this with it."""
        self.refuse_streaming = False
        """Answer every new stream 403 "Content stream is not allowed" (the feature is
        off for this bot or user)."""
        self.stop_after: int | None = None
        """After this many requests of a stream, its user presses Stop: later requests get
        403 "Content stream was cancelled by user" (and so does replacing it)."""
        self.time_out_after: int | None = None
        """After this many requests of a stream, its two minutes are over early: later
        requests get 403 "Content stream finished due to exceeded streaming time"."""
        self.attempts: list[Attempt] = []
        """Every write that arrived, in order, with how it was answered."""
        self._failures: deque[Failure] = deque()
        self.url = ""
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None

    async def start(self) -> FakeConnector:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/"
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def fail_next(
        self, status: int, *, retry_after: str | None = None, times: int = 1, delay: float = 0.0
    ) -> None:
        """Answer the next ``times`` writes (after those already told to fail) with
        ``status`` (and ``Retry-After``), ``delay`` seconds after they arrive; none of
        them is kept."""
        self._failures.extend([Failure(status, retry_after, delay)] * times)

    def attempts_in(self, conversation_id: str) -> list[Attempt]:
        """The writes that arrived for one conversation (``POST /v3/conversations``: its
        own entry, ``""``), in order."""
        return [a for a in self.attempts if a.conversation_id == conversation_id]

    async def _handle(self, request: web.Request) -> web.Response:
        # request.path is percent-decoded: conversation ids keep their ':' ';' '@'.
        parts = request.path.strip("/").split("/")
        if request.method in ("POST", "PUT"):
            failed = await self._failed(request, parts)
            if failed is not None:
                return failed
        if parts == ["v3", "conversations"] and request.method == "POST":
            return await self._create(request)
        if len(parts) == 5 and parts[3] == "members" and request.method == "GET":
            return self._member(parts[2], parts[4])
        if len(parts) not in (4, 5) or parts[:2] != ["v3", "conversations"]:
            return web.json_response({"error": "unknown path"}, status=404)
        if parts[3] != "activities" or request.method not in ("POST", "PUT"):
            return web.json_response({"error": "unknown path"}, status=404)
        activity_id = parts[4] if len(parts) == 5 else None
        if request.method == "PUT" and activity_id is None:
            return web.json_response({"error": "PUT needs an activity id"}, status=400)
        body: dict[str, Any] = await request.json()
        if request.method == "PUT" and activity_id is not None:
            stream = self._stream_of(parts[2], activity_id)
            if stream is not None and self._stopped(stream):
                return self._refuse(403, "Content stream was cancelled by user.", body)
            if stream is not None:
                stream.replaced = True
        response_id = activity_id if activity_id and request.method == "PUT" else None
        call = ConnectorCall(
            method=request.method,
            conversation_id=parts[2],
            activity_id=activity_id,
            body=body,
            authorization=request.headers.get("Authorization"),
            response_id=response_id or f"act-{next(self._ids)}",
        )
        if call.stream_info is not None and request.method == "POST":
            return self._streaming(call)
        if len(json.dumps(body).encode()) > MESSAGE_LIMIT_BYTES + 2_000:
            # The text's own limit and the activity around it: Teams answers 413.
            error = {"code": "MessageSizeTooBig", "message": "Message size too large"}
            self.refused.append(Refusal(413, error["code"], error["message"], body))
            return web.json_response({"error": error}, status=413)
        self.calls.append(call)
        return web.json_response({"id": call.response_id})

    async def _failed(self, request: web.Request, parts: list[str]) -> web.Response | None:
        """The scripted failure for this write, if one is due (every write is recorded)."""
        arrived = time.monotonic()
        body = await request.json() if request.can_read_body else {}
        conversation = parts[2] if len(parts) > 2 else ""
        text = str(body.get("text") or "") if isinstance(body, dict) else ""
        if not self._failures:
            self.attempts.append(Attempt(request.method, conversation, arrived, 200, text=text))
            return None
        failure = self._failures.popleft()
        wait = float(failure.retry_after) if failure.retry_after is not None else None
        self.attempts.append(
            Attempt(request.method, conversation, arrived, failure.status, wait, text)
        )
        if failure.delay:
            await asyncio.sleep(failure.delay)
        headers = {"Retry-After": failure.retry_after} if failure.retry_after is not None else {}
        code = {429: "Throttled"}.get(failure.status, "ServiceError")
        error = {"error": {"code": code, "message": f"scripted {failure.status}"}}
        return web.json_response(error, status=failure.status, headers=headers)

    # -- streaming, as Teams checks it -------------------------------------------

    def _streaming(self, call: ConnectorCall) -> web.Response:
        info = call.stream_info or {}
        kind = call.stream_type
        stream_id = info.get("streamId")
        if kind not in ("informative", "streaming", "final"):
            return self._refuse(400, f"unknown streamType {kind!r}", call.body)
        if stream_id is None:
            return self._start(call, info)
        stream = self._stream_of(call.conversation_id, str(stream_id))
        if stream is None:
            return self._refuse(400, f"no stream {stream_id!r} in this chat", call.body)
        if stream.final is not None:
            return self._refuse(
                403,
                "Content stream is not allowed on an already completed streamed message",
                call.body,
            )
        now = time.monotonic()
        if self._timed_out(stream, now):
            return self._refuse(
                403, "Content stream finished due to exceeded streaming time.", call.body
            )
        if self._stopped(stream):
            return self._refuse(403, "Content stream was cancelled by user.", call.body)
        if now - stream.answered < self.stream_gap:
            return self._refuse(429, "API calls quota exceeded", call.body)
        if not call.text:
            return self._refuse(400, "Streaming activities should include text", call.body)
        if len(call.text.encode()) > MESSAGE_LIMIT_BYTES:
            return self._refuse(403, "Message size too large", call.body)
        if kind == "final":
            if call.body.get("type") != "message":
                return self._refuse(400, "the final streaming activity is a message", call.body)
            if "streamSequence" in info:
                return self._refuse(400, "the final message has no streamSequence", call.body)
        else:
            if call.body.get("type") != "typing":
                return self._refuse(400, "streaming activities are typing activities", call.body)
            sequence = info.get("streamSequence")
            if not isinstance(sequence, int) or sequence <= stream.sequence:
                # Teams drops it and answers 202 with ContentStreamSequenceOrderPreConditionFailed.
                self.refused.append(
                    Refusal(202, "ContentStreamSequenceOrderPreConditionFailed", "", call.body)
                )
                return web.json_response({}, status=202)
            shown = stream.streamed
            if kind == "informative" and shown:
                # Informative updates come before the response text (the SDKs never send one
                # after): the fake refuses what Teams would show out of order.
                return self._refuse(400, "informative update after streaming began", call.body)
            if kind == "informative" and len(call.text) > INFORMATIVE_LIMIT:
                return self._refuse(400, "informative message above 1000 characters", call.body)
            if kind == "streaming" and shown and not call.text.startswith(shown[-1]):
                return self._refuse(400, "streamed text must include the previous text", call.body)
        stream.requests.append(call)
        stream.answered = time.monotonic()
        self.calls.append(call)
        return web.json_response({}, status=202)

    def _start(self, call: ConnectorCall, info: dict[str, Any]) -> web.Response:
        conversation = call.body.get("conversation") or {}
        if self.refuse_streaming:
            return self._refuse(403, "Content stream is not allowed", call.body)
        if conversation.get("conversationType", "personal") != "personal":
            return self._refuse(403, "Content stream is not allowed", call.body)
        if call.body.get("type") != "typing" or info.get("streamSequence") != 1:
            return self._refuse(
                400, "a stream starts with a typing activity, sequence 1", call.body
            )
        if not call.text:
            return self._refuse(400, "Start streaming activities should include text", call.body)
        now = time.monotonic()
        if any(self._open(s, now) for s in self.streams_in(call.conversation_id)):
            return self._refuse(403, "Another content stream is under way in this chat", call.body)
        stream = Stream(call.conversation_id, call.response_id, started=now, answered=now)
        stream.requests.append(call)
        self.streams.append(stream)
        self.calls.append(call)
        return web.json_response({"id": call.response_id}, status=201)

    def _stream_of(self, conversation_id: str, stream_id: str) -> Stream | None:
        return next(
            (
                s
                for s in self.streams
                if s.conversation_id == conversation_id and s.stream_id == stream_id
            ),
            None,
        )

    def _open(self, stream: Stream, now: float) -> bool:
        """Whether a stream still streams (Teams has one at a time per chat)."""
        ended = stream.final is not None or stream.replaced or self._stopped(stream)
        return not (ended or self._timed_out(stream, now))

    def _timed_out(self, stream: Stream, now: float) -> bool:
        early = self.time_out_after is not None and len(stream.requests) >= self.time_out_after
        return early or now - stream.started > STREAM_LIMIT_SECONDS

    def _stopped(self, stream: Stream) -> bool:
        return self.stop_after is not None and len(stream.requests) >= self.stop_after

    def _refuse(self, status: int, message: str, body: dict[str, Any]) -> web.Response:
        code = {400: "BadRequest", 403: "ContentStreamNotAllowed", 429: "Throttled"}[status]
        self.refused.append(Refusal(status, code, message, body))
        return web.json_response({"error": {"code": code, "message": message}}, status=status)

    # -- members -------------------------------------------------------------------

    def _member(self, conversation_id: str, user: str) -> web.Response:
        self.lookups.append((conversation_id, user))
        if self.lookup_status is not None:
            error = {"code": "Forbidden", "message": "the roster cannot be read"}
            return web.json_response({"error": error}, status=self.lookup_status)
        roster = self.members.get(conversation_id, [act.ALICE, act.BOB, act.CAROL])
        for member in roster:
            if user in (member.get("id"), member.get("aadObjectId")):
                return web.json_response(member)
        error = {"code": "MemberNotFoundInConversation", "message": "member not found"}
        return web.json_response({"error": error}, status=404)

    async def _create(self, request: web.Request) -> web.Response:
        parameters: dict[str, Any] = await request.json()
        channel = (parameters.get("channelData") or {}).get("channel") or {}
        activity = parameters.get("activity")
        activity_id: str | None = None
        if channel.get("id"):
            if not isinstance(activity, dict):
                return web.json_response({"error": "a channel post needs its activity"}, status=400)
            activity_id = str(1_800_000_000_000 + next(self._ids))
            conversation_id = f"{channel['id']};messageid={activity_id}"
        else:
            members = [m.get("id") for m in parameters.get("members") or []]
            if len(members) != 1 or not members[0]:
                return web.json_response({"error": "a 1:1 chat has one member"}, status=400)
            if members[0] in self.refuse_members:
                return web.json_response({"error": {"code": "Forbidden"}}, status=403)
            conversation_id = f"a:dm-{members[0]}"
        authorization = request.headers.get("Authorization")
        self.created.append(Created(parameters, conversation_id, activity_id, authorization))
        if isinstance(activity, dict) and activity_id is not None:
            # The post's first activity, as if sent into the new thread.
            self.calls.append(
                ConnectorCall(
                    method="POST",
                    conversation_id=conversation_id,
                    activity_id=None,
                    body=activity,
                    authorization=authorization,
                    response_id=activity_id,
                )
            )
        answer: dict[str, Any] = {"id": conversation_id}
        if activity_id is not None:
            answer["activityId"] = activity_id
        return web.json_response(answer)

    # -- what the tests look at ----------------------------------------------

    def typing(self, conversation_id: str | None = None) -> list[ConnectorCall]:
        """Typing indicators (not streaming requests), optionally in one conversation."""
        return [
            c
            for c in self.calls
            if c.body.get("type") == "typing"
            and c.stream_info is None
            and (conversation_id is None or c.conversation_id == conversation_id)
        ]

    def streams_in(self, conversation_id: str) -> list[Stream]:
        return [s for s in self.streams if s.conversation_id == conversation_id]

    def messages(self, conversation_id: str | None = None) -> list[ConnectorCall]:
        """Posted messages (not typing indicators), optionally in one conversation: a
        streamed message's final request is one."""
        return [
            c
            for c in self.calls
            if c.method == "POST"
            and c.is_message
            and (conversation_id is None or c.conversation_id == conversation_id)
        ]

    def cards(
        self, conversation_id: str | None = None, *, kind: str | None = None
    ) -> list[ConnectorCall]:
        """Posted messages carrying an Adaptive Card (only approvals or questions, by ``kind``)."""
        return [
            c
            for c in self.messages(conversation_id)
            if c.card is not None and (kind is None or c.card_kind == kind)
        ]

    def texts(self, conversation_id: str | None = None) -> list[str]:
        """The text of every posted text message."""
        return [c.text for c in self.messages(conversation_id) if c.card is None]

    def updates(self) -> list[ConnectorCall]:
        """Message updates (``PUT``)."""
        return [c for c in self.calls if c.method == "PUT"]
