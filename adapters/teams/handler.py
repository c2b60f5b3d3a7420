"""``POST /api/messages``: the HTTP edge between Teams and the SDK's ``CloudAdapter``.

Replaces ``CloudAdapter.process``, which answers 500 for every invoke response
with a body (it serializes an already serialized dict): that is every
Action.Execute click. Status codes: 400 for a body that is not an activity,
401 for any authentication failure (never a 5xx), the invoke's own status and
JSON body for invokes, 200 otherwise.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.schema import Activity

from bot import has_lone_surrogate

from .auth import TeamsAuth, Unauthorized
from .turns import Turns

log = logging.getLogger(__name__)


class MessagesHandler:
    """The aiohttp handler for Bot Framework activities."""

    def __init__(self, cloud: CloudAdapter, auth: TeamsAuth, turns: Turns) -> None:
        self._cloud = cloud
        self._auth = auth
        self._turns = turns

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Authenticate, run the turn, and answer with the invoke body if there is one."""
        auth_header = request.headers.get("Authorization", "")
        try:
            # Cheap local checks first: an anonymous caller never gets the body parsed.
            self._auth.precheck(auth_header)
        except Unauthorized as exc:
            return _unauthorized(exc)
        if "json" not in request.content_type:
            return web.Response(status=415, text="expected application/json")
        try:
            body = await request.json()
        except (ValueError, RecursionError):  # not JSON, or nested too deep to parse
            return web.Response(status=400, text="body is not JSON")
        if has_lone_surrogate(body):
            return web.Response(status=400, text="body is not valid text")
        activity = parse_activity(body)
        if activity is None:
            return web.Response(status=400, text="body is not a Bot Framework activity")
        try:
            verdict = await self._auth.authenticate(activity, auth_header)
        except Unauthorized as exc:
            return _unauthorized(exc)
        try:
            invoke = await self._cloud.process_activity(verdict, activity, self._turns.on_turn)
        except Exception:
            log.exception("a Teams %s activity failed", activity.type)
            return web.Response(status=500)
        if invoke is None:
            return web.Response(status=200)
        if invoke.body is None:
            return web.Response(status=int(invoke.status))
        return web.json_response(invoke.body, status=int(invoke.status))


def parse_activity(body: Any) -> Activity | None:
    """The activity in a request body, or ``None`` when it is not a usable one."""
    if not isinstance(body, dict):
        return None
    # Checked on the raw JSON: the deserializer turns any scalar into a string.
    conversation = body.get("conversation")
    if not (
        _text(body.get("type"))
        and _text(body.get("serviceUrl"))
        and isinstance(conversation, dict)
        and _text(conversation.get("id"))
    ):
        return None
    try:
        activity: Activity = Activity().deserialize(body)
    except Exception:
        return None
    return activity


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _unauthorized(exc: Unauthorized) -> web.Response:
    log.info("refused a Teams request: %s", exc.reason)
    return web.Response(status=401)
