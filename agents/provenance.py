"""Where a request came from, for the audit log: the client or platform it arrived
through, and the names of the people in it as they were at that moment.

A caller that handles a request (a click, a message, an API call) says so once
(``arriving``); every audit entry written while it is handled, by the runtime or
by the caller, carries it (``Origin.stamp``). It rides on a context variable, as
a trace's context does: work the request starts (tasks) inherits it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from .snapshot import AuditEntry


@dataclass(frozen=True)
class Origin:
    """Where the request being handled came from."""

    via: str | None = None
    """What it arrived through, as the caller names it (the chat core: a platform's
    name, ``web`` for a decision page, ``client:<name>`` for a peer agent)."""
    names: Mapping[str, str] = field(default_factory=dict)
    """Display names by person id, as the request gave them."""

    def name(self, ids: str | None) -> str | None:
        """The name of ``ids`` (one id, or a quorum's ids joined by commas), where known."""
        if not ids:
            return None
        names = [self.names.get(one) for one in ids.split(",")]
        if not any(names):
            return None
        return ", ".join(name or one for name, one in zip(names, ids.split(","), strict=True))

    def stamp(self, entry: AuditEntry) -> AuditEntry:
        """``entry`` with what this origin knows of it and it did not say yet."""
        update = {
            "via": entry.via or self.via,
            "actor_name": entry.actor_name or self.name(entry.actor),
            "requester_name": entry.requester_name or self.name(entry.requester),
        }
        if all(getattr(entry, key) == value for key, value in update.items()):
            return entry
        return entry.model_copy(update=update)


_NOWHERE = Origin()
_ORIGIN: ContextVar[Origin | None] = ContextVar("origin", default=None)


def current() -> Origin:
    """The origin of the request being handled (an empty one outside any)."""
    return _ORIGIN.get() or _NOWHERE


@contextmanager
def arriving(via: str | None, names: Mapping[str, str | None] | None = None) -> Iterator[Origin]:
    """Handle a request that came ``via`` a platform or client, from people named
    ``names`` (by id; unknown names left out), until the block ends."""
    known = {who: name for who, name in (names or {}).items() if name}
    origin = Origin(via=via, names={**current().names, **known})
    token = _ORIGIN.set(origin)
    try:
        yield origin
    finally:
        _ORIGIN.reset(token)
