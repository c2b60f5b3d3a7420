"""Documents without a title as Teams markdown messages: the agent's answers, notices
addressed to people (an expiry to the requester, a reminder to the approvers) with
real @mentions of the people they are for, and the pointer a card sent elsewhere
leaves in its thread while the card waits. Their buttons (Stop, End grant) go in a
small card under the text (``cards.buttons_card``).

Plain markdown, like ``cards``; people's and tools' words are escaped, the agent's
and the core's markdown is kept.
"""

from __future__ import annotations

from typing import Any, Final, assert_never

from bot import (
    Arguments,
    Changes,
    Document,
    Facts,
    Markdown,
    Paragraph,
    Rich,
    Section,
    TextInput,
    args_line,
    changes_rich,
)

from . import blocks, mentions

_CHANGES_LIMIT: Final = 1000
"""Characters of each value an edit changed a message shows: a message is a few lines
of a thread, far within a Teams message."""


def message(document: Document, *, link: str | None = None) -> mentions.Mentions:
    """A document's markdown, its people to notify mentioned (the ``lead`` of its
    markdown), and their mention entities; ``link`` is where its ``Link`` points."""
    parts: list[str] = []
    entities: list[dict[str, Any]] = []

    def text(rich: Rich) -> str:
        return blocks.markdown(rich, link=link, card=False)

    for block in document.body:
        match block:
            case Markdown():
                lead = mentions.mentioning(block.lead)
                entities += lead.entities
                parts.append(lead.text + block.text)
            case Paragraph():
                parts.append(text(block.text))
            case Facts():
                parts += [f"{blocks.escape(f.label)}: {text(f.value)}" for f in block.facts]
            case Changes():
                parts.append(text(changes_rich(block, limit=_CHANGES_LIMIT)))
            case Arguments():
                args = args_line(block.args) or block.empty
                parts.append(blocks.escape(f"{block.label}: {args}"))
            case Section():
                items = [text(item.text) for item in block.items] or [text(block.empty)]
                parts.append("\n\n".join([text(block.title), *items]))
            case TextInput():
                pass  # a message has no inputs
            case _:
                assert_never(block)
    return mentions.Mentions(text="\n\n".join(parts), entities=tuple(entities))
