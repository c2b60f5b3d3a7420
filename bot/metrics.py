"""The bot's Prometheus metrics, kept and exposed by ``prometheus-client``.

Each ``Metrics`` has its own registry, so several bots in one process (tests,
benchmarks) count apart; ``GET /metrics`` renders it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from prometheus_client import (
    CONTENT_TYPE_PLAIN_0_0_4,
    CollectorRegistry,
    Counter,
    Gauge,
    disable_created_metrics,
    generate_latest,
)

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
"""The text format every Prometheus scraper reads."""

# A ``*_created`` series per counter doubles the output for a number nobody
# charts; the process start time says the same. Applies to counters made after.
disable_created_metrics()  # type: ignore[no-untyped-call]

DecisionOutcome = Literal["approved", "declined", "voted", "refused", "stale", "expired"]
"""``voted``: an approval counted towards a quorum not yet reached; ``refused``: the
policy said no (or the person already voted); ``stale``: the call was already
decided, expired or unknown at click time; ``expired``: resolved by the expiry sweep."""


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
        self.background_tasks = Gauge(
            "approval_bot_background_tasks", "Background tasks running now.", registry=self.registry
        )
        self.background_tasks.set_function(background_tasks)

    def decided(self, outcome: DecisionOutcome) -> None:
        """Count one click or expiry outcome."""
        self.decisions.labels(outcome).inc()

    def value(self, name: str, **labels: str) -> float:
        """The current value of one series (``approval_bot_clicks_total``), 0 if never counted."""
        return self.registry.get_sample_value(name, labels) or 0.0

    def render(self) -> bytes:
        """All metrics in the Prometheus text format."""
        return generate_latest(self.registry)
