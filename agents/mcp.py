"""Tools of MCP servers, under the same approval rules as an agent's own tools.

``McpServer`` says how to reach one server (streamable HTTP or a stdio
command) and how its tools are gated; ``McpTools`` keeps a live connection to
it and offers its tools as ``Tool`` objects named ``<server>__<tool>``, which
an ``Agent`` takes as one of its ``tool_sources``. Everything on the wire is the
official ``mcp`` SDK's (``mcp.Client``: the current protocol revision, falling
back to the previous one for older servers).

Approval: with ``require_approval="hints"`` (the default) a tool runs without a
person only when its annotations say ``readOnlyHint: true``; anything else,
missing annotations included, needs approval (MCP's ``destructiveHint``
defaults to true: this fails closed). ``idempotentHint: true`` makes a decided
call that a crash interrupted safe to retry; nothing else is ever run twice.

Arguments are validated against the tool's input schema (JSON Schema, with
``jsonschema``) before a card is shown: invalid ones go back to the model as
an error. Every failure (server down, an error result, a timeout) becomes a
tool error the model sees; the connection is re-made in the background, with
backoff, and the tool list follows the server's ``tools/list_changed``.

A server's question (an elicitation) suspends the call (``ctx.suspend``). On
MCP 2026-07-28 the call has returned (``InputRequiredResult``): the suspension
keeps the server's ``request_state``, and the answer (or a decline) retries
the call with it, from any process. Before that revision the server asks
inside the call: the suspension names the call still open here, and the answer
is handed to it; after a restart that call is gone (``QuestionLost``), and the
tool is called again only if it is idempotent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
import mcp.types as mt
from jsonschema import SchemaError
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel

from .agent import Agent
from .chunks import PendingInfo
from .tools import Tool, ToolContext, schema_model

log = logging.getLogger(__name__)

SEPARATOR = "__"
"""Between a server's name and its tool's: ``tickets__delete_ticket``."""
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What a tool's full name must match (Anthropic's tool-name pattern)."""
SERVER_NAME = re.compile(r"^[a-zA-Z0-9-]+(?:_[a-zA-Z0-9-]+)*$")
"""A server's name: no ``__`` inside, so a full tool name splits one way."""

PYTHON = ("python", "python3")
"""A stdio command that means the bot's own interpreter (its virtualenv and packages)."""

ApprovalMode = Literal["always", "never", "hints"]
McpState = Literal["connecting", "connected", "down", "closed"]

CLOSE_GRACE = 2.0
"""Seconds ``aclose`` waits for a connection attempt to end before cancelling it."""
RETRY_FIRST = 0.5
RETRY_MAX = 30.0
"""Seconds between reconnection attempts: doubling from the first to the last."""


class McpError(Exception):
    """An MCP call that did not give a result; the message is for the model and the thread."""


class McpUnavailable(Exception):
    """A server that could not be reached (or listed) when it had to be."""


