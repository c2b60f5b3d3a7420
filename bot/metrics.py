"""The bot's Prometheus metrics, kept and exposed by ``prometheus-client``.

Each ``Metrics`` has its own registry, so several bots in one process (tests,
benchmarks) count apart; ``GET /metrics`` renders it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Literal, Protocol, runtime_checkable

from opentelemetry import trace
from prometheus_client import (
    CONTENT_TYPE_PLAIN_0_0_4,
    CollectorRegistry,
    Counter,
    Gauge,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.registry import Collector

from agents import Usage
from agents.mcp import McpTools

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
"""The text format every Prometheus scraper reads."""
OPENMETRICS = "application/openmetrics-text"
"""What a scraper that reads exemplars asks for."""

# A ``*_created`` series per counter doubles the output for a number nobody
# charts; the process start time says the same. Applies to counters made after.
disable_created_metrics()  # type: ignore[no-untyped-call]

DecisionOutcome = Literal[
    "approved",
    "declined",
    "voted",
    "refused",
    "stale",
    "expired",
    "answered",
    "cancelled",
    "asked_again",
    "responded",
]
"""``answered``/``cancelled``: a question's form or its Cancel button; ``voted``: an
approval counted towards a quorum not yet reached; ``asked_again``: an edit into another
rule of the policy, asked anew on a new card; ``responded``: an approver answered for
the tool instead of running it; ``refused``: the
policy said no (or the person already voted); ``stale``: the call was already
decided, expired or unknown at click time; ``expired``: resolved by the expiry sweep."""


@runtime_checkable
class Paced(Protocol):
    """A messenger that paces its calls to the platform (rate limits, retries)."""

    @property
    def waiting(self) -> int:
        """Calls waiting now on a limit or a retry."""
        ...


class Metrics:
    """The bot's counters; ``render()`` is the body of ``GET /metrics``."""

    def __init__(self, *, background_tasks: Callable[[], float] = lambda: 0.0) -> None:
        self.registry = CollectorRegistry()

        def counter(name: str, text: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, text, labels, registry=self.registry)

        self.messages_received = counter(
            "approval_bot_messages_received", "Messages received from people."
        )
        self.messages_duplicate = counter(
            "approval_bot_messages_duplicate", "Redelivered messages dropped by dedupe."
        )
        self.clicks = counter("approval_bot_clicks", "Approve and Decline clicks received.")
        self.decisions = counter(
            "approval_bot_decisions",
            "Click and expiry outcomes (approved, declined, voted, refused, stale, expired).",
            ("outcome",),
        )
        self.runs_started = counter("approval_bot_runs_started", "Agent runs started.")
        self.runs_finished = counter(
            "approval_bot_runs_finished", "Agent runs that finished with an answer."
        )
        self.runs_failed = counter("approval_bot_runs_failed", "Agent runs that failed.")
        self.runs_stopped = counter(
            "approval_bot_runs_stopped", "Agent runs someone stopped (Stop, or a word)."
        )
        self.feedback = counter(
            "approval_bot_feedback", "People's 👍 / 👎 on the bot's answers.", ("rating",)
        )
        self.tokens = counter(
            "approval_bot_model_tokens",
            "Model tokens of runs that ended, by kind (input, output, cache_read, cache_write).",
            ("kind",),
        )
        self.background_tasks = Gauge(
            "approval_bot_background_tasks", "Background tasks running now.", registry=self.registry
        )
        self.background_tasks.set_function(background_tasks)
        self.platform_waiting = Gauge(
            "approval_bot_platform_calls_waiting",
            "Calls to a chat platform waiting now on its rate limit or a retry.",
            ("platform",),
            registry=self.registry,
        )

    def watch_platform(self, platform: str, messenger: object) -> None:
        """Expose how many of a platform's calls wait on its limits, when its messenger
        says (a ``Paced`` one)."""
        if isinstance(messenger, Paced):
            paced = messenger
            self.platform_waiting.labels(platform).set_function(lambda: float(paced.waiting))

    def watch_mcp(self, servers: Sequence[McpTools]) -> None:
        """Expose each MCP server's calls, errors and seconds spent, read at every scrape."""
        if servers:
            self.registry.register(_McpCollector(tuple(servers)))

    def used(self, usage: Usage) -> None:
        """Count the tokens of a run that ended (prompt cache reads and writes apart)."""
        self.tokens.labels("input").inc(usage.input_tokens)
        self.tokens.labels("output").inc(usage.output_tokens)
        self.tokens.labels("cache_read").inc(usage.cache_read_tokens)
        self.tokens.labels("cache_write").inc(usage.cache_write_tokens)

    def decided(self, outcome: DecisionOutcome) -> None:
        """Count one click or expiry outcome, with the trace it happened in as the
        sample's exemplar (shown to scrapers that ask for OpenMetrics)."""
        self.decisions.labels(outcome).inc(exemplar=_exemplar())

    def value(self, name: str, **labels: str) -> float:
        """The current value of one series (``approval_bot_clicks_total``), 0 if never counted."""
        return self.registry.get_sample_value(name, labels) or 0.0

    def render(self, accept: str = "") -> tuple[bytes, str]:
        """All metrics, and their content type: OpenMetrics (with exemplars) when the
        scraper's ``Accept`` header asks for it, else the Prometheus text format."""
        if OPENMETRICS in accept:
            body: bytes = openmetrics.generate_latest(self.registry)  # type: ignore[no-untyped-call]
            return body, str(openmetrics.CONTENT_TYPE_LATEST)
        return generate_latest(self.registry), CONTENT_TYPE


def _exemplar() -> dict[str, str] | None:
    """The current span's trace and span ids, while one is being recorded."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid or not context.trace_flags.sampled:
        return None
    return {
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
    }


class _McpCollector(Collector):
    """Per-server counters of MCP tool calls, from ``McpTools.stats``."""

    def __init__(self, servers: tuple[McpTools, ...]) -> None:
        self._servers = servers

    def collect(self) -> Iterator[Metric]:
        calls = CounterMetricFamily(
            "approval_bot_mcp_calls", "MCP tool calls, per server.", labels=["server"]
        )
        errors = CounterMetricFamily(
            "approval_bot_mcp_errors",
            "MCP tool calls that failed (error result, timeout, connection), per server.",
            labels=["server"],
        )
        seconds = CounterMetricFamily(
            "approval_bot_mcp_call_seconds", "Seconds spent in MCP tool calls.", labels=["server"]
        )
        connected = GaugeMetricFamily(
            "approval_bot_mcp_connected", "1 while the MCP server is connected.", labels=["server"]
        )
        for server in self._servers:
            calls.add_metric([server.name], server.stats.calls)
            errors.add_metric([server.name], server.stats.errors)
            seconds.add_metric([server.name], server.stats.seconds)
            connected.add_metric([server.name], 1.0 if server.state == "connected" else 0.0)
        yield from (calls, errors, seconds, connected)
