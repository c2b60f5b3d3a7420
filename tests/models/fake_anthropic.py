"""A local fake of the Anthropic Messages API, for driving the real SDK in tests.

``FakeAnthropic`` serves ``POST /v1/messages`` on 127.0.0.1, records each request
(JSON body and headers) and answers from a queue of scripted replies: SSE streams
with the real event sequence, JSON messages, API errors and garbled streams.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer


@dataclass(frozen=True, kw_only=True)
class RecordedRequest:
    """One request the fake received; header names are lower case."""

    body: dict[str, Any]
    headers: Mapping[str, str]


@dataclass(frozen=True, kw_only=True)
class Reply:
    """A scripted answer: a JSON body (or raw bytes), or SSE chunks written one at a time."""

    status: int = 200
    json_body: dict[str, Any] | None = None
    raw_body: bytes | None = None
    sse_chunks: Sequence[bytes] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    drop_connection: bool = False
    hold: asyncio.Event | None = None
    """If set, the stream pauses after ``hold_after`` chunks (a message: before it is
    sent) until the event is set."""
    hold_after: int = 0

    @property
    def is_stream(self) -> bool:
        """Whether this reply answers a ``stream: true`` request."""
        return self.sse_chunks is not None


@dataclass(frozen=True, kw_only=True)
class Text:
    """A text block, sent as one ``text_delta`` per piece."""

    pieces: Sequence[str]


@dataclass(frozen=True, kw_only=True)
class ToolUse:
    """A tool_use block; in a stream its JSON input is split into ``pieces`` deltas.

    ``sent_json`` replaces the streamed JSON text, e.g. with the start of it, as
    when ``max_tokens`` cuts the block off.
    """

    id: str
    name: str
    input: dict[str, Any]
    pieces: int = 3
    sent_json: str | None = None


Block = Text | ToolUse


def sse(event: str, data: Mapping[str, Any]) -> bytes:
    """One server-sent event as the API writes it."""
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def split_evenly(text: str, pieces: int) -> list[str]:
    """``text`` cut into ``pieces`` consecutive parts (the last ones may be empty)."""
    size = -(-len(text) // pieces)
    return [text[i * size : (i + 1) * size] for i in range(pieces)]


def stream_reply(
    *blocks: Block,
    stop_reason: str = "end_turn",
    input_tokens: int = 25,
    output_tokens: int = 9,
    message_id: str = "msg_fake",
) -> Reply:
    """A streamed message with the real event sequence for ``blocks``."""
    chunks = [
        sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-fake",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": input_tokens, "output_tokens": 1},
                },
            },
        ),
        sse("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(blocks):
        chunks.extend(_block_events(index, block))
    chunks.append(
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        )
    )
    chunks.append(sse("message_stop", {"type": "message_stop"}))
    return Reply(sse_chunks=chunks, headers={"request-id": f"req_{message_id}"})


def _block_events(index: int, block: Block) -> list[bytes]:
    start: dict[str, Any]
    deltas: list[dict[str, Any]]
    match block:
        case Text(pieces=pieces):
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in pieces]
        case ToolUse(id=tool_id, name=name, input=tool_input, pieces=count, sent_json=sent):
            start = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
            text = json.dumps(tool_input) if sent is None else sent
            # The API opens every tool input with an empty partial_json.
            parts = ["", *split_evenly(text, count)] if text and text != "{}" else []
            deltas = [{"type": "input_json_delta", "partial_json": part} for part in parts]
    return [
        sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        ),
        *(
            sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            for delta in deltas
        ),
        sse("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


def message_reply(
    *blocks: Block,
    stop_reason: str = "end_turn",
    input_tokens: int = 25,
    output_tokens: int = 9,
    message_id: str = "msg_fake",
) -> Reply:
    """A non-streamed message (``stream`` absent or false) holding ``blocks``."""
    content: list[dict[str, Any]] = []
    for block in blocks:
        match block:
            case Text(pieces=pieces):
                content.append({"type": "text", "text": "".join(pieces)})
            case ToolUse(id=tool_id, name=name, input=tool_input):
                content.append(
                    {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}
                )
    return Reply(
        json_body={
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-fake",
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        },
        headers={"request-id": f"req_{message_id}"},
    )


def error_reply(status: int, error_type: str, message: str, *, retry_after_ms: int = 1) -> Reply:
    """An API error; ``retry-after-ms`` keeps the SDK's retry sleeps short."""
    return Reply(
        status=status,
        json_body={
            "type": "error",
            "error": {"type": error_type, "message": message},
            "request_id": "req_error",
        },
        headers={"retry-after-ms": str(retry_after_ms), "request-id": "req_error"},
    )


