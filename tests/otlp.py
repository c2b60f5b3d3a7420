"""A local OTLP/HTTP collector for tests: it receives what the real exporter sends.

``OtlpReceiver`` serves ``POST /v1/traces`` on 127.0.0.1 (a random port), decodes each
``ExportTraceServiceRequest`` (protobuf, gzip-compressed or not) with opentelemetry-proto
and keeps its spans as plain values. It can refuse the next requests (HTTP 503, as a
collector under load does), hold every request unanswered (a collector that hangs), and
be stopped, leaving a port nobody listens on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, TypeAlias

from aiohttp import web
from aiohttp.test_utils import TestServer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

Value: TypeAlias = "str | bool | int | float | bytes | list[Value] | dict[str, Value] | None"
"""An attribute's value, as Python has it."""

StatusName = Literal["unset", "ok", "error"]

PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True, kw_only=True)
class ReceivedEvent:
    """An event of a received span."""

    name: str
    time_ns: int
    attributes: dict[str, Value]


@dataclass(frozen=True, kw_only=True)
class ReceivedSpan:
    """A span as the collector got it; ids in hex, ``parent_span_id`` empty for a root."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    attributes: dict[str, Value]
    start_ns: int
    end_ns: int
    status: StatusName
    status_message: str
    events: tuple[ReceivedEvent, ...]
    scope: str
    """The name of the tracer that made it."""
    service_name: str
    """The ``service.name`` of its resource."""


class OtlpReceiver:
    """The collector; use as ``async with OtlpReceiver() as receiver`` and point the
    exporter at ``receiver.url`` (``OTEL_EXPORTER_OTLP_ENDPOINT``)."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        """Every span received, in the order they came."""
        self.requests: list[Mapping[str, str]] = []
        """The headers of every export request (names in lower case), refused ones included."""
        self.refused = 0
        """Requests answered with an error status (``fail_next``)."""
        self._to_refuse = 0
        self._hung = False
        self._released = asyncio.Event()
        self._received = asyncio.Condition()
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._server = TestServer(app, host="127.0.0.1")
        self._url = ""

    @property
    def url(self) -> str:
        """The collector's base URL; the exporter appends ``/v1/traces``."""
        return self._url

    def fail_next(self, count: int) -> None:
        """Answer the next ``count`` requests 503 (with ``Retry-After: 0``) and keep
        nothing of them."""
        self._to_refuse = count

    def hang(self) -> None:
        """Answer no request from now on (until the receiver exits)."""
        self._hung = True

    async def stop(self) -> None:
        """Stop listening: the collector is down from now on (``url`` is kept)."""
        await self._server.close()

    async def wait_for(
        self, predicate: Callable[[list[ReceivedSpan]], bool], *, within: float = 10.0
    ) -> list[ReceivedSpan]:
        """Wait until the spans received so far satisfy ``predicate``; return them.

        Raises:
            TimeoutError: ``within`` seconds passed first.
        """
        async with self._received:
            await asyncio.wait_for(self._received.wait_for(lambda: predicate(self.spans)), within)
        return list(self.spans)

    def named(self, name: str) -> ReceivedSpan:
        """The one received span called ``name``."""
        (span,) = (span for span in self.spans if span.name == name)
        return span

    async def __aenter__(self) -> OtlpReceiver:
        await self._server.start_server()
        self._url = str(self._server.make_url("")).removesuffix("/")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._released.set()
        await self._server.close()

    async def _traces(self, request: web.Request) -> web.Response:
        self.requests.append({name.lower(): value for name, value in request.headers.items()})
        if self._hung:
            await self._released.wait()
            return web.Response(status=503)
        if self._to_refuse:
            self._to_refuse -= 1
            self.refused += 1
            return web.Response(status=503, headers={"Retry-After": "0"})
        if request.content_type != PROTOBUF:
            return web.Response(status=415, text=f"expected {PROTOBUF}")
        # aiohttp has already undone a Content-Encoding (gzip, deflate).
        export = ExportTraceServiceRequest.FromString(await request.read())
        async with self._received:
            self.spans.extend(_spans_of(export))
            self._received.notify_all()
        body = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type=PROTOBUF)


def _spans_of(export: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    received: list[ReceivedSpan] = []
    for resource_spans in export.resource_spans:
        service = _attributes(resource_spans.resource.attributes).get("service.name")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                received.append(_span(span, scope=scope_spans.scope.name, service=str(service)))
    return received


def _span(span: Span, *, scope: str, service: str) -> ReceivedSpan:
    return ReceivedSpan(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex(),
        name=span.name,
        attributes=_attributes(span.attributes),
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        status=_STATUSES[span.status.code],
        status_message=span.status.message,
        events=tuple(
            ReceivedEvent(
                name=event.name,
                time_ns=event.time_unix_nano,
                attributes=_attributes(event.attributes),
            )
            for event in span.events
        ),
        scope=scope,
        service_name=service,
    )


_STATUSES: dict[int, StatusName] = {
    Status.STATUS_CODE_UNSET: "unset",
    Status.STATUS_CODE_OK: "ok",
    Status.STATUS_CODE_ERROR: "error",
}


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, Value]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> Value:
    match value.WhichOneof("value"):
        case "string_value":
            return value.string_value
        case "bool_value":
            return value.bool_value
        case "int_value":
            return value.int_value
        case "double_value":
            return value.double_value
        case "bytes_value":
            return value.bytes_value
        case "array_value":
            return [_value(item) for item in value.array_value.values]
        case "kvlist_value":
            return _attributes(value.kvlist_value.values)
        case _:
            return None
