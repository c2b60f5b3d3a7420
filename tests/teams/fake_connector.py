"""A local fake of the Bot Connector service: records what the bot sends to Teams.

Serves ``POST /v3/conversations/{id}/activities[/{reply_to}]`` (answering with
a new activity id) and ``PUT /v3/conversations/{id}/activities/{activity_id}``,
the calls botbuilder's ``ConnectorClient`` makes for sends and updates, and
``POST /v3/conversations`` (a new conversation: in a channel, a post whose
first activity is the one the parameters carry; else the 1:1 chat with the one
member, the same one each time, as Teams answers).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from aiohttp import web


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
        """The ``kind`` its card's actions carry ("approval", "question"), if it has actions."""
        for action in (self.card or {}).get("actions") or []:
            kind = (action.get("data") or {}).get("kind")
            if isinstance(kind, str):
                return kind
        return None

    @property
    def text(self) -> str:
        return str(self.body.get("text") or "")

    @property
    def mentions(self) -> list[dict[str, Any]]:
        """The @mention entities: of its card (``msteams.entities``) if it has one, else of
        the message; each one's ``<at>`` text is checked to be in the text it belongs to."""
        if self.card is not None:
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


class FakeConnector:
    """The fake connector server; ``url`` is the ``serviceUrl`` to put in activities."""

    def __init__(self) -> None:
        self.calls: list[ConnectorCall] = []
        self.created: list[Created] = []
        self.refuse_members: set[str] = set()
        """Members a 1:1 chat cannot be created with (the bot is not installed for them):
        the connector answers 403, as Teams does."""
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

    async def _handle(self, request: web.Request) -> web.Response:
        # request.path is percent-decoded: conversation ids keep their ':' ';' '@'.
        parts = request.path.strip("/").split("/")
        if parts == ["v3", "conversations"] and request.method == "POST":
            return await self._create(request)
        if len(parts) not in (4, 5) or parts[:2] != ["v3", "conversations"]:
            return web.json_response({"error": "unknown path"}, status=404)
        if parts[3] != "activities" or request.method not in ("POST", "PUT"):
            return web.json_response({"error": "unknown path"}, status=404)
        activity_id = parts[4] if len(parts) == 5 else None
        if request.method == "PUT" and activity_id is None:
            return web.json_response({"error": "PUT needs an activity id"}, status=400)
        response_id = activity_id if request.method == "PUT" else f"act-{next(self._ids)}"
        assert response_id is not None
        self.calls.append(
            ConnectorCall(
                method=request.method,
                conversation_id=parts[2],
                activity_id=activity_id,
                body=await request.json(),
                authorization=request.headers.get("Authorization"),
                response_id=response_id,
            )
        )
        return web.json_response({"id": response_id})

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

    def messages(self, conversation_id: str | None = None) -> list[ConnectorCall]:
        """Posted messages (not typing indicators), optionally in one conversation."""
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
