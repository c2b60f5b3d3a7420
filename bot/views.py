"""Building the chat-neutral views from the runtime's pending calls.

Also the run metadata the core keeps with each run: the thread it was asked in.
"""

from __future__ import annotations

import json
from contextlib import suppress
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any, Final

from agents import PendingInfo

from . import texts
from .chat_state import ask_of
from .types import (
    ApprovalCard,
    BatchCard,
    CardPointer,
    CardStatus,
    FieldKind,
    Notice,
    Person,
    PostKind,
    PostMark,
    Prompt,
    PromptField,
    PromptStatus,
    Reply,
    ThreadKey,
    View,
    tool_label,
)


def approval_card(
    info: PendingInfo,
    *,
    expires_at: datetime,
    status: CardStatus = "pending",
    requester: Person | None = None,
    decided_by: tuple[Person, ...] = (),
    reason: str | None = None,
    approvals: tuple[Person, ...] = (),
    quorum: int = 1,
    schema: dict[str, Any] | None = None,
    previous_args: dict[str, Any] | None = None,
    edited_by: Person | None = None,
    grant_for: tuple[str, ...] = (),
    granted_for: str | None = None,
    respond: bool = False,
    never_for: tuple[str, ...] = (),
    declined_for: str | None = None,
    ask: str = "",
    deciders: tuple[str, ...] = (),
) -> ApprovalCard:
    """The card for a call waiting for approval (or already decided).

    ``requester``, ``decided_by`` and ``approvals`` are how the card names those
    people; ``quorum`` is how many approvals the call needs. ``schema``: the
    tool's input schema, when its arguments may be edited (see ``edit_fields``).
    """
    fields = edit_fields(info, schema) if schema is not None and quorum == 1 else ()
    return ApprovalCard(
        run_id=info.run_id,
        tool_call_id=info.tool_call_id,
        tool_name=info.tool_name,
        args=shown_args(info),
        agent_path=info.agent_path,
        requester=requester,
        expires_at=expires_at,
        status=status,
        decided_by=decided_by,
        reason=reason,
        approvals=approvals,
        quorum=quorum,
        source=info.source,
        editable=bool(fields) and info.answer is None,
        fields=fields,
        previous_args=previous_args,
        edited_by=edited_by,
        grant_for=grant_for if quorum == 1 and info.answer is None else (),
        granted_for=granted_for,
        respond=respond and status == "pending",
        never_for=never_for if status == "pending" else (),
        declined_for=declined_for,
        ask=ask,
        deciders=deciders if status == "pending" else (),
        remark=info.remark if status == "pending" else None,
    )


def edit_fields(info: PendingInfo, schema: dict[str, Any]) -> tuple[PromptField, ...]:
    """A call's arguments as form fields, each starting from the value the card shows.

    Only a flat set of plain values can be edited in a form: a tool whose
    arguments include lists or objects gets no fields (and no Edit). A tool whose
    schema names no arguments (a client's: any object) is edited by those it was
    called with, each keeping its type.
    """
    if schema.get("type") == "object" and "properties" not in schema:
        schema = _schema_of_args(info.args)
    fields = prompt_fields(schema)
    plain = (str, int, float, bool, type(None))
    if not fields or not all(isinstance(v, plain) for v in info.args.values()):
        return ()
    if set(info.args) - {f.name for f in fields} or _structured(schema):
        return ()
    return tuple(replace(f, value=info.args.get(f.name)) for f in fields)


def _schema_of_args(args: dict[str, Any]) -> dict[str, Any]:
    """A schema that takes ``args`` as they are typed (JSON's types), every one needed;
    none (no fields) when one is not a plain value."""
    kinds = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if not all(type(value) in kinds for value in args.values()):
        return {}
    properties = {name: {"type": kinds[type(value)]} for name, value in args.items()}
    return {"type": "object", "properties": properties, "required": sorted(args)}


def _structured(schema: dict[str, Any]) -> bool:
    """Whether some property of ``schema`` takes a list or an object (no form field can)."""
    for spec in (schema.get("properties") or {}).values():
        options = [spec, *spec.get("anyOf", ())] if isinstance(spec, dict) else []
        kinds = {o.get("type") for o in options if isinstance(o, dict)}
        if kinds & {"array", "object"} or any("$ref" in o for o in options if isinstance(o, dict)):
            return True
    return False


def edit_form(info: PendingInfo, fields: tuple[PromptField, ...]) -> Prompt:
    """The form an Edit opens: the arguments (``edit_fields``) to change, then approve."""
    return _card_form(info, fields, texts.EDIT_INTRO)


