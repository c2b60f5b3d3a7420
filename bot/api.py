"""The HTTP API of the approval service, under ``/v1`` (JSON, bearer auth).

- ``POST /v1/approvals`` (``Idempotency-Key``): ask; 201 the first time a key is
  sent, 200 (the same approval) after.
- ``GET /v1/approvals/{id}?wait=N``: the approval, once decided or after ``N``
  seconds (at most 60), whichever is first.
- ``POST /v1/approvals/{id}/cancel``: withdraw it.
- ``POST /v1/questions?wait=N`` (``Idempotency-Key``): ask in a thread; the answer
  (valid against the request's JSON schema) once given, or after ``N`` seconds (60
  unless told) the question pending, read later with ``GET /v1/questions/{id}?wait=N``.

401 without a client's token, 403 for a tool the client may not ask about, 404 for
an approval that is not the client's, 400 naming the field for bad input (nothing
is asked then), 503 when the chat platform cannot be reached (send it again, with
the same key). What the service does is ``bot.service``'s.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web
from pydantic import ValidationError

from .asks import Approval, ApprovalRequest, Question, QuestionRequest, ServiceError
from .clients import Client, Clients
from .inputs import has_lone_surrogate
from .service import MAX_WAIT, ApprovalService

log = logging.getLogger(__name__)

Body = TypeVar("Body", ApprovalRequest, QuestionRequest)

MAX_BODY = 256 * 1024
"""The largest request body taken (bytes)."""
MAX_KEY = 200
"""The longest ``Idempotency-Key`` taken."""

SERVICE_KEY: web.AppKey[ApprovalService] = web.AppKey("approval_service", ApprovalService)


def api_routes() -> list[web.RouteDef]:
    """The ``/v1`` routes (the app holds the service under ``SERVICE_KEY``)."""
    return [
        web.post("/v1/approvals", create_approval),
        web.get("/v1/approvals/{id}", get_approval),
        web.post("/v1/approvals/{id}/cancel", cancel_approval),
        web.post("/v1/questions", create_question),
        web.get("/v1/questions/{id}", get_question),
    ]


def error(status: int, message: str, *, field: str | None = None) -> web.Response:
    """A JSON error answer: ``{"error": ..., "field": ...}``."""
    body: dict[str, Any] = {"error": message}
    if field is not None:
        body["field"] = field
    headers = {"WWW-Authenticate": 'Bearer realm="approvals"'} if status == 401 else None
    return web.json_response(body, status=status, headers=headers)


def bearer(request: web.Request, clients: Clients) -> Client | None:
    """The client whose token the request's ``Authorization: Bearer`` header holds."""
    return client_of(request.headers.get("Authorization", ""), clients)


def client_of(authorization: str, clients: Clients) -> Client | None:
    """The client whose token an ``Authorization`` header's value holds (``Bearer ...``)."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return clients.by_token(token.strip())


def _answer(found: Approval | Question, status: int = 200) -> web.Response:
    return web.Response(
        text=found.model_dump_json(), status=status, content_type="application/json"
    )


def _created(found: Approval | Question, created: bool) -> web.Response:
    """201 (asked now) or 200 (asked before, under the same key), with its ``Location``."""
    response = _answer(found, 201 if created else 200)
    response.headers["Location"] = found.url
    return response


async def _body(request: web.Request) -> Any:
    """The JSON body (``ServiceError`` 400: too big, not JSON)."""
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise ServiceError(400, f"the body is over {MAX_BODY} bytes")
    raw = await request.content.read(MAX_BODY + 1)
    if len(raw) > MAX_BODY:
        raise ServiceError(400, f"the body is over {MAX_BODY} bytes")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ServiceError(400, f"the body is not JSON: {exc}") from None
    if has_lone_surrogate(data):
        raise ServiceError(400, "the body holds text that is not valid Unicode")
    return data


def parsed(model: type[Body], data: Any) -> Body:
    """``data`` as ``model``, or a 400 naming the first field at fault."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or None
        raise ServiceError(400, first["msg"], field=where) from None


def _client(request: web.Request) -> tuple[ApprovalService, Client]:
    service = request.app[SERVICE_KEY]
    client = bearer(request, service.clients)
    if client is None:
        raise ServiceError(401, "a client's bearer token is needed")
    return service, client


def _key(request: web.Request) -> str | None:
    """The request's ``Idempotency-Key`` (400 for one too long or unprintable)."""
    key = request.headers.get("Idempotency-Key")
    if key is not None and not (0 < len(key) <= MAX_KEY and key.isprintable()):
        raise ServiceError(400, f"up to {MAX_KEY} printable characters", field="Idempotency-Key")
    return key


Handler = Callable[[web.Request], Awaitable[web.Response]]


def _answering(handler: Handler) -> Handler:
    """``handler``, with a ``ServiceError`` it raises answered as its JSON error."""

    async def handle(request: web.Request) -> web.Response:
        try:
            return await handler(request)
        except ServiceError as exc:
            return error(exc.status, exc.message, field=exc.field)

    return handle


@_answering
async def create_approval(request: web.Request) -> web.Response:
    """``POST /v1/approvals``."""
    service, client = _client(request)
    key = _key(request)
    asked = parsed(ApprovalRequest, await _body(request))
    approval, created = await service.request(client, asked, key)
    return _created(approval, created)


@_answering
async def get_approval(request: web.Request) -> web.Response:
    """``GET /v1/approvals/{id}?wait=N``."""
    service, client = _client(request)
    wait = _wait(request.query.get("wait"))
    return _answer(await service.wait(client, request.match_info["id"], wait))


@_answering
async def cancel_approval(request: web.Request) -> web.Response:
    """``POST /v1/approvals/{id}/cancel``."""
    service, client = _client(request)
    return _answer(await service.cancel(client, request.match_info["id"]))


@_answering
async def create_question(request: web.Request) -> web.Response:
    """``POST /v1/questions?wait=N``: ask, and answer once answered or after ``N``
    seconds (``MAX_WAIT`` unless told): 201 the first time a key is sent, 200 after."""
    service, client = _client(request)
    key = _key(request)
    wait = _wait(request.query.get("wait"), MAX_WAIT)
    asked = parsed(QuestionRequest, await _body(request))
    question, created = await service.ask(client, asked, key)
    if wait:
        question = await service.wait_answer(client, question.id, wait)
    return _created(question, created)


@_answering
async def get_question(request: web.Request) -> web.Response:
    """``GET /v1/questions/{id}?wait=N``."""
    service, client = _client(request)
    wait = _wait(request.query.get("wait"))
    return _answer(await service.wait_answer(client, request.match_info["id"], wait))


def _wait(value: str | None, default: float = 0.0) -> float:
    """``?wait=N``: seconds, 0 to ``MAX_WAIT``."""
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise ServiceError(400, "a number of seconds", field="wait") from None
    if not 0 <= seconds <= MAX_WAIT:
        raise ServiceError(400, f"from 0 to {MAX_WAIT:g} seconds", field="wait")
    return seconds
