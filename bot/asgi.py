"""One aiohttp request served by an ASGI app (the ``mcp`` SDK's streamable HTTP).

The bot is an aiohttp server; the MCP SDK's transport is ASGI. This hands one
request over, the body read (and bounded) first, and streams the answer back as
the app sends it (an SSE stream of progress notes, then the result). A package
(``aiohttp-asgi``) mounts whole ASGI apps as resources, with their lifespans; the
bot needs one route, authenticated first, and a few lines do that.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from aiohttp import web

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def serve_asgi(request: web.Request, app: ASGIApp, body: bytes) -> web.StreamResponse:
    """Answer ``request`` (whose ``body`` is read already) with ``app``."""
    host, port = _server(request)
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode(),
        "query_string": request.query_string.encode(),
        "root_path": "",
        "headers": [(k.lower(), v) for k, v in request.raw_headers],
        "client": _peer(request),
        "server": (host, port),
    }
    sent_body = False
    never = asyncio.Event()  # the app's own ending cancels its wait for a disconnect

    async def receive() -> Message:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await never.wait()
        return {"type": "http.disconnect"}

    response: web.StreamResponse | None = None

    async def send(message: Message) -> None:
        nonlocal response
        if message["type"] == "http.response.start":
            response = web.StreamResponse(status=int(message["status"]))
            for name, value in message.get("headers", ()):
                key = name.decode("latin-1")
                if key.lower() != "content-length":
                    response.headers.add(key, value.decode("latin-1"))
            await response.prepare(request)
        elif message["type"] == "http.response.body" and response is not None:
            chunk = message.get("body", b"")
            if chunk:
                await response.write(chunk)
            if not message.get("more_body", False):
                await response.write_eof()

    await app(scope, receive, send)
    if response is None:  # the app answered nothing: a bug of its own
        return web.Response(status=500)
    return response


def _peer(request: web.Request) -> tuple[str, int] | None:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    if isinstance(peer, tuple) and len(peer) >= 2:
        return str(peer[0]), int(peer[1])
    return None


def _server(request: web.Request) -> tuple[str, int]:
    sock = request.transport.get_extra_info("sockname") if request.transport else None
    if isinstance(sock, tuple) and len(sock) >= 2:
        return str(sock[0]), int(sock[1])
    return request.host, 0