@dataclass(frozen=True, kw_only=True)
class McpServer:
    """How to reach one MCP server, and how its tools are gated.

    Exactly one of ``url`` (streamable HTTP, with ``headers``) and ``command``
    (a process speaking stdio, with ``args``, ``env`` and ``cwd``) is given.
    ``env`` is added to a minimal environment (``PATH``, ``HOME``...), not to
    the bot's own: a server gets no secret it is not given. The command
    ``python`` (or ``python3``) is the bot's own interpreter.
    """

    name: str
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    command: str | None = None
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    require_approval: ApprovalMode = "hints"
    tool_approval: Mapping[str, bool] = field(default_factory=dict)
    """Per-tool overrides (by the server's tool name): ``True`` always asks, ``False`` never."""
    timeout: float = 60.0
    """Seconds a call may take before it fails as timed out (a person's answer to the
    server's question does not count)."""
    protocol: Literal["auto", "legacy"] = "auto"
    """``auto``: the current revision, else the previous one; ``legacy``: the initialize
    handshake only (MCP 2025-11-25), for a server or proxy that mishandles discovery."""

    def __post_init__(self) -> None:
        if not SERVER_NAME.fullmatch(self.name):
            raise ValueError(
                f"MCP server name {self.name!r}: letters, digits, '-' and single '_' only"
            )
        if (self.url is None) == (self.command is None):
            raise ValueError(f"MCP server {self.name!r}: give exactly one of url and command")
        if self.timeout <= 0:
            raise ValueError(f"MCP server {self.name!r}: timeout must be positive")

    @property
    def where(self) -> str:
        """The URL or the command, for logs and health (never the headers or env)."""
        return self.url or " ".join([self.command or "", *self.args]).strip()

    def needs_approval(self, tool: mt.Tool) -> bool:
        """Whether a call of this tool waits for a person (fails closed on missing hints)."""
        override = self.tool_approval.get(tool.name)
        if override is not None:
            return override
        if self.require_approval != "hints":
            return self.require_approval == "always"
        hints = tool.annotations
        return not (hints is not None and hints.read_only_hint is True)


@dataclass(frozen=True, kw_only=True)
class Question:
    """What a server asks the person before a call can finish (an elicitation form).

    It becomes the call's suspension: ``payload()`` is what the run keeps (the
    question, and the server's ``request_state`` to retry with), ``schema`` what
    the answer must satisfy. The retry needs nothing else, so it works hours
    later, on another replica, after a restart (as long as the server accepts
    its own ``request_state`` then: a server with a fixed key does).
    """

    message: str
    schema: dict[str, Any]
    key: str
    request_state: str | None
    live: bool = False
    """Asked inside a call that is still open (MCP before 2026-07-28): the answer must
    reach this process while that call lasts."""

    def payload(self) -> dict[str, Any]:
        asked: dict[str, Any] = {"key": self.key, "state": self.request_state}
        if self.live:
            asked["live"] = True
        return {"message": self.message, MCP_QUESTION: asked}


@dataclass(frozen=True, kw_only=True)
class Answer:
    """A person's answer to a ``Question`` (or their refusal), for the retried call."""

    key: str
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None
    request_state: str | None
    live: bool = False

    @classmethod
    def to(cls, ctx: ToolContext) -> Answer | None:
        """What a resumed call tells the server about the question it suspended with."""
        suspended = ctx.suspended
        asked = suspended.get(MCP_QUESTION) if isinstance(suspended, dict) else None
        if not isinstance(asked, dict):
            return None
        key, state, live = str(asked.get("key")), asked.get("state"), asked.get("live") is True
        if ctx.declined is not None:
            return cls(key=key, action=ctx.declined, content=None, request_state=state, live=live)
        if ctx.resume_data is None:
            return None
        content = ctx.resume_data if isinstance(ctx.resume_data, dict) else {}
        return cls(key=key, action="accept", content=content, request_state=state, live=live)

    def result(self) -> mt.ElicitResult:
        return mt.ElicitResult(action=self.action, content=self.content)

    def responses(self) -> mt.InputResponses:
        return {self.key: self.result()}


_RECHECK = "please check what it did and ask again."

MCP_QUESTION = "mcp_question"
"""Where a suspension's payload keeps what retrying the call needs."""


def asks_for_a_server(info: PendingInfo) -> bool:
    """Whether a waiting question is an MCP server's (an elicitation)."""
    payload = info.suspend_payload
    return isinstance(payload, dict) and MCP_QUESTION in payload


class QuestionLost(McpError):
    """An answer to a question asked inside a call that is no longer open."""


@dataclass(eq=False)
class _Live:
    """A question a legacy server asked inside a call; ``reply`` is awaited by that call."""

    key: str
    message: str
    schema: dict[str, Any]
    reply: asyncio.Future[mt.ElicitResult]


