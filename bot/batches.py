"""Cards of several calls (the policy's ``batch``): how each of their calls reads now,
kept beside the card, and the redraw when one of them changes.

Each call of such a card is decided on its own, maybe on two replicas at once; the
card shows them all. So its state (a ``BatchCard``) is kept in the chat state, and a
change to one call is drawn under the card's lock, from that state: read it, put the
call's new card in its line, keep it, show it. The last card shown is the latest.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Final, Protocol

from agents import LockTimeout

from .chat_state import CardPlace, CardState, NoteState
from .documents import dump_view, load_view
from .types import ApprovalCard, BatchCard, View

KEPT: Final = timedelta(days=1)
"""How long after the last of its calls could be decided a card of several calls is kept
(its lines are redrawn from it: an expiry, a stop)."""


class BatchState(CardState, NoteState, Protocol):
    """Where the state of cards of several calls is kept, and their locks."""


class Batches:
    """The cards of several calls, over the chat state ``chat``."""

    def __init__(self, chat: BatchState) -> None:
        self._chat = chat

    async def keep(self, key: str, batch: BatchCard) -> None:
        """Keep how each call of a card of several reads now, until a day after the last
        of them could be decided."""
        last = max(card.expires_at for card in batch.cards)
        ttl = (last - datetime.now(UTC) + KEPT).total_seconds()
        await self._chat.set_note(key, dump_view(batch).decode(), ttl=max(ttl, 1.0))

    async def of(self, place: CardPlace) -> BatchCard | None:
        """How a card of several calls reads now (``None``: not one, or no longer kept)."""
        if place.batch is None:
            return None
        stored = await self._chat.note(place.batch)
        if stored is None:
            return None
        view = load_view(stored)
        return view if isinstance(view, BatchCard) else None

    async def redraw(
        self, place: CardPlace, card: ApprovalCard, show: Callable[[View], Awaitable[None]]
    ) -> View:
        """Show (``show``) the card at ``place`` with the line of ``card``'s call as it
        now reads, under the card's lock; what was shown (the call's own card, when the
        card's state is no longer kept)."""
        assert place.batch is not None
        try:
            async with self._chat.card_lock(card.run_id, place.batch):
                return await self._redraw(place, card, show)
        except LockTimeout:  # better shown out of turn than not at all
            return await self._redraw(place, card, show)

    async def _redraw(
        self, place: CardPlace, card: ApprovalCard, show: Callable[[View], Awaitable[None]]
    ) -> View:
        assert place.batch is not None
        batch = await self.of(place)
        if batch is None:
            await show(card)
            return card
        lines = tuple(card if c.tool_call_id == card.tool_call_id else c for c in batch.cards)
        shown = BatchCard(cards=lines)
        await self.keep(place.batch, shown)
        await show(shown)
        return shown
