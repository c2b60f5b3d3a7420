"""A few Prometheus counters in the text exposition format.

A dozen numbers do not justify a dependency: counters live in this process and
are rendered by hand (format version 0.0.4), which every Prometheus scraper reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

DecisionOutcome = Literal["approved", "declined", "voted", "refused", "stale", "expired"]
"""``voted``: an approval counted towards a quorum not yet reached; ``refused``: the
policy said no (or the person already voted); ``stale``: the call was already
decided, expired or unknown at click time; ``expired``: resolved by the expiry sweep."""


@dataclass
class Counter:
    """A monotonically increasing number, optionally split by one label."""

    name: str
    help: str
    label: str | None = None
    _values: dict[str, float] = field(default_factory=dict)

    def inc(self, value: str = "", amount: float = 1.0) -> None:
        """Add ``amount`` (to the series of label ``value`` when the counter has a label)."""
        self._values[value] = self._values.get(value, 0.0) + amount

    def get(self, value: str = "") -> float:
        """The current count (of one label value)."""
        return self._values.get(value, 0.0)

    def render(self) -> list[str]:
        """Exposition lines for this counter."""
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        if self.label is None:
            lines.append(f"{self.name} {_number(self.get())}")
        else:
            for value, count in sorted(self._values.items()):
                lines.append(f'{self.name}{{{self.label}="{_escape(value)}"}} {_number(count)}')
        return lines


@dataclass
class Gauge:
    """A number read at scrape time from a callback."""

    name: str
    help: str
    read: Callable[[], float]

    def render(self) -> list[str]:
        """Exposition lines for this gauge."""
        return [
            f"# HELP {self.name} {self.help}",
            f"# TYPE {self.name} gauge",
            f"{self.name} {_number(self.read())}",
        ]


class Metrics:
    """The bot's counters; ``render()`` is the body of ``GET /metrics``."""

    def __init__(self, *, background_tasks: Callable[[], float] = lambda: 0.0) -> None:
        self.messages_received = Counter(
            "approval_bot_messages_received_total", "Messages received from people."
        )
        self.messages_duplicate = Counter(
            "approval_bot_messages_duplicate_total", "Redelivered messages dropped by dedupe."
        )
        self.clicks = Counter("approval_bot_clicks_total", "Approve and Decline clicks received.")
        self.decisions = Counter(
            "approval_bot_decisions_total",
            "Click and expiry outcomes (approved, declined, voted, refused, stale, expired).",
            label="outcome",
        )
        self.runs_started = Counter("approval_bot_runs_started_total", "Agent runs started.")
        self.runs_finished = Counter(
            "approval_bot_runs_finished_total", "Agent runs that finished with an answer."
        )
        self.runs_failed = Counter("approval_bot_runs_failed_total", "Agent runs that failed.")
        self.background_tasks = Gauge(
            "approval_bot_background_tasks", "Background tasks running now.", background_tasks
        )

    def decided(self, outcome: DecisionOutcome) -> None:
        """Count one click or expiry outcome."""
        self.decisions.inc(outcome)

    def render(self) -> str:
        """All metrics in the Prometheus text format."""
        metrics: list[Counter | Gauge] = [
            self.messages_received,
            self.messages_duplicate,
            self.clicks,
            self.decisions,
            self.runs_started,
            self.runs_finished,
            self.runs_failed,
            self.background_tasks,
        ]
        return "\n".join(line for metric in metrics for line in metric.render()) + "\n"


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
