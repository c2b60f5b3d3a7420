"""Views as terminal text."""

from __future__ import annotations

import json
from typing import Any, assert_never

from bot import (
    EDIT_MARK,
    RECENT,
    ApprovalCard,
    CardPointer,
    Inbox,
    Notice,
    Outcome,
    Person,
    Prompt,
    Reply,
    View,
    card_outcome,
    changes_text,
    plain_text,
    question_outcome,
    tool_label,
)

from . import texts


def render(view: View) -> str:
    """The lines that show ``view`` in a terminal."""
    if isinstance(view, ApprovalCard):
        return render_card(view)
    if isinstance(view, Prompt):
        return render_prompt(view)
    if isinstance(view, Reply):
        return texts.REPLY.format(text=_indent(view.text))
    if isinstance(view, Notice):
        text = f"{names(view.people)}: {view.text}" if view.people else view.text
        return texts.NOTICE.format(text=_indent(text))
    if isinstance(view, CardPointer):
        return render_pointer(view)
    assert_never(view)


def render_pointer(pointer: CardPointer) -> str:
    """Where a card went, while it waits; then how it ended."""
    if pointer.card.status != "pending":
        return render_card(pointer.card)
    tool = tool_label(pointer.card)
    if pointer.channel is not None:
        return texts.POINTER_CHANNEL.format(channel=pointer.channel, tool=tool)
    return texts.POINTER_PEOPLE.format(who=names(pointer.people), tool=tool)


def render_inbox(inbox: Inbox) -> str:
    """``/approvals``: what waits for the person, their requests, their decisions."""
    lines: list[str] = []
    if inbox.waiting:
        lines.append(texts.INBOX_WAITING.format(count=len(inbox.waiting)))
        lines += [_inbox_item(card) for card in inbox.waiting]
    else:
        lines.append(texts.INBOX_NONE_WAITING)
    if inbox.requested:
        lines.append(texts.INBOX_REQUESTED.format(count=len(inbox.requested)))
        lines += [_inbox_item(card) for card in inbox.requested]
    if inbox.decided:
        lines.append(texts.INBOX_DECIDED)
        lines += [
            texts.INBOX_DECISION.format(
                at=d.at.astimezone().strftime("%Y-%m-%d %H:%M"),
                outcome=RECENT[d.outcome],
                tool=d.tool_name,
                args=_args(d.args),
            )
            for d in inbox.decided
        ]
    if inbox.grants:
        lines.append(texts.INBOX_GRANTS.format(count=inbox.grants))
    return "\n".join(lines)


def _inbox_item(card: ApprovalCard) -> str:
    return texts.INBOX_ITEM.format(
        tool=tool_label(card),
        args=_args(card.args),
        requester=name(card.requester) if card.requester else texts.SOMEONE,
        thread=card.requested_in.root if card.requested_in else "?",
    )


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{key}: {_value(value)}" for key, value in args.items())


def render_card(card: ApprovalCard) -> str:
    """A pending card in full; a decided or expired one as a one-line update."""
    outcome = card_outcome(card)
    if outcome is not None:
        return settled(outcome, tool_label(card))
    lines = [texts.CARD_HEADER.format(agent=" › ".join(card.agent_path), tool=tool_label(card))]
    lines += [texts.CARD_ARG.format(name=k, value=_value(v)) for k, v in card.args.items()]
    expires = card.expires_at.astimezone().strftime("%Y-%m-%d %H:%M %Z")
    lines.append(
        texts.CARD_FOOTER.format(
            requester=name(card.requester) if card.requester else texts.SOMEONE, expires=expires
        )
    )
    if card.quorum > 1:
        who = names(card.approvals) or texts.NO_APPROVALS
        lines.append(
            texts.CARD_APPROVALS.format(who=who, count=len(card.approvals), quorum=card.quorum)
        )
    return "\n".join(lines)


def settled(outcome: Outcome, tool: str) -> str:
    """ "[deploy] ✅ Approved by alice", then what an edit changed, one line each."""
    lines = [texts.SETTLED.format(tool=tool, mark=outcome.mark, line=plain_text(outcome.line))]
    if outcome.changes:
        edit, changes = plain_text(outcome.edit), changes_text(outcome.changes)
        lines.append(texts.CARD_EDITED.format(mark=EDIT_MARK, who=edit, changes=changes))
    return "\n".join(lines)


def name(person: Person) -> str:
    """A person as the terminal shows them: their name, else their id."""
    return person.name or person.id


def names(people: tuple[Person, ...]) -> str:
    """People as a comma-separated list."""
    return ", ".join(name(person) for person in people)


def render_prompt(prompt: Prompt) -> str:
    """A tool's question, what to answer with, and why the last answer did not fit;
    once settled, one line saying who answered (or declined) it."""
    outcome = question_outcome(prompt)
    if outcome is not None:
        return settled(outcome, tool_label(prompt))
    lines = [texts.QUESTION.format(tool=tool_label(prompt), question=_indent(prompt.question))]
    if prompt.error:
        lines.append(texts.QUESTION_ERROR.format(error=prompt.error))
    if prompt.form:
        lines.append(texts.QUESTION_FORM)
    elif prompt.fields:
        fields = ", ".join(f.name for f in prompt.fields)
        lines.append(texts.QUESTION_FIELDS.format(fields=fields))
    else:
        lines.append(texts.QUESTION_HINT)
    return "\n".join(lines)


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _indent(text: str) -> str:
    """Continuation lines line up under the first, after the speaker's tag."""
    return text.replace("\n", "\n     ")
