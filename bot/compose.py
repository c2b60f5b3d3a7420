"""Every view composed once: cards, questions, pointers, notices and answers as documents.

What a card says while it waits (its facts, its arguments, its buttons and what each
asks before it acts) and once settled (how it ended, who decided, why, for how long,
what an edit changed) is decided here, from the view the core keeps
(``ApprovalCard``, ``Prompt``, ...), and drawn by each adapter from the ``Document``
(``bot.document``). The words are ``bot.texts``'; how an ending reads is
``bot.outcome``'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from string import Formatter
from typing import Any, Literal, assert_never

from . import texts
from .document import (
    Arguments,
    Block,
    Button,
    ButtonStyle,
    Changes,
    Channel,
    Code,
    Confirm,
    Document,
    DocumentKind,
    Fact,
    Facts,
    Form,
    Item,
    Link,
    Markdown,
    Paragraph,
    Place,
    Rich,
    Section,
    Span,
    Strong,
    Target,
    TextInput,
    When,
)
from .outcome import EDIT_MARK, Outcome, card_outcome, change_side, clipped, question_outcome
from .types import (
    ApprovalCard,
    BatchCard,
    CardPointer,
    Notice,
    Person,
    Prompt,
    Reply,
    View,
    tool_label,
)
from .views import response_field

REASON_INPUT = "reason"
"""The name of a pending card's reason box (sent with Decline)."""
REASON_LENGTH = 500
"""Characters a decline's reason box takes."""


def compose(view: View, *, actionable: bool = True) -> Document:
    """The document that shows ``view``. ``actionable=False``: a pending card as shown to
    someone who may not decide it (no buttons; says who may)."""
    match view:
        case ApprovalCard():
            return card_document(view, actionable=actionable)
        case Prompt():
            return question_document(view)
        case CardPointer():
            return pointer_document(view)
        case Notice():
            return notice_document(view)
        case Reply():
            return reply_document(view)
        case BatchCard():
            return batch_document(view)
        case _:
            assert_never(view)


def rich(template: str, **values: str | Span | Rich) -> Rich:
    """``template`` with each ``{field}`` as its value: words formatted in, spans (a
    person, a ``Code``) and rich text kept as they are."""
    spans: list[Span] = []
    for literal, name, _, _ in Formatter().parse(template):
        if literal:
            spans.append(literal)
        if name is None:
            continue
        value = values[name]
        if isinstance(value, tuple):
            spans.extend(value)
        else:
            spans.append(value)
    return _merged(spans)


def joined(parts: Iterable[Rich], separator: str = ", ") -> Rich:
    """Pieces of rich text one after the other, ``separator`` between them."""
    spans: list[Span] = []
    for index, part in enumerate(parts):
        spans += [separator, *part] if index else list(part)
    return _merged(spans)


def people_rich(people: tuple[Person, ...], *, none: str = texts.SOMEONE) -> Rich:
    """People separated by commas (``none`` when there are none)."""
    return joined((person,) for person in people) if people else (none,)


# -- approval cards ---------------------------------------------------------------


def card_document(card: ApprovalCard, *, actionable: bool = True) -> Document:
    """A card: its title, what runs, who asks and until when, and its buttons while it
    waits; once settled, how it ended (and the rest as its record)."""
    label = tool_label(card)
    tool = Code(text=label)
    outcome = card_outcome(card)
    facts = [
        Fact(label=texts.FACT_AGENT, value=(agent_path(card.agent_path),)),
        Fact(label=texts.FACT_ASKED_BY, value=_requester(card)),
    ]
    if card.requested_in is not None:
        facts.append(Fact(label=texts.FACT_REQUESTED_IN, value=(Place(thread=card.requested_in),)))
    if outcome is None:
        facts.append(Fact(label=texts.FACT_EXPIRES, value=(When(at=card.expires_at),)))
        if card.quorum > 1:
            facts.append(Fact(label=texts.FACT_APPROVALS, value=approvals_rich(card)))
    body: list[Block] = [Facts(facts=tuple(facts)), arguments(card)]
    if outcome is not None:
        return settled_document("card", label, outcome, (*body, *outcome_blocks(outcome)))
    if card.remark is not None:
        body.append(Paragraph(text=(card.remark,), emphasis="attention"))
    summary = rich(texts.CARD_SUMMARY, tool=label, requester=_requester(card))
    title = rich(texts.CARD_TITLE, approval_needed=Strong(text=texts.APPROVAL_NEEDED), tool=tool)
    if not actionable:
        body.append(Paragraph(text=(texts.FOR_APPROVERS,), small=True, emphasis="subtle"))
        return Document(kind="card", summary=summary, title=title, body=tuple(body))
    if card.page is not None:
        link = Link(words=texts.PAGE_LINK_WORDS, href=card.page)
        body.append(Paragraph(text=rich(texts.PAGE_LINK, link=link), small=True))
    reason = TextInput(
        name=REASON_INPUT,
        label=texts.REASON_LABEL,
        placeholder=texts.REASON_PLACEHOLDER,
        max_length=REASON_LENGTH,
    )
    return Document(
        kind="card",
        summary=summary,
        title=title,
        body=(*body, reason),
        actions=card_buttons(card),
    )


