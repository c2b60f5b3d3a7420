"""What a settled card or question says, composed once for every place that shows it.

A card's outcome (its mark, its title, the line naming who decided and how, the
edit and what it changed) is derived here from the card, and only drawn by the
adapters: a Slack card and its notification text, a Teams card, a pointer left in
the requester's thread, the console. A new status is one row of ``ENDINGS``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, assert_never

from . import texts
from .types import (
    ApprovalCard,
    CardStatus,
    Person,
    Prompt,
    RecentOutcome,
    Text,
    naming,
    tool_label,
)

ChangeKind = Literal["added", "removed", "changed"]


@dataclass(frozen=True, kw_only=True)
class ArgChange:
    """One argument an edit changed: ``before`` is ``None`` when it was added,
    ``after`` when it was removed."""

    name: str
    kind: ChangeKind
    before: Any = None
    after: Any = None


def arg_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[ArgChange, ...]:
    """What an edit changed, argument by argument, in the order the call names them.

    Two values are the same when their JSON is (``1`` and ``true`` differ, as they do
    for the tool); an argument only one side has is added or removed.
    """
    changes: list[ArgChange] = []
    for name in dict.fromkeys([*before, *after]):
        if name not in after:
            changes.append(ArgChange(name=name, kind="removed", before=before[name]))
        elif name not in before:
            changes.append(ArgChange(name=name, kind="added", after=after[name]))
        elif _json(before[name]) != _json(after[name]):
            changes.append(
                ArgChange(name=name, kind="changed", before=before[name], after=after[name])
            )
    return tuple(changes)


def shown_value(value: Any) -> str:
    """A value as a change shows it: text as it is, anything else as its JSON."""
    return value if isinstance(value, str) else _json(value)


def changes_text(changes: tuple[ArgChange, ...]) -> str:
    """``environment: production → staging; force: (none) → true``: plain words for
    notices and notification texts (cards draw the same changes their own way)."""
    return texts.CHANGE_SEPARATOR.join(
        texts.CHANGE.format(
            name=c.name, before=change_side(c, "before"), after=change_side(c, "after")
        )
        for c in changes
    )


def change_side(change: ArgChange, side: Literal["before", "after"]) -> str:
    """One side of a change as words: the value (as JSON when the edit changed its type,
    so ``"1" → 1`` reads as a change), or ``(none)`` where it is absent."""
    if change.kind == ("added" if side == "before" else "removed"):
        return texts.CHANGE_ABSENT
    value = getattr(change, side)
    if change.kind == "changed" and type(change.before) is not type(change.after):
        return _json(value)
    return shown_value(value)


Tone = Literal["done", "refused", "void"]
"""How an ending feels, for platforms that colour it: it went ahead, it was refused, or
nobody decided (it expired, it was stopped)."""


@dataclass(frozen=True, kw_only=True)
class Ending:
    """One way a card or question ends: its mark, title and tone, and the line that says
    it (``{who}``: who did it)."""

    mark: str
    title: str
    line: str
    tone: Tone = "done"


EndingName = Literal[
    "approved",
    "granted",
    "declined",
    "declined_why",
    "declined_here",
    "expired",
    "stopped",
    "asked_again",
    "answered",
    "cancelled",
    "question_expired",
    "responded",
]
"""Every way a card or question ends (a settled status, or a variant of one)."""

ENDINGS: Final[dict[EndingName, Ending]] = {
    "approved": Ending(mark="✅", title="Approved", line="Approved by {who}"),
    "granted": Ending(
        mark="✅", title="Approved", line="Approved by {who} for this thread ({duration})"
    ),
    "declined": Ending(mark="❌", title="Declined", line="Declined by {who}", tone="refused"),
    "declined_here": Ending(
        mark="❌",
        title="Declined",
        line="Declined by {who}, and not asked again in this thread for {duration}",
        tone="refused",
    ),
    "declined_why": Ending(
        mark="❌", title="Declined", line="Declined by {who}: {reason}", tone="refused"
    ),
    "expired": Ending(
        mark="⌛",
        title="Expired",
        line="Expired: nobody decided in time, nothing was run",
        tone="void",
    ),
    "stopped": Ending(
        mark="🛑",
        title="Stopped",
        line="Stopped by {who}: the request ended before anyone decided",
        tone="void",
    ),
    "asked_again": Ending(
        mark="✏️",
        title="Edited",
        line="Edited by {who}: asked again below as edited, for the approval policy's deciders",
        tone="void",
    ),
    "responded": Ending(
        mark="💬",
        title="Answered instead",
        line="Not run: {who} answered for it: {reason}",
        tone="void",
    ),
    "answered": Ending(mark="✅", title="Answered", line="Answered by {who}"),
    "cancelled": Ending(mark="🚫", title="Cancelled", line="Cancelled by {who}", tone="void"),
    "question_expired": Ending(
        mark="⌛", title="Expired", line="Expired: nobody answered in time", tone="void"
    ),
}
"""Every ending, by name: what each place that shows a settled card or question says."""

EDIT_MARK: Final = "✏️"
REASON_SHOWN: Final = 500
"""Characters of a decline's reason an outcome line shows (the audit log keeps it all)."""


