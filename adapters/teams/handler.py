"""``POST /api/messages``: the HTTP edge between Teams and the SDK's ``CloudAdapter``.

Replaces ``CloudAdapter.process``, which answers 500 for every invoke response
with a body (it serializes an already serialized dict): that is every
Action.Execute click. Status codes: 400 for a body that is not an activity,
401 for any authentication failure (never a 5xx), 200 when what the turn had to
send cannot go out (no token, the service out of reach: sending the activity
again would not help), the invoke's own status and JSON body for invokes, 200
otherwise.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from aiohttp import web
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.schema import Activity
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from bot import Overloaded, Undeliverable, has_lone_surrogate

from .auth import TeamsAuth, Unauthorized
from .turns import TeamsBot

log = logging.getLogger(__name__)

RETRY_AFTER = "5"
"""Seconds the sender is asked to wait before resending what the bot could not keep."""


class MessagesHandler:
    """The aiohttp handler for Bot Framework activities."""

    def __init__(self, cloud: CloudAdapter, auth: TeamsAuth, logic: TeamsBot) -> None:
        self._cloud = cloud
        self._auth = auth
        self._logic = logic

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Authenticate, run the turn, and answer with the invoke body if there is one."""
        auth_header = request.headers.get("Authorization", "")
        try:
            # Cheap local checks first: an anonymous caller never gets the body parsed.
            prechecked = self._auth.precheck(auth_header)
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
            verdict = await self._auth.authenticate(activity, auth_header, prechecked=prechecked)
        except Unauthorized as exc:
            return _unauthorized(exc)
        try:
            invoke = await self._cloud.process_activity(verdict, activity, self._logic.on_turn)
        except Overloaded:
            log.warning("the bot cannot keep more requests while its store is down: 503")
            return web.Response(status=503, headers={"Retry-After": RETRY_AFTER})
        except Undeliverable as exc:
            # Teams sending it again cannot mend a service or a token the bot cannot use.
            log.warning("a Teams %s activity could not be answered: %s", activity.type, exc)
            return web.Response(status=200)
        except Exception:
            log.exception("a Teams %s activity failed", activity.type)
            return web.Response(status=500)
        if invoke is None:
            return web.Response(status=200)
        if invoke.body is None:
            return web.Response(status=int(invoke.status))
        return web.json_response(invoke.body, status=int(invoke.status))


class _Shaped(BaseModel):
    """Extra fields are Teams' business; the ones the bot reads must have their types."""

    model_config = ConfigDict(extra="allow")


class _Account(_Shaped):
    id: str | None = None
    name: str | None = None
    aadObjectId: str | None = None
    role: str | None = None


class _Entity(_Shaped):
    type: str | None = None
    text: str | None = None
    mentioned: _Account | None = None


class _Conversation(_Shaped):
    id: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    conversationType: str | None = None
    tenantId: str | None = None


class _ChannelData(_Shaped):
    tenant: _Account | None = None


class _ActivityShape(_Shaped):
    """What the bot reads of an activity, checked on the raw JSON before the SDK sees it
    (its deserializer turns any scalar into a string and leaves nested shapes as found)."""

    type: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    serviceUrl: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    conversation: _Conversation
    from_: _Account | None = Field(default=None, alias="from")
    recipient: _Account | None = None
    entities: list[_Entity] | None = None
    channelData: _ChannelData | None = None
    text: str | None = None
    id: str | None = None
    replyToId: str | None = None
    name: str | None = None


def parse_activity(body: Any) -> Activity | None:
    """The activity in a request body, or ``None`` when it is not a usable one."""
    try:
        _ActivityShape.model_validate(body)
    except ValidationError:
        return None
    try:
        activity: Activity = Activity().deserialize(body)
    except Exception:
        return None
    return activity


def _unauthorized(exc: Unauthorized) -> web.Response:
    log.info("refused a Teams request: %s", exc.reason)
    return web.Response(status=401)