def batch_document(batch: BatchCard) -> Document:
    """Several calls on one card: who asks and until when, then a line per call (its
    arguments, and its own buttons while it waits, or how it ended), and Approve all and
    Decline all while any waits."""
    first = batch.cards[0]
    waiting = batch.waiting
    count = str(len(batch.cards))
    items = tuple(_batch_item(card) for card in batch.cards)
    calls = Section(title=(texts.BATCH_CALLS,), items=items, more=texts.MORE)
    if not waiting:
        # Every call is decided: the card is their record (the lines say how each ended).
        title = (texts.BATCH_DONE_TITLE.format(count=count),)
        summary = (texts.BATCH_DONE_SUMMARY.format(count=count),)
        # No one tone: each line says how its call ended.
        return Document(kind="card", summary=summary, title=title, body=(calls,))
    facts = Facts(
        facts=(
            Fact(label=texts.FACT_ASKED_BY, value=_requester(first)),
            Fact(label=texts.FACT_EXPIRES, value=(When(at=min(c.expires_at for c in waiting)),)),
        )
    )
    needed = Strong(text=texts.APPROVAL_NEEDED)
    return Document(
        kind="card",
        summary=rich(texts.BATCH_SUMMARY, count=count, requester=_requester(first)),
        title=rich(texts.BATCH_TITLE, approval_needed=needed, count=count),
        body=(facts, calls),
        actions=_all_buttons(waiting),
    )


def _batch_item(card: ApprovalCard) -> Item:
    """One call of a card of several: its tool and arguments; while it waits, its agent
    and its own buttons; once settled, how it ended."""
    outcome = card_outcome(card)
    mark = f"{outcome.mark} " if outcome is not None else ""
    text = rich(
        texts.BATCH_CALL, mark=mark, tool=Code(text=tool_label(card)), args=args_line(card.args)
    )
    if outcome is not None:
        return Item(text=text, details=outcome.line)
    via = (texts.BATCH_VIA.format(agent=agent_path(card.agent_path)),)
    return Item(text=text, details=via, actions=decision_buttons(card))


def _all_buttons(waiting: tuple[ApprovalCard, ...]) -> tuple[Button, ...]:
    """Approve all and Decline all (each confirmed first), on the calls still waiting
    (the click names the first, which finds the rest)."""
    first = waiting[0]
    target = Target(run_id=first.run_id, tool_call_id=first.tool_call_id, ask=first.ask)
    count = str(len(waiting))
    return (
        Button(
            action="approve_all",
            label=texts.APPROVE_ALL.format(count=count),
            target=target,
            style="primary",
            confirm=Confirm(
                title=texts.APPROVE_ALL_CONFIRM_TITLE,
                text=(texts.APPROVE_ALL_CONFIRM_TEXT.format(count=count),),
                yes=texts.CONFIRM_YES,
                no=texts.CONFIRM_NO,
            ),
        ),
        Button(
            action="decline_all",
            label=texts.DECLINE_ALL.format(count=count),
            target=target,
            style="danger",
            confirm=Confirm(
                title=texts.DECLINE_ALL_CONFIRM_TITLE,
                text=(texts.DECLINE_ALL_CONFIRM_TEXT.format(count=count),),
                yes=texts.NEVER_CONFIRM_YES,
                no=texts.CONFIRM_NO,
            ),
        ),
    )


def card_buttons(card: ApprovalCard) -> tuple[Button, ...]:
    """Approve (confirmed first), Decline (with the reason box), Edit (with its form),
    one "Approve for this thread" per duration the card offers (confirmed first: it
    approves later calls too), and one "Decline, don't ask again here" per duration
    (confirmed first: it declines later calls too). Also the buttons of the card in
    approvals lists."""
    return (*decision_buttons(card), *_grant_buttons(card), *_never_buttons(card))