@dataclass(eq=False)
class _Flight:
    """One call the server is working on (its request runs in ``task``)."""

    tool: str
    task: asyncio.Task[Any]
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    question: _Live | None = None
    """The question the call waits on now, if it asked one."""


LIVE_QUESTION_MAX = 24 * 3600.0
"""Seconds a call that asked inside itself is held open for the answer (then cancelled)."""


@dataclass
class McpStats:
    """What the calls of one server did (``/metrics`` reads it)."""

    calls: int = 0
    errors: int = 0
    seconds: float = 0.0


class McpTools:
    """A live connection to one MCP server, offering its tools (a ``ToolSource``).

    ``start`` connects (and lists the tools) or raises ``McpUnavailable``;
    afterwards a lost connection is re-made in the background with backoff,
    while the tools last listed stay offered and their calls fail with a clear
    error. One task owns the connection from open to close (the SDK's contexts
    must be left in the task that entered them); calls run from any task.
    """

    def __init__(self, server: McpServer, *, retry: tuple[float, float] = (RETRY_FIRST, RETRY_MAX)):
        self.server = server
        self.name = server.name
        self.state: McpState = "connecting"
        self.error: str | None = None
        """Why the server is not connected, when it is not."""
        self.stats = McpStats()
        self._retry = retry
        self._tools: dict[str, Tool] = {}
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._broken = asyncio.Event()
        self._changed = asyncio.Event()
        self._tried = asyncio.Event()
        self._flights: set[_Flight] = set()
        self._live: dict[str, _Flight] = {}
        """Calls waiting inside themselves for a person, by their question's key."""

    def tools(self) -> Mapping[str, Tool]:
        """The server's tools as last listed, by full name (``<server>__<tool>``)."""
        return self._tools

    def tool_names(self) -> list[str]:
        """The server's own names of the tools it offers."""
        return [name.removeprefix(self.name + SEPARATOR) for name in self._tools]

    async def start(self, *, wait: float = 10.0) -> None:
        """Connect and list the tools, waiting at most ``wait`` seconds.

        Raises:
            McpUnavailable: The first attempt failed or took too long (the
                connection keeps being retried in the background until
                ``aclose``).
        """
        if self._owner is None:
            self._owner = asyncio.create_task(self._own(), name=f"mcp:{self.name}")
        try:
            await asyncio.wait_for(self._tried.wait(), wait)
        except TimeoutError:
            self.error = self.error or f"no answer within {wait:g} s"
        if self.state != "connected":
            raise McpUnavailable(f"MCP server {self.name} ({self.server.where}): {self.error}")

    async def aclose(self) -> None:
        """Close the connection (a stdio server's process ends with it)."""
        self._stop.set()
        for flight in list(self._live.values()):
            if flight.question is not None and not flight.question.reply.done():
                flight.question.reply.set_result(mt.ElicitResult(action="cancel"))
        if self._owner is not None:
            # Connected, it stops at once; mid-connect (a server that hangs on start) it
            # is cancelled after a moment, in its own task, which leaves every context.
            _, late = await asyncio.wait({self._owner}, timeout=CLOSE_GRACE)
            for owner in late:
                owner.cancel()
            await asyncio.gather(self._owner, return_exceptions=True)
        self.state = "closed"

    async def call(
        self, tool: str, arguments: dict[str, Any], *, answer: Answer | None = None
    ) -> str | Question:
        """Call one of the server's tools: its result as text, or the ``Question`` it
        asks the person first. ``answer`` retries a call that asked, with the reply (or
        hands it to the call still open, for a question asked inside it).

        Raises:
            QuestionLost: ``answer`` is for a question asked inside a call that is no
                longer open (the bot restarted, or this is another replica).
            McpError: The server is not connected, the call timed out or failed,
                or the tool answered with an error (its text is the message).
        """
        if answer is not None and answer.live:
            return await self._answer_live(tool, answer)
        client = self._client
        if client is None:
            raise McpError(
                f"the MCP server {self.name} is not connected ({self.error or 'connecting'})"
            )
        self.stats.calls += 1
        request = client.session.call_tool(
            tool,
            arguments,
            allow_input_required=True,
            input_responses=answer.responses() if answer else None,
            request_state=answer.request_state if answer else None,
        )
        flight = _Flight(tool=tool, task=asyncio.create_task(request, name=f"mcp:{tool}"))
        self._flights.add(flight)
        flight.task.add_done_callback(lambda task: self._landed(flight, task))
        return await self._outcome(flight)

    def _landed(self, flight: _Flight, task: asyncio.Task[Any]) -> None:
        """A request ended: it is no longer in flight (an outcome nobody waits for any
        more, after a timeout or an abandoned question, is dropped here)."""
        self._flights.discard(flight)
        if not task.cancelled():
            task.exception()

    async def _answer_live(self, tool: str, answer: Answer) -> str | Question:
        """Give the call that asked inside itself its answer, then wait for it again."""
        flight = self._live.get(answer.key)
        question = flight.question if flight is not None else None
        if flight is None or question is None or question.reply.done():
            raise QuestionLost(
                f"{self.name}: {tool} asked this question inside its call, and that call is"
                " no longer open (the bot restarted, or the answer reached another replica)"
            )
        question.reply.set_result(answer.result())
        flight.question = None
        return await self._outcome(flight)

    async def _outcome(self, flight: _Flight) -> str | Question:
        """What a call in flight comes to: its result, a question it asks inside itself,
        or ``McpError`` (a timeout cancels it). Time a person takes does not count."""
        started = time.monotonic()
        flight.asked.clear()
        asking = asyncio.create_task(flight.asked.wait())
        try:
            await asyncio.wait(
                {flight.task, asking},
                timeout=self.server.timeout,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            asking.cancel()
            self.stats.seconds += time.monotonic() - started
        try:
            if flight.task.done():
                return self._result(flight.tool, flight.task)
            asked = flight.question
            if asked is not None:
                return Question(
                    message=asked.message,
                    schema=asked.schema,
                    key=asked.key,
                    request_state=None,
                    live=True,
                )
            flight.task.cancel()
            raise McpError(
                f"{self.name}: {flight.tool} did not answer within {self.server.timeout:g} s"
            )
        except McpError:
            self.stats.errors += 1
            raise

    def _result(self, tool: str, task: asyncio.Task[Any]) -> str | Question:
        """A finished request as text or a ``Question``; ``McpError`` for any failure."""
        try:
            result = task.result()
        except MCPError as exc:
            if exc.code == mt.INVALID_PARAMS and "requestState" in exc.message:
                raise McpError(
                    f"{self.name}: {tool} could not take the answer: the server no longer"
                    f" opens the state it asked with ({exc.message}; it restarted without a"
                    " fixed key, or the state expired). It did not run; please ask again."
                ) from exc
            if exc.code == mt.CONNECTION_CLOSED:
                self._broken.set()
                raise McpError(f"{self.name}: the connection was lost during {tool}") from exc
            raise McpError(f"{self.name}: {tool} failed: {exc.message}") from exc
        except Exception as exc:
            self._broken.set()
            raise McpError(f"{self.name}: {tool} failed: {_reason(exc)}") from exc
        if isinstance(result, mt.InputRequiredResult):
            return self._question(tool, result)
        if not isinstance(result, mt.CallToolResult):
            raise McpError(f"{self.name}: {tool} answered with no tool result")
        text = result_text(result)
        if result.is_error:
            raise McpError(text or f"{self.name}: {tool} failed")
        return text

    def _question(self, tool: str, result: mt.InputRequiredResult) -> Question:
        """The one form question an ``InputRequiredResult`` asks, or ``McpError``."""
        requests = result.input_requests or {}
        asked = [
            (key, request.params)
            for key, request in requests.items()
            if isinstance(request, mt.ElicitRequest)
            and isinstance(request.params, mt.ElicitRequestFormParams)
        ]
        if len(requests) != 1 or len(asked) != 1:
            kinds = ", ".join(sorted({type(r).__name__ for r in requests.values()})) or "nothing"
            raise McpError(
                f"{self.name}: {tool} asked for {kinds}; the bot answers one form question"
                " at a time"
            )
        key, params = asked[0]
        return Question(
            message=params.message,
            schema=dict(params.requested_schema),
            key=key,
            request_state=result.request_state,
        )

    async def _legacy_question(
        self, context: Any, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult | mt.ErrorData:
        """A question asked inside a call (MCP before 2026-07-28): the call suspends
        with it while the server's request stays open, and the answer is handed to it.

        Such a question lives in this process's session only. It is taken when the
        call asking is the only one in flight on the connection (the protocol does
        not say which call asks); otherwise it is refused, saying why.
        """
        if not isinstance(params, mt.ElicitRequestFormParams):
            return mt.ErrorData(code=mt.INVALID_REQUEST, message="this bot answers forms only")
        flight = next(iter(self._flights)) if len(self._flights) == 1 else None
        if flight is None or flight.task.done() or flight.question is not None:
            log.warning("MCP server %s asked inside one of several calls; refused", self.name)
            return mt.ErrorData(
                code=mt.INVALID_REQUEST,
                message="this bot takes a question asked inside a call only while that call"
                " is the only one in flight (MCP 2026-07-28 has no such limit)",
            )
        live = _Live(
            key=f"live-{secrets.token_hex(8)}",
            message=params.message,
            schema=dict(params.requested_schema),
            reply=asyncio.get_running_loop().create_future(),
        )
        flight.question = live
        self._live[live.key] = flight
        flight.asked.set()
        try:
            return await asyncio.wait_for(asyncio.shield(live.reply), LIVE_QUESTION_MAX)
        except TimeoutError:
            return mt.ElicitResult(action="cancel")
        finally:
            self._live.pop(live.key, None)

    # -- the owner task ------------------------------------------------------

    async def _own(self) -> None:
        delay, longest = self._retry
        while not self._stop.is_set():
            try:
                await self._connected()
                delay = self._retry[0]
            except Exception as exc:
                self.error = _reason(exc)
                log.warning("MCP server %s (%s): %s", self.name, self.server.where, self.error)
            self._client = None
            self.state = "down"
            self._tried.set()
            with suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)
            delay = min(delay * 2, longest)

    async def _connected(self) -> None:
        """One connection, from open to close: list, then follow changes until it breaks."""
        async with self._connect() as client:
            self._broken.clear()
            await self._refresh(client)
            self._client, self.state, self.error = client, "connected", None
            self._tried.set()
            log.info("MCP server %s connected: %d tools", self.name, len(self._tools))
            async with self._listening(client):
                while not self._stop.is_set():
                    await _first(self._stop, self._broken, self._changed)
                    if self._broken.is_set():
                        raise McpUnavailable("the connection broke")
                    if self._changed.is_set():
                        self._changed.clear()
                        await self._refresh(client)
                        log.info("MCP server %s: %d tools now", self.name, len(self._tools))

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[Client]:
        async with AsyncExitStack() as stack:
            server = self.server
            if server.url is not None:
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(headers=dict(server.headers), timeout=httpx2.Timeout(30))
                )
                transport: Any = streamable_http_client(server.url, http_client=http)
            else:
                assert server.command is not None
                params = StdioServerParameters(
                    command=sys.executable if server.command in PYTHON else server.command,
                    args=list(server.args),
                    env=dict(server.env),
                    cwd=server.cwd,
                )
                # The real stderr (a replaced sys.stderr may have no file behind it).
                transport = stdio_client(params, errlog=sys.__stderr__ or sys.stderr)
            client = await stack.enter_async_context(
                Client(
                    transport,
                    mode=server.protocol,
                    message_handler=self._on_message,
                    # Declared so servers ask: on 2026-07-28 by InputRequiredResult (the
                    # call returns), before it inside the call (this callback).
                    elicitation_callback=self._legacy_question,
                    cache=None,
                )
            )
            yield client

    @asynccontextmanager
    async def _listening(self, client: Client) -> AsyncIterator[None]:
        """Ask for ``tools/list_changed`` where the revision needs asking (2026-07-28)."""
        if client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            yield  # notifications come unasked, to ``_on_message``
            return
        async with client.listen(tools_list_changed=True) as events:

            async def follow() -> None:
                async for _ in events:
                    self._changed.set()

            task = asyncio.create_task(follow(), name=f"mcp:{self.name}:listen")
            try:
                yield
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self._changed.set()
        elif isinstance(message, Exception):
            log.warning("MCP server %s: %s", self.name, _reason(message))
            self._broken.set()

    async def _refresh(self, client: Client) -> None:
        listed: list[mt.Tool] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            listed += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        tools: dict[str, Tool] = {}
        for tool in listed:
            built = self._tool(tool)
            if built is not None:
                tools[built.name] = built
        self._tools = tools

    def _tool(self, tool: mt.Tool) -> Tool | None:
        """The runtime's view of one server tool, or ``None`` (logged) when it cannot be one."""
        name = f"{self.name}{SEPARATOR}{tool.name}"
        if not TOOL_NAME.fullmatch(name):
            log.warning(
                "MCP server %s: tool %r skipped: %r is not a valid name", self.name, tool.name, name
            )
            return None
        schema = dict(tool.input_schema)
        try:
            model = schema_model(schema, f"{name}_arguments")
        except SchemaError as exc:
            log.warning(
                "MCP server %s: tool %r skipped: bad input schema (%s)",
                self.name,
                tool.name,
                exc.message,
            )
            return None
        remote = tool.name

        hints = tool.annotations
        idempotent = hints is not None and hints.idempotent_hint is True

        async def run(args: BaseModel, ctx: ToolContext) -> str:
            arguments = args.model_dump(mode="json")
            try:
                outcome = await self.call(remote, arguments, answer=Answer.to(ctx))
            except QuestionLost as lost:
                if not idempotent:
                    raise McpError(f"{lost} It was not run again: {_RECHECK}") from lost
                # Safe to start over, as any interrupted idempotent call is.
                log.info("MCP server %s: %s; calling %s again", self.name, lost, remote)
                outcome = await self.call(remote, arguments)
            if isinstance(outcome, Question):
                ctx.suspend(outcome.payload(), answer_schema=outcome.schema)
            return outcome

        return Tool(
            name=name,
            description=tool.description or tool.title or f"{tool.name} (MCP server {self.name})",
            fn=run,
            input_model=model,
            schema=schema,
            require_approval=self.server.needs_approval(tool),
            idempotent=idempotent,
            unpack_args=False,
            context_param="ctx",
            source=self.name,
            hears_declines=True,
        )


def result_text(result: mt.CallToolResult) -> str:
    """A tool result as text for the model: its text blocks, else its structured content."""
    texts: list[str] = []
    for block in result.content:
        if isinstance(block, mt.TextContent):
            texts.append(block.text)
        else:
            texts.append(f"[{block.type} content]")
    if texts:
        return "\n".join(texts)
    if result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return ""


async def _first(*events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set."""
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)


def _reason(exc: BaseException) -> str:
    """One line for an exception, unwrapping the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_reason(e) for e in exc.exceptions)
    return str(exc) or type(exc).__name__


def mcp_servers(agent: Agent) -> list[McpTools]:
    """The MCP connections of an agent tree, each once, top-down."""
    found: list[McpTools] = []
    todo = [agent]
    while todo:
        current = todo.pop(0)
        found += [s for s in current.tool_sources if isinstance(s, McpTools) and s not in found]
        todo += current.agents.values()
    return found
