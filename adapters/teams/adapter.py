"""The Teams adapter: Bot Framework activities in, Adaptive Cards and messages out."""

from __future__ import annotations

import logging
from typing import Final

from aiohttp import web
from botbuilder.integration.aiohttp import CloudAdapter

from bot import ChatCore, TaskTracker, ThreadKey

from .auth import TeamsAuth
from .convert import PLATFORM
from .handler import MessagesHandler
from .limits import Limits
from .messenger import TeamsMessenger
from .people import Directory
from .settings import TeamsSettings
from .turns import TeamsBot

log = logging.getLogger(__name__)

MESSAGES_PATH: Final = "/api/messages"


class TeamsNotConfigured(ValueError):
    """Neither ``MICROSOFT_APP_ID`` nor ``TEAMS_ALLOW_UNAUTHENTICATED=true`` is set."""


class TeamsAdapter:
    """Serves ``POST /api/messages`` through botbuilder's ``CloudAdapter``.

    Register its ``messenger`` with the bot (``bot.register(adapter.platform,
    adapter.messenger)``) and mount its ``routes()``.

    Raises:
        TeamsNotConfigured: The settings leave the Teams endpoint off.
    """

    platform: Final = PLATFORM

    def __init__(self, bot: ChatCore, settings: TeamsSettings) -> None:
        if not settings.enabled:
            raise TeamsNotConfigured(
                "Teams is off: set MICROSOFT_APP_ID (or TEAMS_ALLOW_UNAUTHENTICATED=true "
                "for local testing only)"
            )
        self._bot = bot
        self.limits = Limits()
        """Teams' limits (throttling, bad moments), kept by every call the adapter makes."""
        self.auth = TeamsAuth(settings, limits=self.limits)
        self.tasks = TaskTracker()
        """Work the adapter does behind a request (a Stop pressed on a streamed answer)."""
        self._cloud = CloudAdapter(self.auth.framework)
        people = Directory()
        self.messenger = TeamsMessenger(
            self._cloud,
            bot.chat,
            self.auth,
            people=people,
            stop_pressed=self._stop_pressed,
            limits=self.limits,
        )
        logic = TeamsBot(
            bot, bot.chat, self.auth, people, limits=self.limits, nearby=self.messenger.nearby
        )
        self._handler = MessagesHandler(self._cloud, self.auth, logic)

    def routes(self) -> list[web.RouteDef]:
        """``POST /api/messages``."""
        return [web.post(MESSAGES_PATH, self._handler.handle)]

    async def start(self) -> None:
        """Say how the endpoint is protected (loudly when it is not)."""
        if self.auth.enabled:
            log.info("Teams endpoint %s on for app id %s", MESSAGES_PATH, self.auth.app_id)
        else:
            log.warning(
                "TEAMS ENDPOINT %s ACCEPTS UNAUTHENTICATED REQUESTS "
                "(TEAMS_ALLOW_UNAUTHENTICATED=true without MICROSOFT_APP_ID): "
                "anyone who can reach it can act as any user. Local testing only.",
                MESSAGES_PATH,
            )

    async def stop(self) -> None:
        """Finish the adapter's tasks, then stop the token check threads (connector
        clients live for one call each)."""
        await self.tasks.aclose()
        self.auth.close()

    async def drain(self) -> None:
        """Wait until the adapter and the core are idle (tests)."""
        while self.tasks.running or self._bot.busy:
            await self.tasks.drain()
            await self._bot.drain()

    def _stop_pressed(self, thread: ThreadKey, user_id: str) -> None:
        """Teams' Stop on a streamed answer: the request is stopped behind, not in the
        stream's way."""
        try:
            self.tasks.spawn(self._stop(thread, user_id), name=f"teams-stop:{thread.id}")
        except RuntimeError:
            log.warning("a Stop pressed in %s during shutdown was dropped", thread.id)

    async def _stop(self, thread: ThreadKey, user_id: str) -> None:
        said = await self._bot.on_stop(thread, user_id)
        if said:
            await self.messenger.tell(thread, user_id, said)