def decision_buttons(card: ApprovalCard) -> tuple[Button, ...]:
    """Approve, Decline and (on a card whose arguments may be edited) Edit."""
    target = Target(run_id=card.run_id, tool_call_id=card.tool_call_id, ask=card.ask)
    tool = Code(text=tool_label(card))
    buttons = [
        Button(
            action="approve",
            label=texts.APPROVE,
            target=target,
            style="primary",
            confirm=Confirm(
                title=texts.CONFIRM_TITLE,
                text=rich(texts.CONFIRM_TEXT, tool=tool),
                yes=texts.CONFIRM_YES,
                no=texts.CONFIRM_NO,
            ),
        ),
        Button(action="decline", label=texts.DECLINE, target=target, style="danger", inputs=True),
    ]
    if card.editable and card.fields:
        form = Form(intro=(texts.EDIT_HINT,), fields=card.fields, submit=texts.APPROVE_EDITED)
        buttons.append(Button(action="edit", label=texts.EDIT, target=target, form=form))
    if card.respond:
        buttons.append(
            Button(
                action="respond",
                label=texts.RESPOND,
                target=target,
                form=respond_form(card),
                tooltip=texts.RESPOND_TOOLTIP,
            )
        )
    return tuple(buttons)


def respond_form(card: ApprovalCard) -> Form:
    """Respond's form: one text, the answer the model gets in the tool's place."""
    intro = texts.RESPOND_HINT.format(tool=tool_label(card))
    return Form(intro=(intro,), fields=(response_field(),), submit=texts.RESPOND_SUBMIT)


@dataclass(frozen=True)
class _Timed:
    """The words of a button that decides for a while ("for this thread (1h)")."""

    label: str
    title: str
    text: str
    yes: str
    tooltip: str
    style: ButtonStyle = "plain"


_GRANT = _Timed(
    label=texts.GRANT,
    title=texts.GRANT_CONFIRM_TITLE,
    text=texts.GRANT_CONFIRM_TEXT,
    yes=texts.CONFIRM_YES,
    tooltip=texts.GRANT_TOOLTIP,
)
_NEVER = _Timed(
    label=texts.NEVER,
    title=texts.NEVER_CONFIRM_TITLE,
    text=texts.NEVER_CONFIRM_TEXT,
    yes=texts.NEVER_CONFIRM_YES,
    tooltip=texts.NEVER_TOOLTIP,
    style="danger",
)


def _grant_buttons(card: ApprovalCard) -> list[Button]:
    return _timed_buttons(card, "grant", card.grant_for, _GRANT)


def _never_buttons(card: ApprovalCard) -> list[Button]:
    return _timed_buttons(card, "never", card.never_for, _NEVER)


def _timed_buttons(
    card: ApprovalCard,
    action: Literal["grant", "never"],
    durations: tuple[str, ...],
    words: _Timed,
) -> list[Button]:
    """One button per duration, each confirmed first (it decides later calls too)."""
    label = tool_label(card)
    target = Target(run_id=card.run_id, tool_call_id=card.tool_call_id, ask=card.ask)
    return [
        Button(
            action=action,
            label=words.label.format(duration=duration),
            target=replace(target, grant_for=duration),
            style=words.style,
            confirm=Confirm(
                title=words.title,
                text=rich(words.text, tool=Code(text=label), duration=duration),
                yes=words.yes,
                no=texts.CONFIRM_NO,
            ),
            tooltip=words.tooltip.format(duration=duration, tool=label),
        )
        for duration in dict.fromkeys(durations)
    ]


def arguments(card: ApprovalCard) -> Arguments:
    """What the call runs with (shown whole)."""
    return Arguments(
        label=texts.ARGUMENTS, args=card.args, empty=texts.NO_ARGUMENTS, more=texts.MORE
    )


def approvals_rich(card: ApprovalCard) -> Rich:
    """ "@a, @b (2 of 3)": who approved a card that needs several approvals, so far."""
    so_far = texts.APPROVALS_SO_FAR.format(count=len(card.approvals), quorum=card.quorum)
    return _merged([*people_rich(card.approvals, none=texts.NO_APPROVALS), so_far])


def args_line(args: dict[str, Any]) -> str:
    """ "service: api, version: 1.4.2": a call's arguments on one line (a list shows each
    call so; its card shows them whole)."""
    return ", ".join(f"{name}: {_one_line(value)}" for name, value in args.items())


def _one_line(value: Any) -> str:
    if isinstance(value, str):
        return value.replace("\n", " ")
    return json.dumps(value, ensure_ascii=False, default=str)


