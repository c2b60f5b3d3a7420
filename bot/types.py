"""Chat-neutral types: where a message came from, what people did, what the bot shows.

Adapters translate platform payloads into ``IncomingMessage`` and ``Click``, and
render the views (``ApprovalCard``, ``Prompt``, ``Reply``, ``Notice``) as Block Kit,
Adaptive Cards or terminal text. The core never sees a platform payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from agents.mcp import SEPARATOR

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
    ``mentioned``: see below.
    """

    thread: ThreadKey
    user_id: str
    text: str
    dedupe_keys: tuple[str, ...] = ()
    user_name: str | None = None
    addressed: bool = True
    only_if_followed: bool = False
    reference: dict[str, Any] | None = None
    mentioned: bool = False
    """The person @mentioned the bot where a plain reply would do (a new request): a
    question waiting in the thread is not answered by it without asking."""
    context: str | None = None
    """What the person is looking at as they write, in words (``the channel <#C1>``),
    when the platform says: a new run is given it before the text."""


ClickAction = Literal[
    "approve",
    "decline",
    "edit",
    "grant",
    "never",
    "respond",
    "approve_all",
    "decline_all",
    "answer",
    "cancel",
    "revoke",
]
"""On a card: Approve, Decline, an edit (the edited arguments, approved), a grant
(approve this call and the same tool's later ones in the thread, for ``grant_for``), a
never (decline this call, and the same tool's later ones in the thread without asking,
for ``grant_for``), a response (``values[RESPONSE_INPUT]``: the approver's answer in the
tool's place; it never runs), or, on a card of several calls, Approve all or Decline
all (every call of it still waiting; the click names one of them). On a question: a
form's answer, Decline or Cancel. Revoke on the notice of a call that ran under a grant
(``Notice.revoke``): the grant ends."""


@dataclass(frozen=True, kw_only=True)
class Click:
    """A person pressed a button on a card or a question (or sent a question's form).

    ``values`` is the form's answer (on ``answer``) or the edited arguments (on
    ``edit``), as the platform gave them: ``bot.views.form_answer`` makes them the
    schema's types.
    """

    thread: ThreadKey
    user_id: str
    run_id: str
    tool_call_id: str
    action: ClickAction
    reason: str | None = None
    message_ref: MessageRef | None = None
    user_name: str | None = None
    values: dict[str, Any] | None = None
    grant_for: str | None = None
    """On ``grant`` (``never``): for how long, one of the card's ``grant_for``
    (``never_for``), such as ``"1h"``."""
    ask: str | None = None
    """The card's ``ApprovalCard.ask``, when its buttons carry it (a card shown away from
    its thread must: see ``where``)."""
    where: ThreadKey | None = None
    """Set by the core, never by adapters: where the click happened when that is not the
    run's own thread (``thread`` then is the run's): a card in an approvers' channel, a
    direct message, an inbox. Adapters set ``thread`` to where the click happened."""

    via: str | None = None
    """Set by the core's own pages, never by adapters: what the click came through when
    not the thread's platform (``web``: a decision page), for the audit log."""

    @property
    def place(self) -> ThreadKey:
        """Where the click happened (what the clicker is told is said there)."""
        return self.where or self.thread


CardStatus = Literal[
    "pending", "approved", "declined", "expired", "stopped", "asked_again", "responded"
]
"""``asked_again``: edited into another rule of the policy, so asked anew on another card;
``responded``: a person answered for the tool (``reason`` holds it), which never ran."""


