"""What the ack benches share: a figure of ours beside a bare app's, and the table.

``slack_bench`` and ``teams_bench`` each time the adapter and a bare app of the same
SDK under the same load in one run; every row is printed with its ratio to the
bare app's row.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass


def percentile(samples: list[float], fraction: float) -> float:
    """The sample at ``fraction`` (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@dataclass
class Row:
    """One line of the report."""

    store: str
    scenario: str
    concurrent: int
    samples: list[float]
    baseline: Row | None = None
    """The bare app's figures for the same load."""

    @property
    def p50(self) -> float:
        return statistics.median(self.samples)

    @property
    def p99(self) -> float:
        return percentile(self.samples, 0.99)

    def cells(self) -> list[str]:
        base = self.baseline
        return [
            self.store,
            self.scenario,
            str(self.concurrent),
            f"{self.p50:.1f}",
            f"{self.p99:.1f}",
            f"{max(self.samples):.1f}",
            f"{base.p50:.1f}" if base else "-",
            f"{base.p99:.1f}" if base else "-",
            f"{self.p50 / base.p50:.2f}x" if base else "-",
            f"{self.p99 / base.p99:.2f}x" if base else "-",
        ]


HEADER = [
    "store",
    "scenario",
    "concurrent",
    "p50 ms",
    "p99 ms",
    "max ms",
    "bare p50",
    "bare p99",
    "p50 ratio",
    "p99 ratio",
]


def table(title: str, rows: list[Row]) -> str:
    """``title`` and the rows, aligned (milliseconds)."""
    lines = [HEADER, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    return "\n".join(
        [
            title,
            *(
                "  ".join(
                    cell.ljust(w) if i < 2 else cell.rjust(w)
                    for i, (cell, w) in enumerate(zip(line, widths, strict=True))
                )
                for line in lines
            ),
        ]
    )