RECENT: Final[dict[RecentOutcome, str]] = {
    "approved": "✅ Approved",
    "declined": "❌ Declined",
    "edited": "✏️ Approved as edited",
    "voted": "🗳️ Voted to approve",
    "responded": "💬 Answered instead of running it",
}
"""How a person's recent decisions (their approvals list) name what they did."""


@dataclass(frozen=True, kw_only=True)
class Settled:
    """What one audit event that settles a call means to people: its past tense ("this
    request was already approved by ..."), whether a person decided it (named when
    someone clicks on it later), and how its card reads afterwards (``card``; ``None``
    for a question's events)."""

    past: str
    by_person: bool = False
    card: CardStatus | None = None


SETTLED: Final[dict[str, Settled]] = {
    "approved": Settled(past="approved", by_person=True, card="approved"),
    "granted": Settled(past="approved", card="approved"),
    "declined": Settled(past="declined", by_person=True, card="declined"),
    "responded": Settled(past="answered for", by_person=True, card="responded"),
    "resumed": Settled(past="answered", by_person=True),
    "cancelled": Settled(past="cancelled", by_person=True),
    "expired": Settled(past="expired", card="expired"),
    "interrupted": Settled(past="closed", card="expired"),
    "stopped": Settled(past="stopped", card="stopped"),
}
"""Every audit event that settles a call, by name: the one table the core reads a call's
fate from (the runtime writes these events; ``Decision.event`` names a decision's)."""


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """How a card or question ended, as every view of it says it.

    ``line`` names who decided (people as values), with the reason or the grant's
    duration; ``headline`` is the same without the reason, for a platform that shows
    the reason on a line of its own (``because``); ``edited_by`` and ``changes`` say
    what an approver changed before approving (``changes`` is empty when nothing was
    edited).
    """

    mark: str
    title: str
    line: Text
    headline: Text = ()
    because: str | None = None
    """ "Reason: ..." for a decline that gave one (shown whole in ``line``)."""
    tone: Tone = "done"
    edited_by: Person | None = None
    changes: tuple[ArgChange, ...] = ()

    def edit_note(self, draw: Callable[[str], str] = str) -> str:
        """ " (edited: amount: 150 → 120)" after a one-line outcome (a notification
        text, a pointer) when the arguments were edited, else nothing; ``draw`` makes
        the changes the platform's text (escaped, cut short)."""
        if not self.changes:
            return ""
        return texts.EDITED_NOTE.format(changes=draw(changes_text(self.changes)))

    @property
    def edit(self) -> Text:
        """ "Edited by @x" when the arguments were edited, else nothing."""
        if not self.changes:
            return ()
        if self.edited_by is None:
            return (texts.EDITED_BY.format(who=texts.SOMEONE),)
        return naming(texts.EDITED_BY, (self.edited_by,))