@dataclass(frozen=True, kw_only=True)
class ApprovalCard:
    """What will run, who asks, and (once decided) who decided.

    People are values; each adapter renders them its way (a Slack mention, a
    name). ``decided_by`` is everyone who decided it (every voter of a quorum);
    with a quorum above 1, ``approvals`` names who approved so far.
    """

    kind: Literal["card"] = "card"
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
    source: str | None = None
    """The MCP server offering the tool, if any: cards name it with the tool's own name."""
    editable: bool = False
    """Whether the card offers Edit: the arguments as a form, approved as edited (a
    call one person approves, whose tool takes arguments)."""
    fields: tuple[PromptField, ...] = ()
    """When editable: the arguments as form fields, each with the value shown."""
    previous_args: dict[str, Any] | None = None
    """Once approved as edited: the arguments as they were asked (``args`` ran)."""
    edited_by: Person | None = None
    grant_for: tuple[str, ...] = ()
    """While pending: the durations (``"1h"``) of "Approve for this thread" buttons: this
    call, and the same tool's later calls here by the same requester, without cards."""
    granted_for: str | None = None
    """Once approved by a grant: for how long."""
    never_for: tuple[str, ...] = ()
    """While pending: the durations of "Decline, don't ask again here" buttons: this
    call, and the same tool's later calls in the thread, declined without a card."""
    declined_for: str | None = None
    """Once declined by such a button: for how long no call of the tool is asked here."""
    respond: bool = False
    """While pending: the card offers Respond, an approver's answer in the tool's place
    (the policy's ``respond``)."""
    ask: str = ""
    """Which asking of the call this card shows (``bot.ask_of``). Buttons carry it back
    as ``Click.ask``: a click on a card of an earlier asking is refused as outdated."""
    requested_in: ThreadKey | None = None
    """On a card shown away from the requester's thread (an approvers' channel, a direct
    message, an inbox): that thread, for a link to the request."""
    deciders: tuple[str, ...] = ()
    """While pending: who the policy lets decide it, as it names them (user ids, user
    groups); empty when anyone may. For platforms that show buttons only to them."""
    page: str | None = None
    """On a card sent to one approver (a direct message) while it waits: the link to
    their decision page (``bot.links``)."""
    remark: str | None = None
    """While pending: what the policy's reviewer said of the call (``bot.reviewer``)."""

    @property
    def tool(self) -> str:
        """The tool's own name (``close_ticket`` of ``tickets__close_ticket``)."""
        return own_name(self.tool_name, self.source)


FieldKind = Literal["text", "number", "integer", "boolean", "choice"]


@dataclass(frozen=True, kw_only=True)
class PromptField:
    """One thing a question asks for: a property of the answer's schema."""

    name: str
    label: str
    kind: FieldKind = "text"
    choices: tuple[str, ...] = ()
    """The values a ``choice`` may take, as text."""
    json_choices: bool = False
    """The choices are the JSON of values that are not text (``1``, ``true``):
    ``form_answer`` gives back the values themselves."""
    required: bool = False
    description: str | None = None
    value: Any = None
    """The value to start from (an edit form shows the card's), or ``None``."""


PromptStatus = Literal["waiting", "answered", "declined", "cancelled", "expired"]


@dataclass(frozen=True, kw_only=True)
class Prompt:
    """A tool's question; the next reply in the thread answers it (or, with several
    fields, a form). Decline and Cancel end it unanswered.

    ``error`` is set when the previous reply did not fit (the re-ask). Once
    ``status`` is not ``waiting``, ``decided_by`` says who answered or declined.
    """

    kind: Literal["question"] = "question"
    run_id: str
    tool_call_id: str
    tool_name: str
    agent_path: tuple[str, ...]
    question: str
    fields: tuple[PromptField, ...] = ()
    error: str | None = None
    status: PromptStatus = "waiting"
    decided_by: Person | None = None
    source: str | None = None
    """The MCP server asking, if any (``tool_name`` is then ``<server>__<tool>``)."""

    @property
    def tool(self) -> str:
        """The tool's own name (``escalate`` of ``tickets__escalate``)."""
        return own_name(self.tool_name, self.source)

    @property
    def form(self) -> bool:
        """Whether the question is answered with a form: it asks for several things, or
        for one that is not free text (a choice, a number, yes or no). A reply in the
        thread still answers it."""
        return len(self.fields) > 1 or any(field.kind != "text" for field in self.fields)


def tool_label(view: ApprovalCard | Prompt) -> str:
    """The tool as cards and questions name it: with its MCP server, when it has one
    (``close_ticket (MCP server tickets)``), or the client whose own tool it is (a peer
    agent, the only one asking with its tools: ``deploy (run by ci)``), else its name."""
    if view.source is None:
        return view.tool_name
    if view.agent_path == (view.source,):
        return TOOL_OF_CLIENT.format(tool=view.tool, client=view.source)
    return TOOL_OF_SERVER.format(tool=view.tool, server=view.source)


TOOL_OF_SERVER = "{tool} (MCP server {server})"
TOOL_OF_CLIENT = "{tool} (run by {client})"


