"""The terminal chat: one session is one thread, cards are answered on the next line.

The console uses the core exactly like a platform adapter does (``on_message``,
``on_click``, a ``Messenger``). It waits for the bot's background work after each
line, so a script of lines piped to stdin plays out like a conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TextIO

from bot import (
    RESPONSE_INPUT,
    ApprovalCard,
    BatchCard,
    ChatCore,
    Click,
    ClickAction,
    ClickResult,
    Destination,
    IncomingMessage,
    Live,
    MessageRef,
    Person,
    Posted,
    PostMark,
    Prompt,
    PromptField,
    Text,
    ThreadKey,
    View,
    approvals_command,
    args_line,
    plain_text,
)

from . import texts
from .render import render, render_inbox

PLATFORM = "console"
DEFAULT_THREAD = "main"
"""The thread a console session continues unless it is given another name."""
QUESTION_COMMANDS: dict[str, Literal["decline", "cancel"]] = {
    "/decline": "decline",
    "/cancel": "cancel",
}
"""What a line says to the newest question instead of answering it."""
CARD_VERBS: dict[str, str] = {
    **dict.fromkeys(("a", "approve", "y", "yes"), "approve"),
    **dict.fromkeys(("d", "decline", "n", "no"), "decline"),
    **dict.fromkeys(("e", "edit"), "edit"),
    **dict.fromkeys(("g", "grant"), "grant"),
    **dict.fromkeys(("r", "respond"), "respond"),
    "never": "never",
    **dict.fromkeys(("s", "stop"), "stop"),
}
"""What the first word of a line at a card's prompt asks for (a word none of these is no
answer: a message, when the line is long enough)."""
ALL_WORDS: dict[str, ClickAction] = {
    "a": "approve_all",
    "approve": "approve_all",
    "d": "decline_all",
    "decline": "decline_all",
}
"""``a all`` / ``d all`` at a line of a card of several calls: each call still waiting."""
FOLLOW_UP_WORDS = 2
"""At a card's prompt, a line of at least this many words that does not start with one
of ``CARD_VERBS`` is a message to the thread (the card waits on); a shorter one is
asked again."""


class ConsoleMessenger:
    """Prints views; remembers the cards still waiting for an answer, oldest first."""

    def __init__(self, out: TextIO, *, show_status: bool = False) -> None:
        self._out = out
        self._show_status = show_status
        self._ids = itertools.count(1)
        self.open_cards: list[tuple[MessageRef, ApprovalCard]] = []
        self.on_output: Callable[[], None] | None = None
        """Called after the bot printed something (a view), so a prompt may follow it."""
        self.questions: list[tuple[MessageRef, Prompt]] = []
        """Questions still waiting, oldest first (a reply answers the newest)."""

    async def post(
        self, thread: ThreadKey, view: View, *, mark: PostMark | None = None
    ) -> MessageRef:
        """Print a view; a pending card joins the cards to answer, a question the questions.
        (A terminal keeps no ``mark``: see ``find_post``.)"""
        ref: MessageRef = {"console_id": next(self._ids)}
        self.write(render(view))
        self._printed()
        if isinstance(view, ApprovalCard) and view.status == "pending":
            self.open_cards.append((ref, view))
        elif isinstance(view, BatchCard):  # each of its calls is asked in turn
            self.open_cards += [(ref, card) for card in view.waiting]
        elif isinstance(view, Prompt) and view.status == "waiting":
            # A question asked again (the answer did not fit) is answered at its newest.
            same = (view.run_id, view.tool_call_id)
            self.questions = [
                (r, q) for r, q in self.questions if (q.run_id, q.tool_call_id) != same
            ]
            self.questions.append((ref, view))
        return ref

    async def update(
        self, thread: ThreadKey, ref: MessageRef, view: View, *, mark: PostMark | None = None
    ) -> None:
        """Print the new state of a posted view; a decided card (or question) is done.
        (A terminal keeps no ``mark``.)"""
        self.write(render(view))
        self._printed()
        settled = (isinstance(view, ApprovalCard) and view.status != "pending") or (
            isinstance(view, Prompt) and view.status != "waiting"
        )
        if settled:
            self.forget(ref)
        elif isinstance(view, BatchCard):
            for card in view.cards:
                if card.status != "pending":
                    self.forget(ref, (card.run_id, card.tool_call_id))

    def _printed(self) -> None:
        if self.on_output is not None:
            self.on_output()

    async def tell(self, thread: ThreadKey, user_id: str, text: Text) -> None:
        """Print a private message (there is only one person at a console)."""
        self.write(texts.PRIVATE.format(text=plain_text(text)))

    async def set_status(self, thread: ThreadKey, status: str | None) -> None:
        """Show the status on a terminal; piped output stays free of it."""
        if self._show_status and status:
            self.write(texts.STATUS.format(status=status))

    async def start_live(self, thread: ThreadKey, to: Person | None) -> Live | None:
        """The console prints each part of an answer whole."""
        return None

    async def post_elsewhere(
        self, near: ThreadKey, to: Destination, view: View, *, mark: PostMark | None = None
    ) -> Posted | None:
        """There is one terminal: a card the policy sends elsewhere is shown here."""
        return None

    async def find_post(
        self,
        near: ThreadKey,
        mark: PostMark,
        *,
        since: datetime,
        to: Destination | None = None,
    ) -> Posted | None:
        """A terminal cannot be read back, and what a console that died printed is gone
        with it: a post is never found, it is printed again."""
        return None

    async def find_cut_live(self, near: ThreadKey, *, since: datetime, words: str) -> Posted | None:
        """The console prints answers whole: none is ever cut short."""
        return None

    async def inboxes_changed(self, thread: ThreadKey, people: frozenset[str]) -> None:
        """The console's inbox is ``/approvals``, read when asked."""

    async def channel_place(self, channel: str, workspace: str | None = None) -> ThreadKey | None:
        """The console has no channels."""
        return None

    async def knows_channel(self, channel: str) -> bool:
        """The console has no channels."""
        return False

    async def group_members(self, name: str) -> frozenset[str] | None:
        """The console has no user groups."""
        return None

    def forget(self, ref: MessageRef, call: tuple[str, str] | None = None) -> None:
        """Stop waiting for an answer to the card (or question) at ``ref`` (only to the
        line of ``call``, on a card of several calls)."""
        self.open_cards = [
            (r, c)
            for r, c in self.open_cards
            if r != ref or (call is not None and (c.run_id, c.tool_call_id) != call)
        ]
        self.questions = [(r, q) for r, q in self.questions if r != ref]

    def write(self, text: str, *, end: str = "\n") -> None:
        """Print and flush (output may be a pipe)."""
        self._out.write(text + end)
        self._out.flush()