def _card_form(info: PendingInfo, fields: tuple[PromptField, ...], intro: str) -> Prompt:
    """A form a card's button opens about its call: ``intro`` (naming the tool), then
    ``fields``."""
    form = Prompt(
        run_id=info.run_id,
        tool_call_id=info.tool_call_id,
        tool_name=info.tool_name,
        agent_path=info.agent_path,
        question="",
        fields=fields,
        source=info.source,
    )
    return replace(form, question=intro.format(tool=tool_label(form)))


RESPONSE_INPUT = "response"
"""The name of Respond's one field (``Click.values``): the answer in the tool's place."""


def response_field() -> PromptField:
    """Respond's one field: the answer a model gets in the tool's place."""
    return PromptField(name=RESPONSE_INPUT, label=texts.RESPONSE_LABEL, required=True)


def respond_prompt(info: PendingInfo) -> Prompt:
    """The form Respond opens: the one text a model gets in the tool's place."""
    return _card_form(info, (response_field(),), texts.RESPOND_HINT)


def shown_args(info: PendingInfo) -> dict[str, Any]:
    """What a card shows runs: the arguments, and the fields of an earlier answer
    that the tool receives beside them (those naming an argument are in it)."""
    shown = dict(info.args)
    if isinstance(info.answer, dict):
        shown.update({k: v for k, v in info.answer.items() if k not in shown})
    elif info.answer is not None:  # a reply taken as it is (the tool has no resume schema)
        shown.setdefault(texts.ANSWER_FIELD, info.answer)
    return shown


def prompt(
    info: PendingInfo,
    *,
    error: str | None = None,
    status: PromptStatus = "waiting",
    decided_by: Person | None = None,
) -> Prompt:
    """The question of a suspended tool; ``fields`` are its ``resume_schema`` properties."""
    return Prompt(
        run_id=info.run_id,
        tool_call_id=info.tool_call_id,
        tool_name=info.tool_name,
        agent_path=info.agent_path,
        question=question_text(info),
        fields=prompt_fields(info.resume_schema),
        error=error,
        status=status,
        decided_by=decided_by,
        source=info.source,
    )


def prompt_fields(schema: dict[str, Any] | None) -> tuple[PromptField, ...]:
    """What an answer's JSON schema asks for, one field per property, in order."""
    schema = schema or {}
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return ()
    required = set(schema.get("required") or ())
    return tuple(
        _field(name, spec if isinstance(spec, dict) else {}, name in required)
        for name, spec in properties.items()
    )


def _field(name: str, spec: dict[str, Any], required: bool) -> PromptField:
    # An optional field is ``anyOf: [{...}, {"type": "null"}]`` (pydantic); the other half says.
    options = [o for o in spec.get("anyOf", ()) if isinstance(o, dict) and o.get("type") != "null"]
    typed = {**options[0], **spec} if len(options) == 1 else spec
    enum = _enum(typed)
    choices = tuple(choice_text(v) for v in enum)
    kind: FieldKind = "choice" if choices else _KINDS.get(str(typed.get("type")), "text")
    title = typed.get("title")
    description = typed.get("description")
    return PromptField(
        name=name,
        label=title if isinstance(title, str) and title.strip() else name,
        kind=kind,
        choices=choices,
        json_choices=any(not isinstance(v, str) for v in enum),
        required=required,
        description=description if isinstance(description, str) else None,
    )


_KINDS: dict[str, FieldKind] = {"number": "number", "integer": "integer", "boolean": "boolean"}


def _enum(spec: dict[str, Any]) -> list[Any]:
    """The values an enum property allows (``enum``, or ``oneOf`` of ``const``s)."""
    if isinstance(spec.get("enum"), list):
        return list(spec["enum"])
    consts = [o.get("const") for o in spec.get("oneOf", ()) if isinstance(o, dict)]
    return consts if consts and all(c is not None for c in consts) else []


def choice_text(value: Any) -> str:
    """A choice as a form shows and sends it (JSON for anything but text: ``true``, ``1``)."""
    return value if isinstance(value, str) else json.dumps(value)


def form_answer(fields: tuple[PromptField, ...], values: dict[str, Any]) -> dict[str, Any]:
    """A form's values (text, as platforms send them) as the answer's types.

    An empty field is left out; a value that does not convert stays as it was,
    so validating the answer names the field and why.
    """
    answer: dict[str, Any] = {}
    for field in fields:
        value = values.get(field.name)
        if isinstance(value, str):
            value = value.strip()
        if value is None or value == "":
            continue
        answer[field.name] = _typed(field, value)
    return answer


def _typed(field: PromptField, value: Any) -> Any:
    kind = field.kind
    if not isinstance(value, str):
        return value
    if kind == "choice" and field.json_choices and value in field.choices:
        with suppress(ValueError):
            return json.loads(value)
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value)
    except ValueError:
        return value
    if kind == "boolean" and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


