"""A decision page (``bot.DecisionPage``) as HTML: the card's document, drawn as the
chat draws it (title, facts, arguments, what an edit changed, how it ended), and its
buttons as one form that posts back to the page, so Approve and Decline work without
JavaScript. Everything is escaped; styles are inline; nothing is fetched elsewhere."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from html import escape
from typing import Any, Final, assert_never

from bot import (
    Arguments,
    Block,
    Button,
    Changes,
    Channel,
    Code,
    DecisionPage,
    Document,
    Facts,
    Link,
    Markdown,
    Paragraph,
    Person,
    Place,
    PromptField,
    Rich,
    Section,
    Strong,
    TextInput,
    When,
    changes_rich,
    choice_text,
    shown_value,
)
from bot import texts as core_texts
from bot.pages import GRANT, NEVER

from . import texts

FIELD: Final = "field."
"""The prefix of an edit form's inputs (``field.<argument>``)."""

STYLE: Final = """
body{font:16px/1.45 system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d1c1d}
main{max-width:44rem;margin:2rem auto;padding:0 1rem}
.said{padding:.75rem 1rem;border-radius:6px;background:#e8f0fe}
.said.problem{background:#fdecea}
article{background:#fff;border:1px solid #ddd;border-radius:8px;padding:1rem 1.25rem}
article.done{border-left:6px solid #2e7d32}article.refused{border-left:6px solid #c62828}
article.void{border-left:6px solid #9e9e9e}
h1{font-size:1.2rem;margin:.2rem 0 1rem}dl{display:grid;grid-template-columns:max-content 1fr;
gap:.25rem 1rem;margin:0 0 1rem}dt{color:#616061}dd{margin:0}
table{border-collapse:collapse;width:100%;margin:0 0 1rem}th,td{text-align:left;
vertical-align:top;padding:.3rem .5rem;border-top:1px solid #eee}th{width:1%;white-space:nowrap}
pre{margin:0;white-space:pre-wrap;word-break:break-word;font:14px ui-monospace,monospace}
code{font:14px ui-monospace,monospace;background:#f1f1f1;padding:0 .2rem;border-radius:3px}
.small{font-size:.9rem;color:#616061}.attention{color:#c62828}
label{display:block;margin:.6rem 0 .2rem}textarea,input,select{width:100%;
box-sizing:border-box;font:inherit;padding:.4rem}
.buttons{display:flex;flex-wrap:wrap;gap:.5rem;margin:.8rem 0}
button{font:inherit;padding:.45rem 1rem;border-radius:6px;border:1px solid #bbb;
background:#fff;cursor:pointer}button.primary{background:#2e7d32;color:#fff;border-color:#2e7d32}
button.danger{background:#c62828;color:#fff;border-color:#c62828}
details{margin-top:.5rem}summary{cursor:pointer}
"""


def draw_page(page: DecisionPage) -> str:
    """The whole HTML page."""
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(core_texts.PAGE_TITLE)}</title><style>{STYLE}</style></head>",
        "<body><main>",
    ]
    if page.said:
        problem = " problem" if page.status >= 400 else ""
        parts.append(f'<p class="said{problem}" role="status">{html(page.said)}</p>')
    if page.document is not None:
        parts.append(_document(page.document, page))
    parts.append("</main></body></html>")
    return "\n".join(parts)


def html(text: Rich) -> str:
    """Rich text as HTML: words escaped, people by name, marks as tags."""
    out: list[str] = []
    for span in text:
        match span:
            case str():
                out.append(escape(span))
            case Person():
                out.append(f"<strong>{escape(span.name or span.id)}</strong>")
            case Strong():
                out.append(f"<strong>{escape(span.text)}</strong>")
            case Code():
                out.append(f"<code>{escape(span.text)}</code>")
            case When():
                at = span.at.astimezone(UTC)
                out.append(f'<time datetime="{at.isoformat()}">{escape(_when(at))}</time>')
            case Place():
                out.append(escape(texts.THREAD.format(channel=span.thread.channel)))
            case Channel():
                out.append(escape(texts.CHANNEL.format(channel=span.id)))
            case Link():
                if span.href:
                    out.append(f'<a href="{escape(span.href)}">{escape(span.words)}</a>')
                elif out and out[-1].endswith(" "):
                    out[-1] = out[-1][:-1]
            case _:
                assert_never(span)
    return "".join(out)


