"""A view as a document: what a chat surface shows, in primitives every adapter draws.

The core composes every card, question, pointer, notice, answer and approvals list
once (``bot.compose``) as a ``Document``: a title, blocks of text, facts, arguments
and an edit's changes, and buttons with what they carry back. An adapter only turns
these primitives into its platform's form (Block Kit, an Adaptive Card, terminal
lines) and never chooses words: a new status or button is an edit here and in
``bot.compose``, none in an adapter, unless a platform needs a new primitive.

A document is plain data (frozen dataclasses of text, numbers and dates): it can be
kept as JSON and drawn later, on another replica, exactly as from the original.

Text in a document is ``Rich``: words (always shown literally: an adapter escapes
them), people (a mention where the platform has them) and a few marked pieces whose
form each platform chooses (``Strong``, ``Code``, ``When``, ``Place``, ``Channel``,
``Link``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, assert_never

from .outcome import ArgChange, Tone
from .types import Person, PromptField, ThreadKey


@dataclass(frozen=True, kw_only=True)
class Strong:
    """Words shown with emphasis (bold)."""

    type: Literal["strong"] = "strong"
    text: str


@dataclass(frozen=True, kw_only=True)
class Code:
    """A name (a tool, an argument), shown as code where the platform can."""

    type: Literal["code"] = "code"
    text: str


@dataclass(frozen=True, kw_only=True)
class When:
    """A moment, shown in each reader's own time zone where the platform can."""

    type: Literal["when"] = "when"
    at: datetime


@dataclass(frozen=True, kw_only=True)
class Place:
    """The thread a request was asked in, named as the platform names places (linked,
    when the adapter knows the thread's link)."""

    type: Literal["place"] = "place"
    thread: ThreadKey


@dataclass(frozen=True, kw_only=True)
class Channel:
    """A channel, named or mentioned as the platform can (an approvers' channel)."""

    type: Literal["channel"] = "channel"
    id: str


@dataclass(frozen=True, kw_only=True)
class Link:
    """Words linking to what the view points to: ``href`` when the view knows it (a
    decision page), else the adapter's link (the card a pointer stands for). Drawn only
    where there is one, else left out with the space before it."""

    type: Literal["link"] = "link"
    words: str
    href: str | None = None


Span = str | Person | Strong | Code | When | Place | Channel | Link
Rich = tuple[Span, ...]
"""Text of a document: words and people (``bot.Text``), and marked pieces."""


def rich_plain(
    text: Rich,
    *,
    when: Callable[[datetime], str] = lambda at: at.strftime("%Y-%m-%d %H:%M %Z").strip(),
    place: Callable[[ThreadKey], str] = lambda thread: thread.channel,
) -> str:
    """``text`` as plain words: people by name (else id), marks dropped, links left out;
    ``when`` and ``place`` say how a moment and a thread read."""
    parts: list[str] = []
    for span in text:
        match span:
            case str():
                parts.append(span)
            case Person():
                parts.append(span.name or span.id)
            case Strong() | Code():
                parts.append(span.text)
            case When():
                parts.append(when(span.at))
            case Place():
                parts.append(place(span.thread))
            case Channel():
                parts.append(span.id)
            case Link():
                if parts and parts[-1].endswith(" "):
                    parts[-1] = parts[-1][:-1]
            case _:
                assert_never(span)
    return "".join(parts)


# -- blocks -----------------------------------------------------------------------

Emphasis = Literal["plain", "subtle", "attention"]


@dataclass(frozen=True, kw_only=True)
class Paragraph:
    """A piece of text on lines of its own; ``small`` for context lines (an outcome, a
    hint), ``emphasis`` ``attention`` for what went wrong (an answer that did not fit)."""

    type: Literal["paragraph"] = "paragraph"
    text: Rich
    small: bool = False
    emphasis: Emphasis = "plain"


@dataclass(frozen=True, kw_only=True)
class Fact:
    """One labelled value ("Asked by: @alice")."""

    label: str
    value: Rich


@dataclass(frozen=True, kw_only=True)
class Facts:
    """Labelled values, one per line (a table where the platform has one)."""

    type: Literal["facts"] = "facts"
    facts: tuple[Fact, ...]