def own_name(tool_name: str, source: str | None) -> str:
    """A tool's name without its source's prefix (the name its MCP server gives it)."""
    prefix = f"{source}{SEPARATOR}" if source else ""
    return tool_name.removeprefix(prefix) if prefix and tool_name != prefix else tool_name


@dataclass(frozen=True, kw_only=True)
class SuggestedPrompt:
    """A request a platform may offer to start with (Slack's assistant view): what the
    button says, and the message it sends."""

    title: str
    message: str


@dataclass(frozen=True, kw_only=True)
class Reply:
    """The agent's answer (or part of it)."""

    kind: Literal["reply"] = "reply"
    text: str
    feedback: str | None = None
    """On the last part of a finished run's answer: that run's id. The platform may offer
    👍 / 👎 on it, each reported with ``ChatCore.on_feedback``."""
    stop: str | None = None
    """On the text before a card or question of a run still going: that run's id. The
    platform may offer Stop on it, reported with ``ChatCore.on_stop``."""


@dataclass(frozen=True, kw_only=True)
class Notice:
    """Something the bot says about itself: a pointer to a card, an error, an expiry.

    ``to`` is the person it is meant for, named before the text (a mention where
    the platform has them).
    """

    kind: Literal["notice"] = "notice"
    text: str
    to: Person | None = None
    also: tuple[Person, ...] = ()
    """Further people it is meant for (the approvers a reminder pings), named after ``to``."""
    revoke: tuple[str, str] | None = None
    """``(run_id, tool_call_id)`` of a call that ran under a grant: the notice offers a
    Revoke button, a ``Click(action="revoke")`` with these ids, that ends the grant."""

    @property
    def people(self) -> tuple[Person, ...]:
        """Everyone it is meant for, in order."""
        return ((self.to,) if self.to is not None else ()) + self.also


@dataclass(frozen=True, kw_only=True)
class Posted:
    """A message the bot posted: the thread it is in, and where it lives."""

    thread: ThreadKey
    ref: MessageRef


@dataclass(frozen=True, kw_only=True)
class Destination:
    """Where the policy sends a card instead of the requester's thread: a new message in
    ``channel``, or ``user_id``'s direct chat with the bot (exactly one is set)."""

    channel: str | None = None
    user_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class BatchCard:
    """Several calls one model turn asked for, on one card (the policy's ``batch``): a
    line per call with its arguments and, while it waits, its own buttons; Approve all
    and Decline all while any waits. Each call is decided on its own (deciding one
    leaves the others waiting); ``cards`` are each call's card as it now reads."""

    kind: Literal["batch"] = "batch"
    cards: tuple[ApprovalCard, ...]

    @property
    def waiting(self) -> tuple[ApprovalCard, ...]:
        """The calls still waiting for a decision."""
        return tuple(card for card in self.cards if card.status == "pending")


@dataclass(frozen=True, kw_only=True)
class CardPointer:
    """The line left in the requester's thread for a card shown elsewhere: "waiting for
    approval in #approvals" (``channel``, the card ``at`` a message there) or "sent to
    @a, @b" (``people``, by direct message). Updated as the card is: ``card.status``
    and ``card.decided_by`` say how it ended."""

    kind: Literal["pointer"] = "pointer"
    card: ApprovalCard
    channel: str | None = None
    at: Posted | None = None
    people: tuple[Person, ...] = ()


RecentOutcome = Literal["approved", "declined", "edited", "voted", "responded"]
"""What a person did on a card, as their recent decisions list it: approved or declined
it, approved it as they edited it, or approved one that needs more approvals."""


@dataclass(frozen=True, kw_only=True)
class InboxDecision:
    """One decision in a person's recent decisions."""

    tool_name: str
    outcome: RecentOutcome
    at: datetime
    args: dict[str, Any]
    """The call's arguments (a sensitive tool's: empty)."""


@dataclass(frozen=True, kw_only=True)
class Inbox:
    """What waits for one person across the workspace, and what they decided lately
    (Slack ``/approvals``, the Teams command ``approvals``, the console's ``/approvals``).

    ``waiting`` are the cards of every call ``person`` may decide now, each with
    ``requested_in`` set; their buttons work like the card's in its thread.
    ``requested`` are the person's own calls still waiting for someone else.
    """

    person: Person
    waiting: tuple[ApprovalCard, ...] = ()
    requested: tuple[ApprovalCard, ...] = ()
    decided: tuple[InboxDecision, ...] = ()
    grants: int = 0
    """How many standing grants this person gave are still running."""


