"""What the agent's operations on whole runs return: expired calls, recovered runs,
stopped runs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .chunks import PendingInfo
from .stream import AgentStream


@dataclass(frozen=True, kw_only=True)
class ExpiredCall:
    """A pending call the expiry sweep resolved; consume ``stream`` to finish its run."""

    pending: PendingInfo
    stream: AgentStream


@dataclass(frozen=True, kw_only=True)
class RecoveredRun:
    """A run a crash left in flight, dealt with by ``recover_interrupted``.

    Either ``stream`` goes on with it (a model turn asked again, a cut-off batch
    settled, a decision that is safe to repeat: a decline, an expiry, an
    idempotent tool): consume it; or the run is now ``interrupted`` and
    ``error`` says so, to be told to the people waiting.
    ``pending`` is the decided call involved, if any; ``dropped`` lists every
    call the interrupted run still showed, which nobody can decide any more.
    """

    run_id: str
    thread_id: str | None
    requester: str | None
    metadata: dict[str, Any]
    pending: PendingInfo | None
    stream: AgentStream | None
    error: str | None
    created_at: datetime
    """When the run began (what it showed before the crash was shown since)."""
    trace: dict[str, str] | None = None
    """The trace the run started in (W3C carrier), for what follows to continue it."""
    dropped: tuple[PendingInfo, ...] = ()
    """Calls that were still waiting on the interrupted run (now void)."""


@dataclass(frozen=True, kw_only=True)
class StoppedRun:
    """A run someone stopped (``Agent.stop_run``).

    ``dropped`` are the calls that waited on it, which nobody can decide any more.
    ``ended``: the run is over now; otherwise work was under way, and whoever
    drives it ends it at its next step (its stream finishes ``stopped``).
    """

    run_id: str
    thread_id: str | None
    requester: str | None
    metadata: dict[str, Any]
    stopped_by: str | None
    dropped: tuple[PendingInfo, ...]
    ended: bool