class ConsoleAdapter:
    """A terminal chat session with the bot.

    Args:
        bot: The chat core; the console registers its messenger as ``console``.
        user: Who is typing; default ``$USER``, else ``you``.
        lines: Where input lines come from; default stdin, read without blocking the loop.
        out: Where output goes; default stdout.
        welcome: Extra text for the greeting (e.g. what the demo model understands).
        thread: The conversation's name: the same name is the same thread, so what
            waits in it (a card, a question) is shown again when the console starts.
        interactive: Whether a person types at a terminal (prompts without newlines,
            statuses, a fresh prompt after the bot speaks unasked); default: detected.
    """

    platform = PLATFORM

    def __init__(
        self,
        bot: ChatCore,
        *,
        user: str | None = None,
        lines: AsyncIterator[str] | None = None,
        out: TextIO | None = None,
        welcome: str | None = None,
        thread: str = DEFAULT_THREAD,
        interactive: bool | None = None,
    ) -> None:
        self.bot = bot
        self.user = user or os.environ.get("USER") or "you"
        self._out = out or sys.stdout
        if interactive is None:
            interactive = self._out.isatty() and lines is None and sys.stdin.isatty()
        self._interactive = interactive
        self._prompted = False
        """A prompt is showing and no line came since: output now needs the prompt again."""
        self._lines = lines
        self._welcome = welcome
        self.messenger = ConsoleMessenger(self._out, show_status=self._interactive)
        self.thread = ThreadKey(
            platform=PLATFORM, workspace="local", channel=self.user, root=thread
        )
        bot.register(PLATFORM, self.messenger)
        self.messenger.on_output = self._spoke
        self._may: dict[tuple[str, str], _May] = {}
        """What the person may do with each open card, once the core was asked."""
        self._editing: _Edit | None = None
        self._form: _Form | None = None
        """A question with several fields being answered, one field per line."""

    async def run(self) -> None:
        """Chat until the input ends, then wait for the bot's pending work."""
        self.messenger.write(texts.WELCOME.format(user=self.user))
        if self._welcome:
            self.messenger.write(self._welcome)
        if await self.bot.show_waiting(self.thread):
            self.messenger.write(texts.STILL_WAITING.format(thread=self.thread.root))
        await self._vet_cards()
        self._ask()
        async for raw in self._lines or stdin_lines(sys.stdin):
            self._prompted = False
            line = raw.strip()
            if self._editing is not None:
                await self._edit_field(line)  # an empty line keeps the value shown
            elif self._form is not None:
                await self._form_field(line)
            elif line:
                if (command := approvals_command(line)) is not None:
                    await self._approvals(revoke=command == "revoke")
                elif self.messenger.open_cards:
                    await self._answer_card(line)
                elif self.messenger.questions and line.lower() in QUESTION_COMMANDS:
                    await self._decline_question(QUESTION_COMMANDS[line.lower()])
                else:
                    await self._say(line)
                # One turn at a time: the next line may answer what this one caused.
                await self.bot.drain()
            await self._vet_cards()
            self._ask()
        self._prompted = False
        await self.bot.drain()
        if self._interactive:
            self.messenger.write("")
        left = [card.tool for _, card in self.messenger.open_cards]
        left += [question.tool for _, question in self.messenger.questions]
        if left:
            waiting = ", ".join(dict.fromkeys(left))
            self.messenger.write(texts.LEFT_WAITING.format(what=waiting, thread=self.thread.root))

    async def _say(self, line: str) -> None:
        """Send a line to the thread as the person's message."""
        await self.bot.on_message(
            IncomingMessage(thread=self.thread, user_id=self.user, text=line, user_name=self.user)
        )

    def _spoke(self) -> None:
        """The bot printed while a prompt was showing (an expiry, a reminder): ask again
        below it, so the terminal shows what it waits for."""
        if self._prompted and self._interactive:
            self._ask()

    async def _approvals(self, *, revoke: bool) -> None:
        """``/approvals``: what waits for you in every console thread (each then asked
        in turn, like a card here), your requests and decisions; ``/approvals revoke``
        ends the grants you gave."""
        if revoke:
            said = await self.bot.revoke_given(self.thread, self.user)
            self.messenger.write(texts.PRIVATE.format(text=plain_text(said)))
            return
        inbox = await self.bot.inbox(self.thread, self.user, self.user)
        self.messenger.write(render_inbox(inbox))
        asked = {(c.run_id, c.tool_call_id) for _, c in self.messenger.open_cards}
        for card in inbox.waiting:
            if (card.run_id, card.tool_call_id) not in asked:
                self.messenger.open_cards.append(({"inbox": card.ask}, card))

    async def _vet_cards(self) -> None:
        """Ask the core, before each prompt, what the person may do with each open card
        (an escalation may let them approve now): a card they may neither approve nor
        decline is not asked, and they are told why the prompt offers less, once."""
        open_now = {(card.run_id, card.tool_call_id) for _, card in self.messenger.open_cards}
        self._may = {key: may for key, may in self._may.items() if key in open_now}
        for ref, card in list(self.messenger.open_cards):
            key = (card.run_id, card.tool_call_id)
            refusals = [await self._refusal(ref, card, action) for action in _MAY_ASK]
            may = _May(approve=refusals[0] is None, decline=refusals[1] is None)
            if not may.approve and self._may.get(key, _May()).approve:
                why = refusals[0] or ()
                self.messenger.write(texts.PRIVATE.format(text=plain_text(why)))
            if not (may.approve or may.decline):
                self.messenger.forget(ref)
            self._may[key] = may

    async def _refusal(
        self, ref: MessageRef, card: ApprovalCard, action: Literal["approve", "decline"]
    ) -> Text | None:
        return await self.bot.check_click(self._click_on(ref, card, action))

    def _may_do(self, card: ApprovalCard) -> _May:
        return self._may.get((card.run_id, card.tool_call_id), _May())

    async def _answer_card(self, line: str) -> None:
        ref, card = self.messenger.open_cards[0]
        may = self._may_do(card)
        word, _, rest = line.partition(" ")
        together = self._batched(ref)
        if together > 1 and rest.strip().lower() == "all" and word.lower() in ALL_WORDS:
            await self._click(ref, card, ALL_WORDS[word.lower()], batched=True)
            return
        action: Literal["approve", "decline"]
        match CARD_VERBS.get(word.lower().rstrip(":,")):
            case "approve" if may.approve:
                action = "approve"
            case "decline" if may.decline:
                action = "decline"
            case "edit" if card.editable and may.approve:
                self._editing = _Edit(ref=ref, card=card)
                return
            case "stop":
                thread = card.requested_in or self.thread  # an inbox shows other threads
                said = await self.bot.on_stop(thread, self.user, card.run_id)
                if said:
                    self.messenger.write(texts.PRIVATE.format(text=plain_text(said)))
                await self.bot.drain()
                return
            case "respond" if card.respond and may.approve and rest.strip():
                await self._click(ref, card, "respond", values={RESPONSE_INPUT: rest.strip()})
                return
            case "never" if card.never_for and may.approve and _offered(card.never_for, rest):
                duration = rest.strip() or card.never_for[0]
                await self._click(ref, card, "never", grant_for=duration)
                return
            case "grant" if card.grant_for and may.approve and _offered(card.grant_for, rest):
                duration = rest.strip() or card.grant_for[0]
                await self._click(ref, card, "grant", grant_for=duration)
                return
            case None if len(line.split()) >= FOLLOW_UP_WORDS:
                # Not an answer but a message: the conversation goes on, the card waits.
                await self._say(line)
                return
            case _:
                self.messenger.write(_card_answers(card, may, reask=True, together=together))
                return
        await self._click(
            ref,
            card,
            action,
            reason=rest.strip() if action == "decline" and rest.strip() else None,
        )

    async def _edit_field(self, line: str) -> None:
        """One field of an edit: the line is its new value (empty: as shown)."""
        editing = self._editing
        assert editing is not None
        field = editing.card.fields[len(editing.values)]
        editing.values[field.name] = line if line else _shown(field.value)
        if len(editing.values) < len(editing.card.fields):
            return
        self._editing = None
        result = await self._click(editing.ref, editing.card, "edit", values=editing.values)
        await self.bot.drain()
        if result.retry:  # the card still waits: edit again, or decide as it is
            self.messenger.write(texts.PRIVATE.format(text=result.message or ""))

    async def _form_field(self, line: str) -> None:
        """One field of a question's form: the line is its value (empty: its default)."""
        form = self._form
        assert form is not None
        if line.lower() in QUESTION_COMMANDS:
            self._form = None
            await self._click(form.ref, form.prompt, QUESTION_COMMANDS[line.lower()])
            await self.bot.drain()
            return
        field = form.prompt.fields[len(form.values)]
        value = line or _shown(field.value)
        if not value and field.required:
            self.messenger.write(texts.FORM_REQUIRED.format(label=field.label))
            return
        if value:
            form.values[field.name] = value
        form.answered += 1
        if form.answered < len(form.prompt.fields):
            return
        self._form = None
        result = await self._click(form.ref, form.prompt, "answer", values=form.values)
        await self.bot.drain()
        if result.retry:  # the question still waits: its form is asked again
            self.messenger.write(texts.PRIVATE.format(text=result.message or ""))

    async def _click(
        self,
        ref: MessageRef,
        card: ApprovalCard | Prompt,
        action: ClickAction,
        *,
        batched: bool = False,
        **given: Any,
    ) -> ClickResult:
        """Press ``action`` on the card (or question) at ``ref``; ``given``: the click's
        reason, values or grant (``_click_on``); ``batched``: it is about every call of
        a card of several."""
        result = await self.bot.on_click(self._click_on(ref, card, action, **given))
        call = None if batched else (card.run_id, card.tool_call_id)
        if result.accepted and "inbox" in ref:
            self.messenger.forget(ref, call)  # its own thread's card shows how it went
        if not result.accepted and not result.retry:
            # Refused for good (decided, expired or not allowed): asking again can't help.
            self.messenger.forget(ref, call)
            self.messenger.write(texts.PRIVATE.format(text=result.message or ""))
        elif result.accepted and result.said:  # done, with a word (some of a card not)
            self.messenger.write(texts.PRIVATE.format(text=result.message or ""))
        return result

    def _batched(self, ref: MessageRef) -> int:
        """How many calls still wait on the card at ``ref`` (more than one: several)."""
        return sum(r == ref for r, _ in self.messenger.open_cards)

    def _click_on(
        self,
        ref: MessageRef,
        card: ApprovalCard | Prompt,
        action: ClickAction,
        *,
        reason: str | None = None,
        values: dict[str, str] | None = None,
        grant_for: str | None = None,
    ) -> Click:
        return Click(
            thread=self.thread,
            user_id=self.user,
            run_id=card.run_id,
            tool_call_id=card.tool_call_id,
            action=action,
            reason=reason,
            message_ref=ref,
            user_name=self.user,
            values=dict(values) if values is not None else None,
            grant_for=grant_for,
            ask=card.ask if isinstance(card, ApprovalCard) else None,
        )

    async def _decline_question(self, action: Literal["decline", "cancel"]) -> None:
        ref, question = self.messenger.questions[-1]
        await self._click(ref, question, action)

    def _ask(self) -> None:
        self._prompted = True
        end = "" if self._interactive else "\n"
        if self._editing is not None:
            editing = self._editing
            field = editing.card.fields[len(editing.values)]
            label = texts.EDIT_FIELD.format(label=field.label, value=_shown(field.value))
            self.messenger.write(label, end=end)
        elif self.messenger.open_cards:
            ref, card = self.messenger.open_cards[0]
            question = _card_answers(
                card, self._may_do(card), reask=False, together=self._batched(ref)
            )
            self.messenger.write(question, end=end)
        elif self._form is not None or self._start_form():
            assert self._form is not None
            field = self._form.prompt.fields[self._form.answered]
            self.messenger.write(_form_field(field), end=end)
        elif self._interactive:
            self.messenger.write(texts.INPUT, end="")

    def _start_form(self) -> bool:
        """Answer the newest question field by field, when it asks for several things."""
        if not self.messenger.questions:
            return False
        ref, question = self.messenger.questions[-1]
        if not question.form:
            return False
        self._form = _Form(ref=ref, prompt=question)
        return True