View = ApprovalCard | Prompt | Reply | Notice | CardPointer | BatchCard
"""Everything the core shows; each names its ``kind``, for its stored form (``bot.documents``)."""


StepStatus = Literal["pending", "in_progress", "complete", "error"]


@dataclass(frozen=True, kw_only=True)
class Step:
    """One tool call of a run as a live answer shows it: a task that goes pending ->
    in progress -> complete (or error). ``id`` is the call's; a step shown again
    with the same id replaces the earlier one."""

    id: str
    title: str
    """What the step does: the tool, after the sub-agents that run it (``deploy › deploy``)."""
    status: StepStatus
    detail: Text = ()
    """A line under it: "Waiting for approval from @lead", an error."""


class Live(Protocol):
    """A message the answer is written into as the model writes it, with its tool steps
    (``Messenger.start_live``). Whatever the platform refuses on the way is posted as
    ordinary messages instead: no text is lost."""

    async def write(self, text: str) -> None:
        """Add answer text (the live message may batch it)."""
        ...

    async def step(self, step: Step) -> None:
        """Show a tool step, or its new state."""
        ...

    async def finish(self, *, feedback: str | None = None, stop: str | None = None) -> None:
        """End the live message: everything written is shown. ``feedback``: the run whose
        answer it ends (as ``Reply.feedback``: the platform may offer 👍 / 👎); ``stop``:
        the run it pauses, for a card or question (as ``Reply.stop``: Stop)."""
        ...


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
    card: ApprovalCard | Prompt | BatchCard | None = None
    """The card (or question) as it now reads, to show in place of the clicked one (a
    card of several calls, when the clicked call is one of them)."""
    said: Text = ()
    retry: bool = False
    """A form's answer that did not fit: the same form may be corrected and sent again
    (any other refusal is final)."""

    @property
    def message(self) -> str | None:
        """What was said to the clicker, as plain text (people by name or id)."""
        return plain_text(self.said) if self.said else None


class NotReachedYet(LookupError):
    """A platform cannot start a conversation in a place until it has heard from near it
    (Teams: a tenant the bot was never addressed in). Refused to a caller; at start, a
    warning rather than a reason to stop: the first message there makes it reachable."""


class Undeliverable(Exception):
    """A platform could not be reached (or refused the connection): a post did not go out.

    Messengers raise it for network failures so the core can say so in one
    line, with no traceback; anything else a messenger raises is a bug to see.
    """


PostKind = Literal["answer", "card", "question", "pointer", "error", "notice"]
"""What a marked post is: a finished run's answer, a call's card, a call's question, the
line left in the requester's thread for a card sent elsewhere (``CardPointer``), a failed
run's error, or a notice about a waiting call said in reply to a message (an approval
pending, a question still waiting)."""


@dataclass(frozen=True, kw_only=True)
class PostMark:
    """Which post a message is, kept with it where the platform can, so that work taken
    over after a crash finds what the process that died posted before recording it, and
    does not post it again (``Messenger.find_post``). Ids only: other apps may read it.

    ``call`` and ``ask`` name the call (and which asking of it, ``ask_of``) of a card,
    question, pointer or notice. ``cause``: the intake entry's run id whose work posted
    it, when the same call's post may come again for another reason (a question asked
    again after a reply that did not fit it; a notice, said again to each new message).
    """

    run_id: str
    post: PostKind
    call: str | None = None
    ask: str | None = None
    cause: str | None = None

    @property
    def key(self) -> str:
        """The mark as one string (for platforms that keep marks beside their posts)."""
        return "|".join((self.run_id, self.post, self.call or "", self.ask or "", self.cause or ""))


