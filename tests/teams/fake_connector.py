"""A local fake of the Bot Connector service: records what the bot sends to Teams.

Serves ``POST /v3/conversations/{id}/activities[/{reply_to}]`` (answering with
a new activity id) and ``PUT /v3/conversations/{id}/activities/{activity_id}``,
the calls botbuilder's ``ConnectorClient`` makes for sends and updates.
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


class FakeConnector:
    """The fake connector server; ``url`` is the ``serviceUrl`` to put in activities."""

    def __init__(self) -> None:
        self.calls: list[ConnectorCall] = []
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
