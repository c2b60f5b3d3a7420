"""Chat-neutral types: where a message came from, what people did, what the bot shows.

Adapters translate platform payloads into ``IncomingMessage`` and ``Click``, and
render the views (``ApprovalCard``, ``Prompt``, ``Reply``, ``Notice``) as Block Kit,
Adaptive Cards or terminal text. The core never sees a platform payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

MessageRef = dict[str, Any]
"""Where a posted message lives, opaque JSON chosen by the adapter (e.g. channel + ts)."""


@dataclass(frozen=True, kw_only=True)
class Person:
    """Someone in a conversation: a platform user id, and a display name when known."""

    id: str
    name: str | None = None


@dataclass(frozen=True, kw_only=True)
class ThreadKey:
    """One conversation thread: Slack ``thread_ts or ts``; a Teams ``;messageid=`` root
    or a whole chat; a console session."""

    platform: str
    workspace: str
    channel: str
    root: str

    @property
    def id(self) -> str:
        """The agent's ``thread_id`` for this thread."""
        return f"{self.platform}:{self.workspace}:{self.channel}:{self.root}"


@dataclass(frozen=True, kw_only=True)
class IncomingMessage:
    """A person wrote to the bot. ``dedupe_keys`` identify redeliveries of it.

    ``addressed`` is False for a message the bot merely overheard (a group chat it
    follows, not mentioning it): that may answer the bot's question, but never
    starts a run. ``only_if_followed`` marks one that is for the bot only in a
    thread it takes part in (a reply without a mention); the core decides that
    before it records the message. ``reference`` is the platform's reference
    for messaging the thread later, kept when the message is recorded.
    """

    thread: ThreadKey
    user_id: str
    text: str
    dedupe_keys: tuple[str, ...] = ()
    user_name: str | None = None
    addressed: bool = True
    only_if_followed: bool = False
    reference: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class Click:
    """A person pressed Approve or Decline on a card."""

    thread: ThreadKey
    user_id: str
    run_id: str
    tool_call_id: str
    action: Literal["approve", "decline"]
    reason: str | None = None
    message_ref: MessageRef | None = None
    user_name: str | None = None


CardStatus = Literal["pending", "approved", "declined", "expired"]


@dataclass(frozen=True, kw_only=True)
class ApprovalCard:
    """What will run, who asks, and (once decided) who decided.

    People are values; each adapter renders them its way (a Slack mention, a
    name). ``decided_by`` is everyone who decided it (every voter of a quorum);
    with a quorum above 1, ``approvals`` names who approved so far.
    """

    run_id: str
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    agent_path: tuple[str, ...]
    requester: Person | None
    expires_at: datetime
    status: CardStatus = "pending"
    decided_by: tuple[Person, ...] = ()
    reason: str | None = None
    approvals: tuple[Person, ...] = ()
    quorum: int = 1


@dataclass(frozen=True, kw_only=True)
class Prompt:
    """A tool's question; the next reply in the thread answers it.

    ``error`` is set when the previous reply did not fit (the re-ask).
    """

    run_id: str
    tool_call_id: str
    tool_name: str
    agent_path: tuple[str, ...]
    question: str
    fields: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class Reply:
    """The agent's answer (or part of it)."""

    text: str


@dataclass(frozen=True, kw_only=True)
class Notice:
    """Something the bot says about itself: a pointer to a card, an error, an expiry.

    ``to`` is the person it is meant for, named before the text (a mention where
    the platform has them).
    """

    text: str
    to: Person | None = None


View = ApprovalCard | Prompt | Reply | Notice


Text = tuple[str | Person, ...]
"""Words and people: each adapter renders a ``Person`` its way (a mention, a name)."""


def plain_text(text: Text) -> str:
    """``text`` with each person as their name, else their id."""
    return "".join(part if isinstance(part, str) else part.name or part.id for part in text)


def naming(template: str, people: tuple[Person, ...], **fields: object) -> Text:
    """``template`` with ``{who}`` as the people it names and other fields formatted."""
    before, _, after = template.format(who="{who}", **fields).partition("{who}")
    names: list[str | Person] = []
    for i, person in enumerate(people):
        names += [", ", person] if i else [person]
    return (before, *names, after)


@dataclass(frozen=True, kw_only=True)
class ClickResult:
    """The answer to a click: the updated card, or words for the clicker only."""

    accepted: bool
    card: ApprovalCard | None = None
    said: Text = ()

    @property
    def message(self) -> str | None:
        """What was said to the clicker, as plain text (people by name or id)."""
        return plain_text(self.said) if self.said else None


class Undeliverable(Exception):
    """A platform could not be reached (or refused the connection): a post did not go out.

    Messengers raise it for network failures so the core can say so in one
    line, with no traceback; anything else a messenger raises is a bug to see.
    """


class Messenger(Protocol):
    """How the core talks to one platform; each adapter provides one."""

    async def post(self, thread: ThreadKey, view: View) -> MessageRef:
        """Post a view in the thread; return where it lives."""
        ...

    async def update(self, thread: ThreadKey, ref: MessageRef, view: View) -> None:
        """Replace a posted view for everyone."""
        ...

    async def tell(self, thread: ThreadKey, user_id: str, text: Text) -> None:
        """Say something to one person only (ephemeral / private)."""
        ...

    async def set_status(self, thread: ThreadKey, status: str | None) -> None:
        """Show (or clear, with ``None``) a "thinking..." status; may do nothing."""
        ...