@dataclass
class _Form:
    """A question being answered one field per line (its values as typed)."""

    ref: MessageRef
    prompt: Prompt
    values: dict[str, str] = field(default_factory=dict)
    answered: int = 0


def _form_field(field: PromptField) -> str:
    """The prompt for one field of a question's form: what it takes, and its default."""
    hints = []
    if field.kind == "choice":
        hints.append(texts.FORM_CHOICES.format(choices=" / ".join(field.choices)))
    elif field.kind != "text":
        hints.append(texts.FORM_KINDS[field.kind])
    if field.required:
        hints.append(texts.FORM_REQUIRED_HINT)
    hint = f" ({', '.join(hints)})" if hints else ""
    default = _shown(field.value)
    return texts.FORM_FIELD.format(
        label=field.label, hint=hint, default=f" [{default}]" if default else ""
    )


@dataclass
class _Edit:
    """A card whose arguments are being edited, one field per line."""

    ref: MessageRef
    card: ApprovalCard
    values: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _May:
    """What the person at the console may do with a card (the core says, per card)."""

    approve: bool = True
    decline: bool = True


_MAY_ASK: tuple[Literal["approve", "decline"], ...] = ("approve", "decline")


def _offered(durations: tuple[str, ...], rest: str) -> bool:
    """Whether a grant's (or a standing decline's) duration (none: the card's first) is
    one the card offers."""
    return not rest.strip() or rest.strip() in durations