def _when(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC")


def _document(document: Document, page: DecisionPage) -> str:
    tone = f' class="{document.tone}"' if document.tone else ""
    parts = [f"<article{tone}>", f"<h1>{html(document.title or document.summary)}</h1>"]
    inputs = [block for block in document.body if isinstance(block, TextInput)]
    parts += [_block(block) for block in document.body if not isinstance(block, TextInput)]
    if page.decides and document.actions:
        parts.append(_form(document.actions, inputs, page.ask))
    parts.append("</article>")
    return "\n".join(parts)


def _block(block: Block) -> str:
    match block:
        case Paragraph():
            classes = " ".join(
                c for c in ("small" if block.small else "", block.emphasis) if c != "plain" and c
            )
            shown = f' class="{classes}"' if classes else ""
            return f"<p{shown}>{html(block.text)}</p>"
        case Facts():
            rows = "".join(
                f"<dt>{escape(fact.label)}</dt><dd>{html(fact.value)}</dd>" for fact in block.facts
            )
            return f"<dl>{rows}</dl>"
        case Arguments():
            if not block.args:
                return f"<p>{escape(block.label)}: {escape(block.empty)}</p>"
            rows = "".join(
                f"<tr><th><code>{escape(name)}</code></th><td><pre>{escape(_value(value))}</pre></td></tr>"
                for name, value in block.args.items()
            )
            return f"<table><caption hidden>{escape(block.label)}</caption>{rows}</table>"
        case Changes():
            return f"<p>{html(changes_rich(block))}</p>"
        case Markdown():
            return f'<p style="white-space:pre-wrap">{html(block.lead)}{escape(block.text)}</p>'
        case TextInput():
            return ""
        case Section():
            items = "".join(f"<li>{html(item.text)}</li>" for item in block.items)
            return f"<h2>{html(block.title)}</h2><ul>{items}</ul>" if items else ""
        case _:
            assert_never(block)


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _form(actions: tuple[Button, ...], inputs: list[TextInput], ask: str) -> str:
    """One form posting back to the page: the reason box, a button per decision, and
    the edit's fields under a disclosure (no script needed for any of it)."""
    parts = ['<form method="post">', f'<input type="hidden" name="ask" value="{escape(ask)}">']
    for box in inputs:
        parts.append(
            f'<label for="{escape(box.name)}">{escape(box.label)}</label>'
            f'<textarea id="{escape(box.name)}" name="{escape(box.name)}" rows="2" '
            f'maxlength="{box.max_length}" placeholder="{escape(box.placeholder)}"></textarea>'
        )
    pressed = [button for button in actions if button.form is None]
    parts.append('<div class="buttons">')
    parts += [_button(button) for button in pressed]
    parts.append("</div>")
    for button in actions:
        if button.form is not None:
            fields = "".join(_field(field) for field in button.form.fields)
            parts.append(
                f"<details><summary>{escape(button.label)}</summary>"
                f'<p class="small">{html(button.form.intro)}</p>{fields}'
                f'<div class="buttons"><button type="submit" name="action" '
                f'value="{escape(button.action)}" '
                f'class="primary">{escape(button.form.submit)}</button></div></details>'
            )
    parts.append("</form>")
    return "\n".join(parts)


def _button(button: Button) -> str:
    value: str = button.action
    if button.action in ("grant", "never") and button.target.grant_for:
        prefix = GRANT if button.action == "grant" else NEVER
        value = f"{prefix}{button.target.grant_for}"
    style = f' class="{button.style}"' if button.style != "plain" else ""
    title = f' title="{escape(button.tooltip)}"' if button.tooltip else ""
    return (
        f'<button type="submit" name="action" value="{escape(value)}"{style}{title}>'
        f"{escape(button.label)}</button>"
    )


def _field(field: PromptField) -> str:
    """An edit form's input, holding the value the card shows."""
    name = escape(FIELD + field.name)
    label = f'<label for="{name}">{escape(field.label)}</label>'
    value = field.value
    if field.kind in ("choice", "boolean"):
        choices = field.choices if field.kind == "choice" else ("true", "false")
        shown = _choice_value(field, value)
        options = [f'<option value="">{escape(texts.EMPTY_CHOICE)}</option>'] if shown == "" else []
        for choice in choices:
            selected = " selected" if choice == shown else ""
            words = _YES_NO.get(choice, choice) if field.kind == "boolean" else choice
            options.append(f'<option value="{escape(choice)}"{selected}>{escape(words)}</option>')
        return f'{label}<select id="{name}" name="{name}">{"".join(options)}</select>'
    text = "" if value is None else shown_value(value)
    if field.kind in ("number", "integer"):
        step = "1" if field.kind == "integer" else "any"
        attributes = f'type="number" step="{step}" value="{escape(text)}"'
        return f'{label}<input id="{name}" name="{name}" {attributes}>'
    return (
        f'{label}<textarea id="{name}" name="{name}" rows="{_rows(text)}">{escape(text)}</textarea>'
    )


_YES_NO: Final = {"true": texts.TRUE, "false": texts.FALSE}


def _choice_value(field: PromptField, value: Any) -> str:
    """The option a field's value is: its choice's text (``choice_text``), or none (the
    empty choice, which leaves the argument as it is: a value none of the choices is
    never replaced by the first one unseen)."""
    if value is None or (field.kind == "boolean" and not isinstance(value, bool)):
        return ""
    shown = choice_text(value)
    return shown if field.kind == "boolean" or shown in field.choices else ""


def _rows(text: str) -> int:
    return min(10, max(1, text.count("\n") + 1, len(text) // 60 + 1))
