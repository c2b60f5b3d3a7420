"""The short views: the pointer a card sent elsewhere leaves in its thread, notices
addressed to people (an expiry to the requester, a reminder to the approvers) with
real @mentions, and the notice of a call that ran under a grant, with its End grant
button.

Plain JSON and markdown, like ``cards``; people and tool names are escaped.
"""

from __future__ import annotations

from typing import Any, Final, assert_never

from bot import CardPointer, Notice

from . import blocks, cards, links, mentions, messages

_REASON_LIMIT: Final = 500


def pointer_text(pointer: CardPointer) -> str:
    """Markdown for a card's pointer: where the card waits, then how it ended."""
    card = pointer.card
    tool = blocks.tool_name_text(card)
    who = ", ".join(map(blocks.person_text, card.decided_by)) or messages.CARD_SOMEONE
    match card.status:
        case "pending":
            return _waiting(pointer, tool)
        case "approved" if card.granted_for:
            duration = blocks.escape(blocks.cut(card.granted_for, blocks.MAX_LABEL))
            return messages.POINTER_GRANTED.format(tool=tool, who=who, duration=duration)
        case "approved":
            return messages.POINTER_APPROVED.format(tool=tool, who=who)
        case "declined" if card.reason:
            reason = blocks.escape(blocks.cut(card.reason, _REASON_LIMIT))
            return messages.POINTER_DECLINED_WHY.format(tool=tool, who=who, reason=reason)
        case "declined":
            return messages.POINTER_DECLINED.format(tool=tool, who=who)
        case "expired":
            return messages.POINTER_EXPIRED.format(tool=tool)
        case "stopped":
            return messages.POINTER_STOPPED.format(tool=tool, who=who)
        case _:
            assert_never(card.status)


def _waiting(pointer: CardPointer, tool: str) -> str:
    if pointer.channel is not None:
        place = messages.POINTER_CHANNEL_PLACE
        url = links.thread_link(pointer.at.thread) if pointer.at is not None else None
        if url:
            place = messages.REQUESTED_IN_LINK.format(words=place, url=url)
        return messages.POINTER_CHANNEL.format(tool=tool, place=place)
    if pointer.people:
        who = ", ".join(map(blocks.person_text, pointer.people))
        return messages.POINTER_PEOPLE.format(tool=tool, who=who)
    return messages.POINTER_NOBODY.format(tool=tool)


def addressed(notice: Notice) -> tuple[str, tuple[dict[str, Any], ...]]:
    """A notice's markdown, led by @mentions of the people it is for, and their mention
    entities (none for a notice to everyone)."""
    if not notice.people:
        return notice.text, ()
    named = mentions.mentioning(notice.people)
    return f"{named.text}: {notice.text}", named.entities


def revoke_data(notice: Notice) -> dict[str, str]:
    """What a notice's End grant sends back: the call that ran under the grant."""
    assert notice.revoke is not None
    run_id, tool_call_id = notice.revoke
    return {
        "kind": cards.NOTICE_KIND,
        "action": "revoke",
        "run_id": run_id,
        "tool_call_id": tool_call_id,
    }


def revoke_card(notice: Notice) -> dict[str, Any]:
    """A notice of a call that ran under a grant, as a card with End grant (its people
    mentioned in the card, through ``msteams.entities``)."""
    text, entities = addressed(notice)
    card: dict[str, Any] = {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": blocks.CARD_VERSION,
        "fallbackText": cards.text_of(notice),
        "body": [blocks.text_block(text)],
        "actions": [
            blocks.execute(
                messages.END_GRANT,
                revoke_data(notice),
                tooltip=messages.END_GRANT_TOOLTIP,
                with_inputs=False,
            )
        ],
    }
    if entities:
        card["msteams"] = {"entities": list(entities)}
    return card