def agent_path(path: tuple[str, ...]) -> str:
    """ "ops › billing": the agent that asked, under the agents that delegated to it."""
    return texts.AGENT_PATH_SEPARATOR.join(path)


def _requester(card: ApprovalCard) -> Rich:
    return (card.requester,) if card.requester is not None else (texts.SOMEONE,)


# -- how a card or question ended ---------------------------------------------------


def settled_document(
    kind: DocumentKind, label: str, outcome: Outcome, body: tuple[Block, ...]
) -> Document:
    """A settled card, question or pointer: titled by how it ended, in its tone."""
    return Document(
        kind=kind,
        summary=settled_summary(label, outcome),
        title=settled_title(Code(text=label), outcome),
        tone=outcome.tone,
        body=body,
    )


def settled_title(tool: Code, outcome: Outcome) -> Rich:
    """ "✅ *Approved:* `deploy`"."""
    title = Strong(text=texts.OUTCOME_TITLE.format(title=outcome.title))
    return rich(texts.SETTLED_TITLE, mark=outcome.mark, title=title, tool=tool)


def settled_summary(label: str, outcome: Outcome) -> Rich:
    """ "deploy: ✅ Approved by @x (edited: amount: 150 → 120)": one line for
    notifications."""
    return rich(
        texts.SETTLED_SUMMARY,
        tool=label,
        outcome=(f"{outcome.mark} ", *outcome.line, outcome.edit_note()),
    )


def outcome_blocks(outcome: Outcome, *, link: Link | None = None) -> tuple[Block, ...]:
    """What an edit changed, who decided and how, and the decline's reason: a settled
    view's last lines (``link``: to the card, after the line saying how it ended)."""
    blocks: list[Block] = []
    if outcome.changes:
        lead = _merged([f"{EDIT_MARK} ", *outcome.edit])
        blocks.append(Changes(lead=lead, changes=outcome.changes))
    line: Rich = (f"{outcome.mark} ", *outcome.headline)
    if link is not None:
        line = (*line, " ", link)
    blocks.append(Paragraph(text=_merged(line), small=True))
    if outcome.because:
        blocks.append(Paragraph(text=(outcome.because,), small=True))
    return tuple(blocks)


def changes_rich(block: Changes, *, limit: int | None = None, most: int | None = None) -> Rich:
    """ "✏️ Edited by @x: `amount`: 150 → 120; `note`: (none) → late": an edit's changes
    on one line, each value cut to ``limit`` characters and at most ``most`` changes
    (saying how many more)."""
    shown = block.changes if most is None else block.changes[:most]
    each = (
        rich(
            texts.CHANGE,
            name=Code(text=change.name),
            before=clipped(change_side(change, "before"), limit),
            after=clipped(change_side(change, "after"), limit),
        )
        for change in shown
    )
    spans: list[Span] = [*block.lead, ": ", *joined(each, texts.CHANGE_SEPARATOR)]
    hidden = len(block.changes) - len(shown)
    if hidden > 0:
        spans.append(texts.CHANGE_SEPARATOR + texts.MORE.format(count=hidden))
    return _merged(spans)


# -- questions ----------------------------------------------------------------------


def question_document(prompt: Prompt) -> Document:
    """A tool's question: what it asks, how to answer (a reply, or a form), Decline and
    Cancel; once settled, who answered (or declined, or cancelled) it."""
    label = tool_label(prompt)
    tool = Code(text=label)
    question = Paragraph(text=(prompt.question,))
    outcome = question_outcome(prompt)
    if outcome is not None:
        return settled_document("question", label, outcome, (question, *outcome_blocks(outcome)))
    body: list[Block] = []
    if prompt.error:
        retry = (texts.QUESTION_RETRY.format(error=prompt.error),)
        body.append(Paragraph(text=retry, emphasis="attention"))
    body.append(question)
    if len(prompt.agent_path) > 1:
        via = (texts.QUESTION_VIA.format(agent=agent_path(prompt.agent_path)),)
        body.append(Paragraph(text=via, small=True, emphasis="subtle"))
    body.append(Paragraph(text=_answer_hint(prompt), small=True, emphasis="subtle"))
    target = Target(run_id=prompt.run_id, tool_call_id=prompt.tool_call_id)
    actions: list[Button] = []
    if prompt.form:
        form = Form(
            intro=rich(texts.ANSWER_INTRO, tool=tool),
            fields=prompt.fields,
            submit=texts.SEND,
            inline=True,
        )
        actions.append(
            Button(action="answer", label=texts.ANSWER, target=target, style="primary", form=form)
        )
    actions += [
        Button(
            action="question_decline",
            label=texts.QUESTION_DECLINE,
            target=target,
            style="danger",
            tooltip=texts.QUESTION_DECLINE_TOOLTIP,
        ),
        Button(
            action="question_cancel",
            label=texts.QUESTION_CANCEL,
            target=target,
            tooltip=texts.QUESTION_CANCEL_TOOLTIP,
        ),
    ]
    return Document(
        kind="question",
        summary=rich(texts.QUESTION_SUMMARY, tool=label, question=prompt.question),
        title=rich(texts.QUESTION_TITLE, tool=tool),
        body=tuple(body),
        actions=tuple(actions),
    )


