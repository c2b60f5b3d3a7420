"""The approval service as an MCP server at ``/mcp`` (streamable HTTP, the ``mcp`` SDK).

Stateless: each request is served by whichever replica gets it, and nothing about a
session is kept between requests, so a replica that restarts loses nothing a caller
needs (a wait cut off is asked again with ``get_decision``). Bearer auth as the HTTP
API's (``bot.api``). Tools:

- ``request_approval(tool, args, summary?, wait_seconds?, idempotency_key?)``: asks,
  then waits for the decision (a progress notification every ``PROGRESS_EVERY``
  seconds), or answers ``pending`` with its id after ``wait_seconds``.
- ``get_decision(id, wait_seconds?)``: the approval as it stands, or once decided.
- ``ask(question, answer_schema?, wait_seconds?, idempotency_key?)``: asks in a
  thread and waits for the answer (valid against the schema), or ``pending``.
- ``notify(text, channel?)``: says something in the client's channel.
- ``approval_prompt(tool_name, input, tool_use_id?)``: Claude Code's
  ``--permission-prompt-tool``: waits until a person decides, then answers
  ``{"behavior": "allow", "updatedInput": {...}}`` (what was approved, edits
  included) or ``{"behavior": "deny", "message": "..."}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Annotated, Any

from aiohttp import web
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import Field

from .api import MAX_BODY, Body, bearer, client_of, error, parsed
from .asgi import serve_asgi
from .asks import Approval, ApprovalRequest, QuestionRequest, ServiceError
from .clients import Client
from .service import ApprovalService

log = logging.getLogger(__name__)

PROGRESS_EVERY = 10.0
"""Seconds between two progress notifications while a tool waits for a decision."""
DEFAULT_WAIT = 600.0
"""How long ``request_approval`` waits for a decision unless told."""
MOST_WAIT = 3600.0
"""The longest ``wait_seconds`` taken."""
RESTARTING = (
    "The approval service is restarting; ask again: the same tool_use_id finds the same "
    "approval, still waiting for a decision"
)
PROMPT_WAIT = 24 * 3600.0
"""How long ``approval_prompt`` waits at most (the approval's own expiry ends it first)."""

Seconds = Annotated[float, Field(ge=0, le=MOST_WAIT)]
Text = Annotated[str, Field(min_length=1, max_length=3000)]


def permission_answer(approval: Approval) -> dict[str, Any]:
    """Claude Code's answer to its permission prompt for a decided ``approval``."""
    if approval.status == "approved":
        return {"behavior": "allow", "updatedInput": approval.args}
    if approval.status == "declined":
        who = approval.decided_by or "someone"
        why = f": {approval.reason}" if approval.reason else ""
        return {"behavior": "deny", "message": f"Declined by {who}{why}"}
    if approval.status == "expired":
        return {"behavior": "deny", "message": "No one decided in time: the approval expired"}
    if approval.status == "cancelled":
        return {"behavior": "deny", "message": "The request was withdrawn"}
    return {"behavior": "deny", "message": "No decision yet"}


class McpEndpoint:
    """The MCP server over one approval service, and its aiohttp route."""

    def __init__(self, service: ApprovalService) -> None:
        self._service = service
        self.server = MCPServer(
            "approvals",
            instructions=(
                "Ask this team's people before you run something risky: request_approval "
                "waits for their decision, and approved means you may run exactly the "
                "arguments it gives back."
            ),
            log_level="WARNING",
        )
        self._tools()
        self.server.streamable_http_app(
            stateless_http=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=MAX_BODY,
        )
        self._stop = asyncio.Event()
        self._running: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Start the SDK's session manager (in a task of its own: its task group ends
        in the task that started it)."""
        started = asyncio.Event()

        async def run() -> None:
            async with self.server.session_manager.run():
                started.set()
                await self._stop.wait()

        self._running = asyncio.create_task(run(), name="mcp server")
        await started.wait()

    async def stop(self) -> None:
        self._stop.set()
        if self._running is not None:
            with contextlib.suppress(Exception):
                await self._running

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """``/mcp``: 401 without a client's token; else the SDK answers."""
        if bearer(request, self._service.clients) is None:
            return error(401, "a client's bearer token is needed")
        body = await request.content.read(MAX_BODY + 1)
        if len(body) > MAX_BODY:
            return error(400, f"the body is over {MAX_BODY} bytes")
        return await serve_asgi(request, self.server.session_manager.handle_request, body)

    def routes(self) -> list[web.RouteDef]:
        return [web.route("*", "/mcp", self.handle)]

    # -- tools -----------------------------------------------------------------------

    def _client(self, ctx: Context) -> Client:
        headers = ctx.headers or {}
        client = client_of(str(headers.get("authorization", "")), self._service.clients)
        if client is None:  # the route checked it: only a request from elsewhere
            raise ToolError("a client's bearer token is needed")
        return client

    async def _wait(self, ctx: Context, client: Client, approval: str, seconds: float) -> Approval:
        """Wait for ``approval``, a progress notification every ``PROGRESS_EVERY`` s."""
        progress = _progress(ctx, "waiting for a decision")
        return await self._service.wait(client, approval, seconds, progress)

    def _tools(self) -> None:
        server, service = self.server, self._service

        @server.tool()
        async def request_approval(
            tool: str,
            args: dict[str, Any],
            ctx: Context,
            summary: str | None = None,
            wait_seconds: Seconds = DEFAULT_WAIT,
            idempotency_key: str | None = None,
        ) -> dict[str, Any]:
            """Ask the team to approve running ``tool`` with ``args``, and wait for their
            decision (up to ``wait_seconds``; then ``pending``: ask get_decision).
            Approved means: run exactly the ``args`` answered (a person may have edited
            them). Declined, expired or cancelled means: do not run it."""
            client = self._client(ctx)
            asked = _parsed(ApprovalRequest, {"tool": tool, "args": args, "summary": summary})
            with _tool_errors():
                approval, _ = await service.request(client, asked, idempotency_key)
                approval = await self._wait(ctx, client, approval.id, wait_seconds)
            return approval.model_dump(mode="json")

        @server.tool()
        async def get_decision(
            id: str, ctx: Context, wait_seconds: Seconds = 0.0
        ) -> dict[str, Any]:
            """An approval as it stands, or (with ``wait_seconds``) once decided."""
            client = self._client(ctx)
            with _tool_errors():
                approval = await self._wait(ctx, client, id, wait_seconds)
            return approval.model_dump(mode="json")

        @server.tool()
        async def notify(text: Text, ctx: Context, channel: str | None = None) -> str:
            """Say ``text`` in the team's channel (no decision asked)."""
            with _tool_errors():
                await service.notify(self._client(ctx), text, channel)
            return "said"

        @server.tool()
        async def ask(
            question: Text,
            ctx: Context,
            answer_schema: dict[str, Any] | None = None,
            wait_seconds: Seconds = DEFAULT_WAIT,
            idempotency_key: str | None = None,
        ) -> dict[str, Any]:
            """Ask the team a question in a thread and wait for the answer (up to
            ``wait_seconds``; then ``pending``: ask again with the same key). The answer
            is valid against ``answer_schema`` (an object schema; default one text
            ``answer``)."""
            client = self._client(ctx)
            asked = _parsed(QuestionRequest, {"question": question, "schema": answer_schema})
            with _tool_errors():
                found, _ = await service.ask(client, asked, idempotency_key)
                progress = _progress(ctx, "waiting for an answer")
                found = await service.wait_answer(client, found.id, wait_seconds, progress)
            return found.model_dump(mode="json")

        @server.tool()
        async def approval_prompt(
            tool_name: str, input: dict[str, Any], ctx: Context, tool_use_id: str | None = None
        ) -> str:
            """Claude Code's permission prompt (``--permission-prompt-tool``): a person
            approves (or edits, or declines) the tool call first."""
            client = self._client(ctx)
            try:
                asked = _parsed(ApprovalRequest, {"tool": tool_name, "args": input})
                with _tool_errors():
                    approval, _ = await service.request(client, asked, tool_use_id)
                    while approval.status == "pending" and not service.closing:
                        approval = await self._wait(ctx, client, approval.id, PROMPT_WAIT)
            except ToolError as exc:  # a person's "no" is not needed for what cannot be asked
                return json.dumps({"behavior": "deny", "message": str(exc)})
            if approval.status == "pending":  # this replica shuts down: no one decided
                raise ToolError(RESTARTING)
            return json.dumps(permission_answer(approval))


def _parsed(model: type[Body], data: dict[str, Any]) -> Body:
    """``data`` (without its ``None`` values) as ``model``, or a tool error naming the field."""
    with _tool_errors():
        return parsed(model, {k: v for k, v in data.items() if v is not None})


@contextlib.contextmanager
def _tool_errors() -> Iterator[None]:
    """What the service refuses, as the tool's error (naming the field at fault)."""
    try:
        yield
    except ServiceError as exc:
        raise ToolError(f"{exc.field}: {exc.message}" if exc.field else exc.message) from None


def _progress(ctx: Context, message: str) -> Callable[[], Awaitable[None]]:
    """A progress notification to ``ctx``'s caller at most every ``PROGRESS_EVERY`` s."""
    started = time.monotonic()
    last = [started]

    async def progress() -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY:
            last[0] = now
            await ctx.report_progress(now - started, message=message)

    return progress
