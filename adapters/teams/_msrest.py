"""One fix to a library botbuilder 4.17.1 pins: msrest's retry set-up, made linear.

Every Bot Connector client botbuilder creates (one per proactive message and
per turn) builds msrest's retry policy, whose status list is computed as
``[i for i in range(999) if i not in safe_codes]`` with ``safe_codes`` a
500-entry *list*: half a million comparisons, about 4 ms of CPU each time, which
under a burst of activities is most of what the Teams adapter spends. A frozenset
of the same codes gives the same policy in microseconds.
"""

from __future__ import annotations

from msrest.universal_http.requests import ClientRetryPolicy


def apply() -> None:
    """Make the membership test a set lookup (idempotent; same codes, same policy)."""
    ClientRetryPolicy.safe_codes = frozenset(ClientRetryPolicy.safe_codes)  # type: ignore[assignment]
