"""Deliveries written to an intake queue in batches (SQLite, PostgreSQL): what each
is, and which of a batch are written.

The backends read what a batch needs (the followed threads it asks about, the
claims on its dedupe keys), ``accept`` decides, and they write the rest. The
outcome is the one writing them one by one in arrival order gives: a delivery sees
the claims and follows of those before it in its batch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from .base import ThreadNote


@dataclass(frozen=True, kw_only=True)
class Delivery:
    """One delivery to write (``ChatState.enqueue``'s arguments, made ready)."""

    body: str
    keys: tuple[str, ...]
    now: float
    """When it was handed in: a dedupe key whose claim lasts past this is live."""
    expires_at: float
    """Until when its keys are claimed."""
    note: ThreadNote | None
    reference: str | None
    """The note's reference, as JSON."""
    sweep: bool
    """Remove lapsed dedupe claims first (now and then, so the table stays small)."""


def delivery(
    body: str,
    keys: Sequence[str],
    *,
    ttl: float,
    note: ThreadNote | None,
    now: float,
    sweep: bool,
) -> Delivery:
    """``ChatState.enqueue``'s arguments as a ``Delivery`` handed in at ``now``."""
    reference = note.reference if note is not None else None
    return Delivery(
        body=body,
        keys=tuple(keys),
        now=now,
        expires_at=now + ttl,
        note=note,
        reference=json.dumps(reference, ensure_ascii=False) if reference is not None else None,
        sweep=sweep,
    )


def accept(
    deliveries: Sequence[Delivery], followed: set[str], claims: dict[str, float]
) -> list[bool]:
    """Which of ``deliveries`` are written, in order; not a copy, nor a reply in a
    thread not followed.

    ``followed`` holds the threads followed among those the deliveries ask about, and
    ``claims`` until when each of their keys that has a claim is claimed (lapsed ones
    included); both are updated with what the accepted ones claim and follow.
    """
    taken: list[bool] = []
    for d in deliveries:
        note = d.note
        if note is not None and note.only_if_followed and note.thread_id not in followed:
            taken.append(False)
            continue
        if any(claims.get(key, d.now) > d.now for key in d.keys):
            taken.append(False)  # a copy
            continue
        for key in d.keys:
            claims[key] = d.expires_at
        if note is not None and note.follow:
            followed.add(note.thread_id)
        taken.append(True)
    return taken
