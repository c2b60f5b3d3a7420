"""The aiohttp application: platform routes from the adapters, health and metrics, and
(when ``BOT_CONFIG`` declares clients) the approval service's HTTP API (``bot.api``)
and MCP server (``bot.mcp_server``).

Lifecycle: adapters start with the app; on shutdown the bot first finishes its
background work (adapters are still up, so results can still be posted), then
the adapters stop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

from aiohttp import web

from .api import SERVICE_KEY, api_routes
from .core import ChatBot
from .mcp_server import McpEndpoint
from .settings import Settings
from .types import Messenger

log = logging.getLogger(__name__)

BOT_KEY: web.AppKey[ChatBot] = web.AppKey("bot", ChatBot)
SETTINGS_KEY: web.AppKey[Settings] = web.AppKey("settings", Settings)
HEALTH_TIMEOUT = 5.0
"""Seconds the store gets to answer a health check before it counts as down."""
SHUTDOWN_GRACE = 10.0
"""Seconds background work gets to finish at shutdown before it is cancelled."""


class Adapter(Protocol):
    """A chat platform plugged into the server (Slack, Teams)."""

    @property
    def platform(self) -> str:
        """The ``ThreadKey.platform`` of this adapter's threads."""
        ...

    @property
    def messenger(self) -> Messenger:
        """How the core answers in this platform's threads."""
        ...

    def routes(self) -> list[web.RouteDef]:
        """The HTTP routes this adapter serves."""
        ...

    async def start(self) -> None:
        """Open connections (e.g. Socket Mode); called when the app starts."""
        ...

    async def stop(self) -> None:
        """Close connections; called when the app stops."""
        ...


def build_app(
    settings: Settings,
    bot: ChatBot,
    adapters: Sequence[Adapter],
    *,
    sweep_interval: float | None = None,
    pages: Sequence[web.RouteDef] = (),
) -> web.Application:
    """The HTTP app: ``GET /healthz``, ``GET /metrics``, every adapter's routes, and the
    approval service's when the bot has clients.

    Args:
        settings: The bot's settings (kept on the app for handlers).
        bot: The chat core; each adapter's messenger is registered with it.
        adapters: The platforms to serve.
        sweep_interval: Run the expiry sweep every this many seconds (off when None).
        pages: The routes of the bot's web pages (the decision page, ``adapters.web``).
    """
    app = web.Application()
    app[BOT_KEY] = bot
    app[SETTINGS_KEY] = settings
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    for adapter in adapters:
        bot.register(adapter.platform, adapter.messenger)
        app.add_routes(adapter.routes())
    app.add_routes(pages)
    endpoint: McpEndpoint | None = None
    if bot.clients:
        app[SERVICE_KEY] = bot.service
        app.add_routes(api_routes())
        endpoint = McpEndpoint(bot.service)
        app.add_routes(endpoint.routes())

    async def start(_: web.Application) -> None:
        if endpoint is not None:
            await endpoint.start()
        for adapter in adapters:
            await adapter.start()
            log.info("%s adapter started", adapter.platform)
        if sweep_interval:
            bot.start_sweeper(sweep_interval)

    async def shutdown(_: web.Application) -> None:
        # The core first, while the adapters can still post: it finishes what it
        # took within the grace period. What is acked meanwhile (Socket Mode) waits
        # in the inbox for another replica, or this one restarted.
        await bot.aclose(SHUTDOWN_GRACE)
        for adapter in reversed(adapters):
            try:
                await adapter.stop()
            except Exception:
                log.exception("stopping the %s adapter failed", adapter.platform)
        if endpoint is not None:
            await endpoint.stop()

    app.on_startup.append(start)
    app.on_shutdown.append(shutdown)
    return app


async def healthz(request: web.Request) -> web.Response:
    """200 when the store answers, 503 otherwise; each MCP server's state besides.

    An MCP server that is down does not fail the check: the bot still serves
    everything else, and that server's calls say it is down.
    """
    bot = request.app[BOT_KEY]
    try:
        ok = bool(await asyncio.wait_for(bot.agent.ping(), HEALTH_TIMEOUT))
    except Exception:
        log.warning("health check: the store did not answer", exc_info=True)
        ok = False
    body: dict[str, object] = {"ok": ok, "store": ok}
    if bot.mcp_servers:
        body["mcp"] = {
            s.name: {"state": s.state, "tools": len(s.tools()), "error": s.error}
            for s in bot.mcp_servers
        }
    return web.json_response(body, status=200 if ok else 503)


async def metrics(request: web.Request) -> web.Response:
    """The bot's counters in the Prometheus text format (OpenMetrics, with exemplars,
    when the scraper asks for it)."""
    body, kind = request.app[BOT_KEY].metrics.render(request.headers.get("Accept", ""))
    return web.Response(body=body, headers={"Content-Type": kind})