def overloaded_reply() -> Reply:
    """The API's 529 answer when Claude is overloaded."""
    return error_reply(529, "overloaded_error", "Overloaded")


def raw_stream_reply(*chunks: bytes, drop_connection: bool = False) -> Reply:
    """A stream of exactly these bytes (for garbled or truncated streams)."""
    return Reply(sse_chunks=chunks, drop_connection=drop_connection)


class FakeAnthropic:
    """The fake API server; use as ``async with FakeAnthropic() as fake``."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._replies: deque[Reply] = deque()
        self._held: list[asyncio.Event] = []
        self.models: set[str] = {"claude-sonnet-5-5"}
        """The models ``GET /v1/models/{id}`` knows."""
        self.keys: set[str] | None = None
        """The API keys the models endpoint accepts (``None``: any)."""
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_get("/v1/models/{model}", self._model)
        self._server = TestServer(app, host="127.0.0.1")

    @property
    def base_url(self) -> str:
        """The host root to pass as ``base_url`` (the SDK appends ``/v1/messages``)."""
        return str(self._server.make_url("/"))

    def script(self, *replies: Reply) -> None:
        """Queue replies, answered in order, one per request."""
        self._replies.extend(replies)
        self._held.extend(reply.hold for reply in replies if reply.hold is not None)

    @property
    def unused_replies(self) -> int:
        """Scripted replies no request has consumed."""
        return len(self._replies)

    async def __aenter__(self) -> FakeAnthropic:
        await self._server.start_server()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for hold in self._held:
            hold.set()  # a failed test may leave a stream waiting
        await self._server.close()

    async def _model(self, request: web.Request) -> web.Response:
        """One model's description, as the Models API answers it (401 for a key not in
        ``keys``, 404 for a model not in ``models``)."""
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
        key = request.headers.get("x-api-key", bearer)
        if self.keys is not None and key not in self.keys:
            return _api_error(401, "authentication_error", "invalid x-api-key")
        model = request.match_info["model"]
        if model not in self.models:
            return _api_error(404, "not_found_error", f"model: {model}")
        return web.json_response(
            {
                "type": "model",
                "id": model,
                "display_name": model,
                "created_at": "2026-01-01T00:00:00Z",
            }
        )

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(
            RecordedRequest(body=body, headers={k.lower(): v for k, v in request.headers.items()})
        )
        if not self._replies:
            return _fake_error(500, "the fake has no scripted reply left")
        reply = self._replies.popleft()
        if reply.status < 400 and reply.is_stream != bool(body.get("stream")):
            return _fake_error(
                400, f"scripted stream={reply.is_stream}, request stream={body.get('stream')}"
            )
        if reply.raw_body is not None:
            return web.Response(
                body=reply.raw_body, status=reply.status, content_type="application/json"
            )
        if reply.sse_chunks is None:
            if reply.hold is not None:  # a message that is slow to come
                await reply.hold.wait()
            return web.json_response(
                reply.json_body, status=reply.status, headers=dict(reply.headers)
            )
        response = web.StreamResponse(
            status=reply.status,
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                **reply.headers,
            },
        )
        await response.prepare(request)
        for sent, chunk in enumerate(reply.sse_chunks):
            if reply.hold is not None and sent == reply.hold_after:
                await reply.hold.wait()
            await response.write(chunk)
        if reply.drop_connection:
            assert request.transport is not None
            request.transport.close()
            return response
        await response.write_eof()
        return response


def _api_error(status: int, error_type: str, message: str) -> web.Response:
    return web.json_response(
        {"type": "error", "error": {"type": error_type, "message": message}},
        status=status,
        headers={"x-should-retry": "false", "request-id": "req_error"},
    )


def _fake_error(status: int, message: str) -> web.Response:
    # x-should-retry: false so a test's mistake shows at once rather than after retries.
    return web.json_response(
        {"type": "error", "error": {"type": "api_error", "message": f"FakeAnthropic: {message}"}},
        status=status,
        headers={"x-should-retry": "false"},
    )
