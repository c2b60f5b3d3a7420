"""The short views: the pointer a card sent elsewhere leaves in its thread, notices
addressed to people (an expiry to the requester, a reminder to the approvers) with
real @mentions, and the notice of a call that ran under a grant, with its End grant
button.

Plain JSON and markdown, like ``cards``; people and tool names are escaped.
"""

from __future__ import annotations

from typing import Any, Final

from bot import CardPointer, Notice, card_outcome

from . import blocks, cards, links, mentions, texts

_CHANGES_LIMIT: Final = 1000
"""Characters of what an edit changed a pointer shows: the card shows the rest, and a
pointer is one line of a thread, far within a Teams message."""


def pointer_text(pointer: CardPointer) -> str:
    """Markdown for a card's pointer: where the card waits, then how it ended (and what
    an edit changed)."""
    card = pointer.card
    tool = blocks.tool_name_text(card)
    outcome = card_outcome(card)
    if outcome is None:
        return _waiting(pointer, tool)
    line = texts.POINTER_SETTLED.format(tool=tool, outcome=cards.outcome_markdown(outcome))
    return line + outcome.edit_note(
        lambda changes: blocks.escape(blocks.cut(changes, _CHANGES_LIMIT))
    )


def _waiting(pointer: CardPointer, tool: str) -> str:
    if pointer.channel is not None:
        place = texts.POINTER_CHANNEL_PLACE
        url = links.thread_link(pointer.at.thread) if pointer.at is not None else None
        if url:
            place = texts.REQUESTED_IN_LINK.format(words=place, url=url)
        return texts.POINTER_CHANNEL.format(tool=tool, place=place)
    if pointer.people:
        who = ", ".join(map(blocks.person_text, pointer.people))
        return texts.POINTER_PEOPLE.format(tool=tool, who=who)
    return texts.POINTER_NOBODY.format(tool=tool)


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
                texts.END_GRANT,
                revoke_data(notice),
                tooltip=texts.END_GRANT_TOOLTIP,
                with_inputs=False,
            )
        ],
    }
    if entities:
        card["msteams"] = {"entities": list(entities)}
    return card
