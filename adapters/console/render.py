"""Documents as terminal text: the core composes every view (``bot.compose``), the
console draws its primitives as indented lines."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, assert_never

from bot import (
    Arguments,
    Block,
    Button,
    Changes,
    Document,
    Facts,
    Inbox,
    Markdown,
    Paragraph,
    Person,
    Rich,
    Section,
    TextInput,
    View,
    changes_rich,
    compose,
    inbox_document,
    rich_plain,
)

from . import texts

INDENT = "    "

QUESTION_COMMANDS: dict[str, str] = {"question_decline": "/decline", "question_cancel": "/cancel"}
"""The lines that press a question's buttons at the console (an approval card's are
asked at its prompt; Stop is the word ``stop``)."""


def render(view: View) -> str:
    """The lines that show ``view`` in a terminal."""
    return draw(compose(view))


def render_inbox(inbox: Inbox) -> str:
    """``/approvals``: what waits for the person, their requests, their decisions."""
    return draw(inbox_document(inbox, command="/approvals"))


def draw(document: Document) -> str:
    """A document as lines: its title, then its body indented under it. A settled view
    (one with a ``tone``) is the update of what was printed while it waited: its title,
    what an edit changed and how it ended, without what was printed before again."""
    lines: list[str] = []
    if document.title:
        lines.append(text(document.title))
    for block in document.body:
        if document.tone is not None and not _news(block):
            continue
        lines += _block(block, nested=bool(document.title))
    commands = [_command(button) for button in document.actions]
    pressed = [command for command in commands if command]
    if pressed:
        lines.append(INDENT + texts.COMMANDS.format(commands=", ".join(pressed)))
    shown = "\n".join(lines)
    if document.kind == "reply":
        return texts.REPLY.format(text=_indent(shown))
    if document.kind == "notice":
        return texts.NOTICE.format(text=_indent(shown))
    return shown


def text(rich: Rich) -> str:
    """Rich text as plain words: people by name, dates in local time, threads by name."""
    return rich_plain(
        rich, when=_local, place=lambda thread: texts.THREAD.format(thread=thread.root)
    )


def _local(at: datetime) -> str:
    return at.astimezone().strftime("%Y-%m-%d %H:%M %Z")


def name(person: Person) -> str:
    """A person as the terminal shows them: their name, else their id."""
    return person.name or person.id


def _block(block: Block, *, nested: bool) -> list[str]:
    indent = INDENT if nested else ""
    match block:
        case Paragraph():
            return [indent + _indent(text(block.text), indent)]
        case Facts():
            return [f"{indent}{fact.label}: {text(fact.value)}" for fact in block.facts]
        case Arguments():
            if not block.args:
                return [f"{indent}{block.label}: {block.empty}"]
            return [f"{indent}{block.label}:"] + [
                f"{indent}  {key}: {_value(value)}" for key, value in block.args.items()
            ]
        case Changes():
            return [indent + text(changes_rich(block))]
        case Markdown():
            return [text(block.lead) + block.text]
        case TextInput():
            return []  # the console asks for a decline's reason at the card's prompt
        case Section():
            lines = [indent + text(block.title)]
            for item in block.items:
                details = f" ({text(item.details)})" if item.details else ""
                lines.append(f"{indent}  - {text(item.text).rstrip()}{details}")
            if not block.items and block.empty:
                lines.append(f"{indent}  {text(block.empty)}")
            return lines
        case _:
            assert_never(block)


def _news(block: Block) -> bool:
    """Whether a settled view's block says something new: how it ended, what changed."""
    return isinstance(block, Changes) or (isinstance(block, Paragraph) and block.small)


def _command(button: Button) -> str:
    command = QUESTION_COMMANDS.get(button.action)
    return texts.COMMAND.format(command=command, label=button.label.lower()) if command else ""


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _indent(text: str, indent: str = "     ") -> str:
    """Continuation lines line up under the first, after the speaker's tag."""
    return text.replace("\n", "\n" + indent)