def _answer_hint(prompt: Prompt) -> Rich:
    if prompt.form:
        return (texts.QUESTION_FORM_HINT,)
    if not prompt.fields:
        return (texts.QUESTION_REPLY_HINT,)
    names = joined((Code(text=field.name),) for field in prompt.fields)
    return rich(texts.QUESTION_FIELDS_HINT, fields=names)


# -- pointers, notices, answers -----------------------------------------------------


def pointer_document(pointer: CardPointer) -> Document:
    """The line left in the requester's thread for a card shown elsewhere: where it waits
    (linked to it, where the platform can); once settled, how it ended."""
    card = pointer.card
    label = tool_label(card)
    tool = Code(text=label)
    link = Link(words=texts.POINTER_LINK)
    outcome = card_outcome(card)
    if outcome is not None:
        return settled_document("pointer", label, outcome, outcome_blocks(outcome, link=link))
    if pointer.channel is not None:
        channel = Channel(id=pointer.channel)
        line = rich(texts.POINTER_IN_CHANNEL, tool=tool, channel=channel, link=link)
    else:
        line = rich(texts.POINTER_TO_PEOPLE, tool=tool, who=people_rich(pointer.people))
    body: list[Block] = [Paragraph(text=line)]
    if card.quorum > 1:
        body.append(Facts(facts=(Fact(label=texts.FACT_APPROVALS, value=approvals_rich(card)),)))
    return Document(
        kind="pointer",
        summary=rich(texts.SETTLED_SUMMARY, tool=label, outcome=texts.WAITING),
        body=tuple(body),
    )


def notice_document(notice: Notice) -> Document:
    """Something the bot says about itself, to the people it names first; a notice of a
    call run under a grant offers End grant."""
    people = tuple(dict.fromkeys(notice.people))  # each named once
    lead: Rich = (*people_rich(people), ": ") if people else ()
    actions: tuple[Button, ...] = ()
    if notice.revoke is not None:
        run_id, tool_call_id = notice.revoke
        target = Target(run_id=run_id, tool_call_id=tool_call_id)
        end = Button(
            action="revoke", label=texts.END_GRANT, target=target, tooltip=texts.END_GRANT_TOOLTIP
        )
        actions = (end,)
    return Document(
        kind="notice",
        summary=_merged([*lead, notice.text]),
        body=(Markdown(text=notice.text, lead=_merged(list(lead))),),
        actions=actions,
    )


def reply_document(reply: Reply) -> Document:
    """The agent's answer: 👍 / 👎 under a finished run's (``feedback``), Stop (confirmed
    first) under the text before a card or question of a run still going."""
    actions: tuple[Button, ...] = ()
    if reply.stop is not None:
        stop = Button(
            action="stop",
            label=texts.STOP,
            target=Target(run_id=reply.stop),
            style="danger",
            confirm=Confirm(
                title=texts.STOP_CONFIRM_TITLE,
                text=(texts.STOP_CONFIRM_TEXT,),
                yes=texts.STOP_CONFIRM_YES,
                no=texts.STOP_CONFIRM_NO,
            ),
            tooltip=texts.STOP_TOOLTIP,
        )
        actions = (stop,)
    return Document(
        kind="reply",
        summary=(reply.text,),
        body=(Markdown(text=reply.text),),
        actions=actions,
        feedback=reply.feedback,
    )


def _merged(spans: list[Span] | tuple[Span, ...]) -> Rich:
    """Adjacent words joined, empty words dropped."""
    merged: list[Span] = []
    for span in spans:
        if isinstance(span, str):
            if not span:
                continue
            if merged and isinstance(merged[-1], str):
                merged[-1] += span
                continue
        merged.append(span)
    return tuple(merged)
