"""The adapter port: what a platform adapter calls on the core.

The other direction is ``Messenger`` (``types``): what the core calls on an
adapter. An adapter needs nothing else of the core; ``ChatBot`` is one.
"""

from __future__ import annotations

from typing import Protocol

from .chat_state import AdapterState
from .types import (
    ApprovalCard,
    Click,
    ClickResult,
    Inbox,
    IncomingMessage,
    Messenger,
    Prompt,
    SuggestedPrompt,
    Text,
    ThreadKey,
)


class ChatCore(Protocol):
    """The chat core as an adapter sees it."""

    @property
    def chat(self) -> AdapterState:
        """The chat state an adapter may use: conversation references, followed threads
        and notes."""
        ...

    @property
    def suggested_prompts(self) -> tuple[SuggestedPrompt, ...]:
        """Requests to offer a person starting a conversation (Slack's assistant view)."""
        ...

    @property
    def busy(self) -> bool:
        """Whether background work (runs, decisions) is still going on."""
        ...

    def register(self, platform: str, messenger: Messenger) -> None:
        """Answer threads of ``platform`` through ``messenger``."""
        ...

    async def on_message(self, message: IncomingMessage) -> None:
        """A person wrote; returns once it is safe to ack (it is in the durable inbox).

        Raises ``Overloaded`` when it cannot be kept: answer so the platform resends.
        """
        ...

    async def on_click(self, click: Click) -> ClickResult:
        """A person pressed a card's or a question's button (or sent its form); records
        it, then waits a moment for the decision: the card (or question) to show, or
        words for the clicker (``Overloaded`` as above)."""
        ...

    async def accept_click(self, click: Click) -> None:
        """Record a click without waiting; a refusal is told to the clicker privately."""
        ...

    async def check_click(self, click: Click, *, made: bool = False) -> Text | None:
        """Why a click would be refused, before asking the person for more; ``made``: a
        person made it (not a look at what they may do), so a refusal is on record."""
        ...

    async def question_form(self, click: Click) -> Prompt | Text:
        """The question an ``answer`` click opens a form for, as it reads now (its
        fields from the current schema); or why answering it would be refused."""
        ...

    async def edit_form(self, click: Click) -> Prompt | Text:
        """The form an ``edit`` click opens: the card's arguments as fields (from the
        tool's input schema, each with the value shown); or why editing is refused."""
        ...

    async def respond_form(self, click: Click) -> Prompt | Text:
        """The form a ``respond`` click opens: one text, the answer the agent gets in
        the tool's place; or why responding is refused."""
        ...

    async def on_stop(self, thread: ThreadKey, user_id: str, run_id: str | None = None) -> Text:
        """Stop a run of the thread (``run_id``; else each one working or waiting) if
        ``user_id`` may; the text, for them only, says why nothing was stopped."""
        ...

    async def card_now(self, click: Click) -> ApprovalCard | None:
        """The card a click's ids name, as it reads now for anyone (a card opened again:
        Teams' refresh): pending, decided or expired; ``None`` if unknown there."""
        ...

    async def on_feedback(
        self, thread: ThreadKey, user_id: str, run_id: str, *, helpful: bool
    ) -> Text:
        """A person rated the answer of ``run_id`` (👍 ``helpful``, or 👎), from where it
        was posted; it is kept in the audit log (``feedback``) and the metrics. Returns
        the words to tell them."""
        ...

    async def show_waiting(self, thread: ThreadKey) -> int:
        """Post again every card and question still waiting in ``thread`` (a console
        started again on it); each post becomes that call's card. Returns how many."""
        ...

    async def inbox(self, thread: ThreadKey, user_id: str, user_name: str | None = None) -> Inbox:
        """What waits for ``user_id`` across ``thread``'s workspace (``/approvals``): the
        calls they may decide (cards whose buttons work from anywhere: a click carries
        ``Click.ask``), their own calls still waiting, their recent decisions."""
        ...

    async def revoke_given(self, thread: ThreadKey, user_id: str) -> Text:
        """End every standing grant ``user_id`` gave in ``thread``'s workspace
        (``/approvals revoke``); the words to tell them."""
        ...

    async def drain(self) -> None:
        """Wait until no background work is running (tests, console turns)."""
        ...