def _card_answers(card: ApprovalCard, may: _May, *, reask: bool, together: int = 1) -> str:
    """The card's prompt (or, ``reask``, what to answer it with): what the person may
    do: Approve, Edit when it may be edited, a grant when one is offered, Decline."""
    options = []
    if may.approve:
        options.append(texts.APPROVE_OPTION)
    if may.approve and card.editable:
        options.append(texts.EDIT_OPTION)
    if may.approve and card.grant_for:
        options.append(_timed(texts.GRANT_OPTION, card.grant_for))
    if may.approve and card.respond:
        options.append(texts.RESPOND_OPTION)
    if may.decline:
        options.append(texts.DECLINE_OPTION)
    if together > 1:
        shown, said = texts.ALL_OPTION
        options.append((shown.format(count=together), said.format(count=together)))
    if may.approve and card.never_for:
        options.append(_timed(texts.NEVER_OPTION, card.never_for))
    if not reask:
        listed = " / ".join(shown for shown, _ in options)
        if together > 1 and may.approve:
            call = f"{card.tool} ({args_line(card.args)})" if card.args else card.tool
            return texts.CARD_QUESTION_OF.format(call=call, options=listed)
        question = texts.CARD_QUESTION if may.approve else texts.CARD_DECLINE_QUESTION
        return question.format(options=listed)
    answers = [answer for _, answer in options] + [texts.STOP_ANSWER]
    return texts.CARD_REASK.format(options=", ".join(answers[:-1]) + ", or " + answers[-1])


def _timed(option: tuple[str, str], durations: tuple[str, ...]) -> tuple[str, str]:
    """An answer that decides for a while, as the prompt lists it (every duration) and as
    the re-ask explains it (with the longest)."""
    shown, said = option
    return shown.format(durations=" / ".join(durations)), said.format(duration=durations[-1])


def _shown(value: object) -> str:
    """A field's value as typed at the console (what an empty line keeps)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


async def stdin_lines(stream: TextIO) -> AsyncIterator[str]:
    """Lines of ``stream`` read by a daemon thread, so the event loop never blocks.

    A daemon thread (not the loop's executor) so that a pending ``readline`` on a
    terminal never holds up the process at exit.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def deliver(line: str | None) -> None:
        # RuntimeError: the loop is already closed, nobody is listening any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(queue.put_nowait, line)

    def pump() -> None:
        try:
            for line in iter(stream.readline, ""):
                deliver(line)
        finally:
            deliver(None)

    threading.Thread(target=pump, name="console-stdin", daemon=True).start()
    while (line := await queue.get()) is not None:
        yield line
