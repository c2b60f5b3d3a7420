"""A stand-in for Teams' Bot Connector on this machine, to try the bot without Teams.

    python -m adapters.teams.local_connector [--port 3979]

Post an activity whose ``serviceUrl`` is ``http://127.0.0.1:3979/`` to a bot that
runs with ``TEAMS_ALLOW_UNAUTHENTICATED=true``: what the bot sends back (messages,
cards, card updates) is printed here, and answered the way the connector answers
(with a new activity id), so the bot goes on as it would in Teams. Nothing is
authenticated and nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import sys
from collections.abc import Callable
from typing import Any, Final, TextIO

from aiohttp import web

from .cards import CONTENT_TYPE

HOST: Final = "127.0.0.1"
PORT: Final = 3979
"""Next to the bot's 3978."""


class LocalConnector:
    """The stand-in: ``POST``/``PUT /v3/conversations/{id}/activities[/{id}]`` (a send, a
    reply, an update) and ``POST /v3/conversations`` (a conversation the bot starts)."""

    def __init__(self, *, show: Callable[[str], None] | None = None) -> None:
        self.received: list[dict[str, Any]] = []
        """Every activity the bot sent, in order (its ``conversation.id`` filled in)."""
        self._show = show or _printer(sys.stdout)
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None

    async def start(self, host: str = HOST, port: int = PORT) -> str:
        """Listen on ``host:port``; return the ``serviceUrl`` to put in activities."""
        app = web.Application()
        app.router.add_post("/v3/conversations", self._create)
        app.router.add_post("/v3/conversations/{conversation}/activities", self._send)
        app.router.add_post("/v3/conversations/{conversation}/activities/{activity}", self._send)
        app.router.add_put("/v3/conversations/{conversation}/activities/{activity}", self._update)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()
        bound = self._runner.addresses[0][1]
        return f"http://{host}:{bound}/"

    async def close(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()

    async def _send(self, request: web.Request) -> web.Response:
        activity = await self._keep(request)
        if activity.get("type") == "message":
            self._show(f"[{request.match_info['conversation']}] bot:\n{_shown(activity)}")
        return web.json_response({"id": f"local-{next(self._ids)}"})

    async def _update(self, request: web.Request) -> web.Response:
        activity = await self._keep(request)
        where = f"{request.match_info['conversation']}, {request.match_info['activity']}"
        self._show(f"[{where}] bot updated its message:\n{_shown(activity)}")
        return web.json_response({"id": request.match_info["activity"]})

    async def _create(self, request: web.Request) -> web.Response:
        parameters: dict[str, Any] = await request.json()
        conversation = f"local-conversation-{next(self._ids)}"
        self._show(f"[{conversation}] bot started a conversation")
        first = parameters.get("activity")
        if isinstance(first, dict):
            self.received.append({**first, "conversation": {"id": conversation}})
            self._show(f"[{conversation}] bot:\n{_shown(first)}")
        return web.json_response({"id": conversation, "activityId": f"local-{next(self._ids)}"})

    async def _keep(self, request: web.Request) -> dict[str, Any]:
        activity: dict[str, Any] = await request.json()
        conversation = {**(activity.get("conversation") or {})}
        conversation["id"] = request.match_info["conversation"]
        self.received.append({**activity, "conversation": conversation})
        return activity


def _shown(activity: dict[str, Any]) -> str:
    """A message as lines of text: its text, or its card's text and buttons."""
    lines = [str(activity["text"])] if activity.get("text") else []
    for attachment in activity.get("attachments") or []:
        if attachment.get("contentType") == CONTENT_TYPE:
            lines += _card_lines(attachment.get("content") or {})
    return "\n".join(f"  {line}" for line in lines or ["(nothing to show)"])


def _card_lines(card: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for element in card.get("body") or []:
        if element.get("type") == "TextBlock":
            lines.append(str(element.get("text", "")))
        elif element.get("type") == "FactSet":
            lines += [f"{f.get('title')}: {f.get('value')}" for f in element.get("facts") or []]
    buttons = [f"[{action.get('title')}]" for action in card.get("actions") or []]
    if buttons:
        lines.append(" ".join(buttons))
    return lines


def _printer(out: TextIO) -> Callable[[str], None]:
    def show(text: str) -> None:
        print(text, file=out, flush=True)

    return show


async def serve(host: str, port: int) -> None:
    """Run the stand-in until interrupted."""
    connector = LocalConnector()
    url = await connector.start(host, port)
    print(f"local Bot Connector at {url}: use it as the activities' serviceUrl", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await connector.close()


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m adapters.teams.local_connector", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it stops
        asyncio.run(serve(args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
