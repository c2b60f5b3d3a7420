"""The runtime's spans (OpenTelemetry's API: no-ops until a program installs an SDK).

A run keeps the trace it started in (``RunSnapshot.trace``, a W3C ``traceparent``
carrier), and so does each call it waits on (``PendingCall.trace``): whoever decides
the call later, on any replica, after a restart, continues that trace (``context_of``).
Model turns and tool calls are spans of whatever is current when they happen, named
and attributed as OpenTelemetry's GenAI conventions say.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACER = trace.get_tracer("approval-bot")
"""The runtime's and the chat core's tracer (the bot's instrumentation scope)."""

_PROPAGATOR = TraceContextTextMapPropagator()


def carried() -> dict[str, str] | None:
    """The current trace as a carrier to keep (``None``: no trace is being recorded)."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier or None


def context_of(carrier: Mapping[str, str] | None) -> otel_context.Context | None:
    """The trace a kept carrier continues, to start spans in (``None``: none kept)."""
    if not carrier:
        return None
    return _PROPAGATOR.extract(dict(carrier))