class Messenger(Protocol):
    """How the core talks to one platform; each adapter provides one."""

    async def post(
        self, thread: ThreadKey, view: View, *, mark: PostMark | None = None
    ) -> MessageRef:
        """Post a view in the thread; return where it lives.

        ``mark``: which post this is, kept with the message where the platform can (on
        the last message of a view it splits), for ``find_post``.
        """
        ...

    async def find_post(
        self,
        near: ThreadKey,
        mark: PostMark,
        *,
        since: datetime,
        to: Destination | None = None,
    ) -> Posted | None:
        """The message posted with ``mark`` in ``near`` (with ``to``: as the start of a
        conversation there, ``post_elsewhere``), not before ``since``.

        ``None`` when there is none, or when the platform cannot tell (it cannot read
        its messages back, or refused to): the core then posts it, so a post may show
        twice across a crash, never not at all. Looks only a bounded way back.

        Raises:
            Undeliverable: The platform could not be reached.
        """
        ...

    async def find_cut_live(self, near: ThreadKey, *, since: datetime, words: str) -> Posted | None:
        """A live message (``start_live``) a process that died left unfinished, to be
        updated with the whole answer instead of posting it again: the bot's newest
        message in ``near``'s thread since ``since``, when it has no mark and what it
        shows begins ``words`` (``views.begins``). Ended here where the platform needs
        that before an update.

        ``None`` when there is none, or the platform cannot tell (or has no live
        messages): the core posts the answer again.
        """
        ...

    async def update(
        self, thread: ThreadKey, ref: MessageRef, view: View, *, mark: PostMark | None = None
    ) -> None:
        """Replace a posted view for everyone; ``mark``: which post it now is (as
        ``post``'s), kept with it where the platform can, for ``find_post``."""
        ...

    async def tell(self, thread: ThreadKey, user_id: str, text: Text) -> None:
        """Say something to one person only (ephemeral / private)."""
        ...

    async def set_status(self, thread: ThreadKey, status: str | None) -> None:
        """Show (or clear, with ``None``) a "thinking..." status; may do nothing."""
        ...

    async def start_live(self, thread: ThreadKey, to: Person | None) -> Live | None:
        """A live message in ``thread`` for an answer to ``to`` (who asked), or ``None``
        where the platform has none there (the core then posts each part whole).

        Raises ``Undeliverable`` when the platform cannot be reached (the core posts
        whole messages instead).
        """
        ...

    async def post_elsewhere(
        self, near: ThreadKey, to: Destination, view: View, *, mark: PostMark | None = None
    ) -> Posted | None:
        """Post ``view`` as the start of a new conversation in ``near``'s workspace: a new
        message in ``to.channel``, or in ``to.user_id``'s direct chat with the bot
        (``mark`` as on ``post``).

        Returns where it went (its thread is the one clicks and replies there come
        from), or ``None`` when the platform has no such places (the console): the
        core then posts in ``near``. Raises ``Undeliverable`` when the platform cannot
        be reached; anything else (the channel is gone) is logged and the core posts
        in ``near`` instead.
        """
        ...

    async def inboxes_changed(self, thread: ThreadKey, people: frozenset[str]) -> None:
        """A call of ``thread``'s workspace was asked, or decided, or expired: what waits
        for ``people`` (who may decide it, who asked) changed. A platform that shows
        inboxes on its own (Slack's App Home) shows theirs again; others do nothing."""
        ...

    async def channel_place(self, channel: str, workspace: str | None = None) -> ThreadKey | None:
        """Where a new conversation in ``channel`` starts: a thread key with no root (the
        ``near`` of ``post_elsewhere``), in ``workspace`` or the bot's only one; ``None``
        when the bot cannot start one there (no such channel, not a member, a platform
        that cannot post unprompted). Asked once per channel, at start.

        Raises:
            LookupError: ``workspace`` is needed (a bot of many) or not installed.
            Undeliverable: The platform could not be asked.
        """
        ...

    async def knows_channel(self, channel: str) -> bool:
        """Whether ``channel`` is a place of this platform the bot can post in. Asked
        once at start for each channel the policy names: a channel no platform knows
        stops the bot (fail closed)."""
        ...

    async def group_members(self, name: str) -> frozenset[str] | None:
        """The user ids in the user group ``name`` (an id such as ``S0GROUP`` or an
        ``@handle``), or ``None`` when ``name`` is no group of this platform (a user id:
        answered without asking the platform).

        Raises:
            LookupError: ``name`` looks like a group but the platform has none by that name.
            Undeliverable: The platform could not be asked.
        """
        ...