def question_text(info: PendingInfo) -> str:
    """A suspended tool's question: its payload's ``message``, else a readable rendering."""
    payload = info.suspend_payload
    fallback = texts.QUESTION_FALLBACK.format(tool=info.tool_name)
    if isinstance(payload, dict):
        message = payload.get("message")
        if isinstance(message, str) and message.strip():
            return message.strip()
        if payload:
            return "\n".join([fallback, *(f"• {k}: {_plain(v)}" for k, v in payload.items())])
    elif isinstance(payload, str) and payload.strip():
        return payload.strip()
    elif payload is not None:
        return f"{fallback}\n{_plain(payload)}"
    return fallback


def answer_mark(run_id: str) -> PostMark:
    """The mark of a finished run's answer (its last part, where it is split)."""
    return PostMark(run_id=run_id, post="answer")


def card_mark(card: ApprovalCard, *, pointer: bool = False) -> PostMark:
    """The mark of a call's card (each copy the policy sends elsewhere carries it too), or
    of the pointer to it left in the requester's thread."""
    post: PostKind = "pointer" if pointer else "card"
    return PostMark(run_id=card.run_id, post=post, call=card.tool_call_id, ask=card.ask)


def question_mark(info: PendingInfo, *, cause: str | None = None) -> PostMark:
    """The mark of a call's question; ``cause`` for one asked again (see ``PostMark``)."""
    return PostMark(
        run_id=info.run_id,
        post="question",
        call=info.tool_call_id,
        ask=ask_of(info),
        cause=cause,
    )


BEGUN: Final = 3
"""The fewest letters a message must show to be taken for the start of an answer
(``begins``), unless the answer is that short: fewer tell too little."""


def begins(shown: str, words: str) -> bool:
    """Whether a message showing ``shown`` is the start of ``words`` (a live answer cut
    short): its letters and digits, in order, begin those of ``words``, whatever marks
    the platform drew around them; at least ``BEGUN`` of them (an empty message
    begins nothing)."""
    seen, whole = _letters(shown), _letters(words)
    return len(seen) >= min(BEGUN, len(whole)) > 0 and whole.startswith(seen)


def _letters(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())


def failure_notice(error: str) -> Notice:
    """What a thread is told of its run that failed: why (``error_mark`` marks it)."""
    return Notice(text=texts.RUN_FAILED.format(error=error))


def error_mark(run_id: str) -> PostMark:
    """The mark of the notice that says why a run failed (a run fails once)."""
    return PostMark(run_id=run_id, post="error")


def notice_mark(about: PendingInfo, *, cause: str) -> PostMark:
    """The mark of a notice about a waiting call, said in reply to the message whose work
    is the intake entry's run ``cause``: each new message about it is told again."""
    return PostMark(
        run_id=about.run_id,
        post="notice",
        call=about.tool_call_id,
        ask=ask_of(about),
        cause=cause,
    )


def post_mark(view: View) -> PostMark | None:
    """The mark a view carries of itself: a finished run's answer (``Reply.feedback``), a
    card, a pointer; ``None`` for anything else (a question's needs its call's ask:
    ``question_mark``; an error or a notice says nothing of its run: ``error_mark``,
    ``notice_mark``)."""
    if isinstance(view, Reply):
        return answer_mark(view.feedback) if view.feedback else None
    if isinstance(view, ApprovalCard):
        return card_mark(view)
    if isinstance(view, BatchCard):
        return card_mark(view.cards[0])
    if isinstance(view, CardPointer):
        return card_mark(view.card, pointer=True)
    return None


def run_metadata(thread: ThreadKey) -> dict[str, Any]:
    """What the core keeps with a run: the thread it was asked in."""
    return {"thread": asdict(thread)}


def thread_of(metadata: dict[str, Any]) -> ThreadKey | None:
    """The thread a run's metadata names, if any."""
    data = metadata.get("thread")
    try:
        return ThreadKey(**data) if isinstance(data, dict) else None
    except TypeError:
        return None


class ReplyBuffer:
    """The top agent's text of one stream, with a paragraph break between model steps.

    Without the break, "Let me check." and "It is up." from two model turns
    would run together as "Let me check.It is up.".
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._new_step = False

    def add(self, text: str) -> str:
        """Append a text delta; returns what was appended (a paragraph break first, when a
        new step begins)."""
        added = "\n\n" + text if self._new_step and self._parts else text
        self._new_step = False
        self._parts.append(added)
        return added

    def step_ended(self) -> None:
        """Note that something other than text happened (a tool call, a result)."""
        self._new_step = True

    def take(self) -> str:
        """The text so far (stripped), emptying the buffer."""
        text = "".join(self._parts).strip()
        self._parts.clear()
        self._new_step = False
        return text


def _plain(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(str(v) for v in value)
    return json.dumps(value, ensure_ascii=False, default=str)
