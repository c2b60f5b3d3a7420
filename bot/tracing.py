"""Traces exported to an OpenTelemetry collector, configured by the standard ``OTEL_*``
variables.

Tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)
is set, unless ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``. Spans go over
OTLP/HTTP (``http/protobuf``), the only protocol the bot speaks. The SDK reads the rest
from the process environment itself: ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``
(the service is ``approval-bot`` unless they name one), ``OTEL_EXPORTER_OTLP_HEADERS``,
``_TIMEOUT`` (10 s by default), ``_COMPRESSION`` and ``_CERTIFICATE`` (each also in a
``_TRACES_`` variant), ``OTEL_TRACES_SAMPLER`` and ``OTEL_BSP_*``.

A collector that is down or slow never holds the bot up: ending a span only queues it
(a full queue drops the oldest span), the batch processor's own thread does the
exporting and its retries (each batch within ``OTEL_EXPORTER_OTLP_TIMEOUT``), and
``Tracing.aclose`` waits for the last spans at most ``CLOSE_TIMEOUT``.

Code makes spans with the OpenTelemetry API, ``opentelemetry.trace.get_tracer(...)``;
the composition root makes this provider the global one (``Tracing.install``). Without
it, the API's tracers make no-op spans.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Final

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from .settings import SettingsError

log = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME: Final = "approval-bot"
"""The service the spans are from, unless ``OTEL_SERVICE_NAME`` (or ``service.name`` in
``OTEL_RESOURCE_ATTRIBUTES``) names another."""

TRACER_NAME: Final = "approval-bot"
"""The instrumentation scope of the bot's own spans."""

CLOSE_TIMEOUT: Final = 5.0
"""Seconds the spans still queued at close have to reach the collector; then they are
dropped and the close is over."""

PROTOCOL: Final = "http/protobuf"
"""The one OTLP protocol the bot exports with (``opentelemetry-exporter-otlp-proto-http``)."""

_ENDPOINTS: Final = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROTOCOLS: Final = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
"""The traces' own variable first: it wins over the general one."""


class Tracing:
    """The SDK's tracer provider exporting to the collector, and its bounded close."""

    def __init__(
        self, provider: TracerProvider, exporter: SpanExporter, *, close_timeout: float
    ) -> None:
        self.provider = provider
        self._exporter = exporter
        self._close_timeout = close_timeout

    def tracer(self, name: str = TRACER_NAME) -> trace.Tracer:
        """A tracer of this provider, whether or not it is the global one."""
        return self.provider.get_tracer(name)

    def install(self) -> None:
        """Make this the process's global provider, which ``opentelemetry.trace.get_tracer``
        serves. The composition root's call: the API takes one provider per process."""
        trace.set_tracer_provider(self.provider)

    async def aclose(self) -> None:
        """Export the spans still queued and stop, waiting at most the close timeout
        (without blocking the event loop). Spans ended afterwards are dropped."""
        closing = threading.Thread(target=self.provider.shutdown, name="tracing-close", daemon=True)
        closing.start()
        await asyncio.to_thread(closing.join, self._close_timeout)
        if closing.is_alive():
            # The collector is down or slow: stopping the exporter ends its retries (their
            # spans are dropped); a request the collector holds open runs out on its own,
            # in that thread, within OTEL_EXPORTER_OTLP_TIMEOUT.
            log.warning("tracing: spans not exported within %s s at close", self._close_timeout)
            self._exporter.shutdown()


def tracing_from_env(*, close_timeout: float = CLOSE_TIMEOUT) -> Tracing | None:
    """The tracing the ``OTEL_*`` variables describe, or ``None`` when they switch it off
    (no endpoint set). Nothing is installed globally: see ``Tracing.install``.

    Raises:
        SettingsError: The variables ask for a protocol or an exporter the bot does not
            have (``grpc``, ``zipkin``...), or the SDK rejects their values.
    """
    if not any(os.environ.get(name) for name in _ENDPOINTS):
        return None
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporters = _names(os.environ.get("OTEL_TRACES_EXPORTER", "otlp"))
    if "none" in exporters:
        return None
    problems = [
        f"OTEL_TRACES_EXPORTER={name}: the bot exports traces with otlp only"
        for name in exporters - {"otlp"}
    ]
    protocol = next((name for name in _PROTOCOLS if os.environ.get(name)), None)
    if protocol is not None and os.environ[protocol].strip() != PROTOCOL:
        problems.append(
            f"{protocol}={os.environ[protocol].strip()}: the bot exports traces over OTLP/HTTP"
            f" only; use {PROTOCOL} (the collector's port 4318)"
        )
    if problems:
        raise SettingsError(problems)
    try:
        exporter = OTLPSpanExporter()
        provider = TracerProvider(resource=_resource(), shutdown_on_exit=False)
        provider.add_span_processor(BatchSpanProcessor(exporter))
    except (ValueError, RuntimeError) as exc:
        raise SettingsError([f"tracing (OTEL_* variables): {exc}"]) from exc
    log.info("tracing: spans exported over OTLP/HTTP to %s", _endpoint())
    return Tracing(provider, exporter, close_timeout=close_timeout)


def _names(value: str) -> set[str]:
    return {name.strip().lower() for name in value.split(",") if name.strip()}


def _resource() -> Resource:
    """The SDK's resource from the environment, named ``approval-bot`` when it names no
    service (the SDK's own default is ``unknown_service``)."""
    from_env = OTELResourceDetector().detect().attributes
    return Resource.create({} if SERVICE_NAME in from_env else {SERVICE_NAME: DEFAULT_SERVICE_NAME})


def _endpoint() -> str:
    """Where the exporter sends, for the log (as ``OTLPSpanExporter`` works it out)."""
    traces = os.environ.get(_ENDPOINTS[0])
    if traces:
        return traces
    return os.environ[_ENDPOINTS[1]].removesuffix("/") + "/v1/traces"
