"""Real @mentions, so that the people a notice is for are notified, not just named.

Teams notifies someone only for a mention: ``<at>label</at>`` in the text plus a
``mention`` entity carrying that same text and the person's id; on the activity
for a message, in ``msteams.entities`` for an Adaptive Card. People here are
named by their Entra object id (``aadObjectId``), or by their ``29:`` id when
Teams sent none; bots may mention with either (Teams' "Microsoft Entra Object ID
and UPN in user mention"), in text messages and in cards alike.

Plain JSON, like the cards; ``activity_entities`` makes the SDK's objects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from botbuilder.schema import ChannelAccount, Mention

from bot import Person, Rich, Span

from . import blocks, texts

MENTION: Final = "mention"

_NOT_IN_A_LABEL: Final = re.compile(r"[<>\\`*_\[\]~{}]+")
"""What could close the ``<at>`` tag early or make part of a label markdown. Teams
matches the entity's text against the message text as written, so the label is
cleaned rather than escaped."""


@dataclass(frozen=True, kw_only=True)
class Mentions:
    """People named as mentions: the markdown naming them, and one entity each."""

    text: str
    """``<at>Ann</at>, <at>Bob</at>: ...``"""
    entities: tuple[dict[str, Any], ...]


def label(person: Person) -> str:
    """What a mention of ``person`` shows: their name, else their id, cleaned."""
    words = _NOT_IN_A_LABEL.sub(" ", blocks.cut(person.name or person.id, blocks.MAX_NAME))
    return " ".join(words.split()) or texts.MENTION_NOBODY


def mentioning(text: Rich) -> Mentions:
    """Rich text with its people as mentions, each once, in order: a person named again
    is left out with the separator before them (someone without an id is named only)."""
    parts: list[str] = []
    entities: list[dict[str, Any]] = []
    seen: set[str] = set()
    previous: Span | None = None
    for span in text:
        if not isinstance(span, Person):
            parts.append(blocks.markdown((span,), card=False))
        elif not span.id:
            parts.append(blocks.person_text(span))
        elif span.id in seen:
            if isinstance(previous, str) and parts:
                parts.pop()  # the separator before a person named already
            previous = span
            continue
        else:
            seen.add(span.id)
            name = label(span)
            mention = f"<at>{name}</at>"
            parts.append(mention)
            entities.append(
                {"type": MENTION, "text": mention, "mentioned": {"id": span.id, "name": name}}
            )
        previous = span
    return Mentions(text="".join(parts), entities=tuple(entities))


def activity_entities(entities: tuple[dict[str, Any], ...]) -> list[Mention]:
    """Mention entities as a message activity carries them."""
    return [
        Mention(
            type=MENTION,
            text=entity["text"],
            mentioned=ChannelAccount(
                id=entity["mentioned"]["id"], name=entity["mentioned"]["name"]
            ),
        )
        for entity in entities
    ]