def card_outcome(card: ApprovalCard) -> Outcome | None:
    """How a settled card ended (``None`` while it waits)."""
    fields: dict[str, str] = {}
    name: EndingName
    match card.status:
        case "pending":
            return None
        case "approved" if card.granted_for:
            name, fields = "granted", {"duration": card.granted_for}
        case "declined" if card.declined_for:
            name, fields = "declined_here", {"duration": card.declined_for}
        case "declined" if card.reason:
            reason = clipped(card.reason, REASON_SHOWN)
            outcome = _outcome(ENDINGS["declined_why"], card.decided_by, {"reason": reason})
            plain = _outcome(ENDINGS["declined"], card.decided_by, {})
            because = texts.OUTCOME_REASON.format(reason=reason)
            return replace(outcome, headline=plain.line, because=because)
        case "responded":
            name, fields = "responded", {"reason": clipped(card.reason or "", REASON_SHOWN)}
        case "approved" | "declined" | "expired" | "stopped" | "asked_again":
            name = card.status
        case _:
            assert_never(card.status)
    changes = arg_changes(card.previous_args, card.args) if card.previous_args is not None else ()
    return _outcome(
        ENDINGS[name], card.decided_by, fields, edited_by=card.edited_by, changes=changes
    )


def question_outcome(prompt: Prompt) -> Outcome | None:
    """How a settled question ended (``None`` while it waits)."""
    name: EndingName
    match prompt.status:
        case "waiting":
            return None
        case "expired":
            name = "question_expired"
        case "answered" | "declined" | "cancelled":
            name = prompt.status
        case _:
            assert_never(prompt.status)
    who = (prompt.decided_by,) if prompt.decided_by else ()
    return _outcome(ENDINGS[name], who, {})


def decision_notice(
    card: ApprovalCard | Prompt, *, requester: str | None, decider: str
) -> tuple[str, str] | None:
    """Whom to tell that their card was decided, and what: whoever asked, when someone
    else approved or declined it (a question's answer, or one's own decision, needs none)."""
    if not isinstance(card, ApprovalCard) or card.status not in (
        "approved",
        "declined",
        "responded",
    ):
        return None
    if requester is None or requester == decider:
        return None
    tool = tool_label(card)
    outcome = card_outcome(card)
    if outcome is not None and outcome.changes:
        changes = changes_text(outcome.changes)
        text = texts.DECIDED_EDITED.format(tool=tool, changes=changes)
    elif card.status == "responded":
        text = texts.DECIDED_RESPONDED.format(tool=tool, response=card.reason or "")
    elif card.status == "declined" and card.declined_for:
        text = texts.DECIDED_DECLINED_HERE.format(tool=tool, duration=card.declined_for)
    elif card.status == "declined" and card.reason:
        text = texts.DECIDED_DECLINED_WHY.format(tool=tool, reason=card.reason)
    elif card.status == "declined":
        text = texts.DECIDED_DECLINED.format(tool=tool)
    elif card.granted_for:
        text = texts.DECIDED_GRANTED.format(tool=tool, duration=card.granted_for)
    else:
        text = texts.DECIDED_APPROVED.format(tool=tool)
    return requester, text


def _outcome(
    ending: Ending,
    people: tuple[Person, ...],
    fields: dict[str, str],
    *,
    edited_by: Person | None = None,
    changes: tuple[ArgChange, ...] = (),
) -> Outcome:
    line: Text = (
        naming(ending.line, people, **fields)
        if people and "{who}" in ending.line
        else (ending.line.format(who=texts.SOMEONE, **fields),)
    )
    return Outcome(
        mark=ending.mark,
        title=ending.title,
        line=line,
        headline=line,
        tone=ending.tone,
        edited_by=edited_by,
        changes=changes,
    )


def clipped(text: str, limit: int | None) -> str:
    """``text`` within ``limit`` characters (``None``: whole), an ellipsis where it was
    cut."""
    if limit is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + "…"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