@dataclass(frozen=True, kw_only=True)
class Arguments:
    """What a call runs with, shown whole (an adapter may only shorten values to fit
    its platform's size limits, saying so)."""

    type: Literal["arguments"] = "arguments"
    label: str
    args: dict[str, Any]
    empty: str
    """What is said when the call takes no arguments."""
    more: str = ""
    """What is said of the arguments a platform leaves out to fit (``{count}``)."""


@dataclass(frozen=True, kw_only=True)
class Changes:
    """What an approver changed before approving: who (``lead``, "✏️ Edited by @x"),
    then each argument's before and after (``bot.changes_rich`` draws them)."""

    type: Literal["changes"] = "changes"
    lead: Rich
    changes: tuple[ArgChange, ...]


@dataclass(frozen=True, kw_only=True)
class Markdown:
    """The agent's (or the core's) markdown, converted to the platform's; ``lead`` first
    (the people a notice is for), as text."""

    type: Literal["markdown"] = "markdown"
    text: str
    lead: Rich = ()


@dataclass(frozen=True, kw_only=True)
class TextInput:
    """A free-text box sent along with the document's buttons that ask for it
    (``Button.inputs``): a decline's reason. A platform without inline inputs asks for
    it when the button is pressed (Slack: a modal with the same words)."""

    type: Literal["input"] = "input"
    name: str
    label: str
    placeholder: str = ""
    max_length: int = 500


@dataclass(frozen=True, kw_only=True)
class Item:
    """One entry of a list (an approvals list's waiting call): its first line, the
    lines under it, and the buttons that decide it."""

    text: Rich
    details: Rich = ()
    actions: tuple[Button, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Section:
    """A titled list: ``items`` (those with buttons), or ``empty`` when there are none;
    ``more`` says how many were left out."""

    type: Literal["section"] = "section"
    title: Rich
    items: tuple[Item, ...] = ()
    empty: Rich = ()
    more: str = ""
    """What is said of the items a platform leaves out (``{count}``: how many)."""


Block = Paragraph | Facts | Arguments | Changes | Markdown | TextInput | Section


# -- buttons ----------------------------------------------------------------------

ButtonAction = Literal[
    "approve",
    "decline",
    "edit",
    "grant",
    "never",
    "respond",
    "approve_all",
    "decline_all",
    "answer",
    "question_decline",
    "question_cancel",
    "stop",
    "revoke",
]
"""What a button does: each adapter carries it back as a ``Click`` (or ``on_stop``)."""
ButtonStyle = Literal["primary", "danger", "plain"]


@dataclass(frozen=True, kw_only=True)
class Target:
    """What a button carries back: the run and call it decides, the card's asking, and
    a grant's duration."""

    run_id: str
    tool_call_id: str = ""
    ask: str = ""
    grant_for: str | None = None


@dataclass(frozen=True, kw_only=True)
class Confirm:
    """A question asked before a button takes effect, where the platform can ask one."""

    title: str
    text: Rich
    yes: str
    no: str


@dataclass(frozen=True, kw_only=True)
class Form:
    """Inputs a button opens (``inline``: shown in place, where the platform can) and
    the button that sends them."""

    intro: Rich
    fields: tuple[PromptField, ...]
    submit: str
    inline: bool = False


@dataclass(frozen=True, kw_only=True)
class Button:
    """One button: its action, words and look, what it carries back (``target``), an
    optional confirmation, a hint for platforms that show one, the form it opens, and
    whether it sends the document's text inputs (``inputs``)."""

    action: ButtonAction
    label: str
    target: Target
    style: ButtonStyle = "plain"
    confirm: Confirm | None = None
    tooltip: str = ""
    form: Form | None = None
    inputs: bool = False


DocumentKind = Literal["card", "question", "pointer", "notice", "reply", "inbox"]


@dataclass(frozen=True, kw_only=True)
class Document:
    """One view, composed: ``title`` (the card's first line), ``body``, ``actions``.

    ``summary`` is the one-line text for notifications and previews. ``tone`` is set
    once a card or question is settled (platforms that colour an outcome use it; the
    body of a settled view is its record, shown apart from the title where the
    platform can). ``feedback``: the run a 👍 / 👎 rates, on a finished answer.
    """

    kind: DocumentKind
    summary: Rich
    title: Rich = ()
    tone: Tone | None = None
    body: tuple[Block, ...] = ()
    actions: tuple[Button, ...] = ()
    feedback: str | None = None
