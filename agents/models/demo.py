"""An offline demo model: a few documented requests, understood by patterns.

``BOT_MODEL=demo`` runs the bot with no API key and no network. The model is not
an AI: it recognises the requests listed in ``DEMO_REQUESTS`` and drives whatever
agents it is given through the run loop, the way a language model would:

- with ``agent-<key>`` tools (a supervisor), it hands the user's text to the
  sub-agent whose description fits the request;
- with the request's own tool (a sub-agent), it calls that tool with arguments
  parsed from the text;
- after tool results, it answers from the results it got back, errors and
  declines included. It never makes data up.

Anything else gets an honest answer listing what it understands (``DEMO_HELP``).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import Message, ToolCallPart, ToolResultPart
from ..spec import DELEGATION_PREFIX
from ..usage import Usage
from .base import (
    ModelEvent,
    ModelFinish,
    ModelRequest,
    StructuredRequest,
    TextDelta,
    ToolCallEvent,
    ToolSpec,
)


@dataclass(frozen=True, kw_only=True)
class _Intent:
    """One request the demo model understands, and the tool call it becomes."""

    tool: str
    pattern: re.Pattern[str]
    topics: tuple[str, ...]
    """Words that pick the sub-agent for this request from the delegation tools' descriptions."""
    done: str
    """Lead of the answer when the tool returned a result (formatted with the args)."""
    attempt: str
    """What was attempted, for answers about errors and declines."""
    convert: Callable[[dict[str, str]], dict[str, Any]] = dict

    def parse(self, text: str) -> dict[str, Any] | None:
        match = self.pattern.search(text)
        if match is None:
            return None
        return self.convert({k: v for k, v in match.groupdict().items() if v is not None})


def _refund_args(found: dict[str, str]) -> dict[str, Any]:
    return {"order_id": found["order_id"], "amount": float(found["amount"])}


def _status_args(found: dict[str, str]) -> dict[str, Any]:
    return {"service": found.get("service") or found["named"]}


_ID = r"#?(?P<{}>[A-Za-z0-9][\w-]*)"

_INTENTS: tuple[_Intent, ...] = (
    _Intent(
        tool="find_user",
        pattern=re.compile(
            r"\b(?:find|look\s*up|show|get)\s+user(?:\s+with\s+id)?\s+" + _ID.format("user_id"),
            re.IGNORECASE,
        ),
        topics=("user", "users"),
        done="User {user_id}",
        attempt="find user {user_id}",
    ),
    _Intent(
        tool="delete_record",
        pattern=re.compile(
            r"\b(?:delete|remove)\s+record\s+" + _ID.format("record_id"), re.IGNORECASE
        ),
        topics=("record", "records", "delete"),
        done="Deleted record {record_id}",
        attempt="delete record {record_id}",
    ),
    _Intent(
        tool="deploy_service",
        pattern=re.compile(
            r"\bdeploy\s+(?P<service>[\w-]+)(?:\s+(?:version\s+)?(?P<version>v?\d[\w.+-]*))?"
            r"\s+to\s+(?P<environment>[\w-]+)",
            re.IGNORECASE,
        ),
        topics=("deploy", "deploys", "deployment", "deployments", "service", "services"),
        done="Deployed {service} to {environment}",
        attempt="deploy {service} to {environment}",
    ),
    _Intent(
        tool="service_status",
        pattern=re.compile(
            r"\b(?:status\s+of|how\s+is)\s+(?:the\s+)?(?P<service>[\w-]+)"
            r"(?:\s+(?:service|doing))?\s*\??\s*$"
            r"|^\s*(?P<named>[\w-]+)\s+status\s*\??\s*$",
            re.IGNORECASE,
        ),
        topics=("status", "service", "services", "deploy", "deployment", "deployments"),
        done="Status of {service}",
        attempt="tell the status of {service}",
        convert=_status_args,
    ),
    _Intent(
        tool="refund",
        pattern=re.compile(
            r"\brefund\s+(?:order\s+)?"
            + _ID.format("order_id")
            + r"\s+[$€£]?(?P<amount>\d+(?:\.\d+)?)",
            re.IGNORECASE,
        ),
        topics=("refund", "refunds", "billing", "order", "orders"),
        done="Refunded order {order_id}",
        attempt="refund order {order_id}",
        convert=_refund_args,
    ),
    # The MCP ticket desk of examples/bot.toml: its tools are <server>__<tool>.
    _Intent(
        tool="tickets__list_tickets",
        pattern=re.compile(r"\b(?:list|show)\s+(?:all\s+|the\s+)?tickets\b", re.IGNORECASE),
        topics=("ticket", "tickets"),
        done="The tickets",
        attempt="list the tickets",
    ),
    _Intent(
        tool="tickets__show_ticket",
        pattern=re.compile(
            r"\b(?:show|get|look\s*up)\s+ticket\s+" + _ID.format("ticket_id"), re.IGNORECASE
        ),
        topics=("ticket", "tickets"),
        done="Ticket {ticket_id}",
        attempt="show ticket {ticket_id}",
    ),
    _Intent(
        tool="tickets__reopen_ticket",
        pattern=re.compile(r"\breopen\s+ticket\s+" + _ID.format("ticket_id"), re.IGNORECASE),
        topics=("ticket", "tickets"),
        done="Ticket {ticket_id}",
        attempt="reopen ticket {ticket_id}",
    ),
    _Intent(
        tool="tickets__close_ticket",
        pattern=re.compile(r"\bclose\s+ticket\s+" + _ID.format("ticket_id"), re.IGNORECASE),
        topics=("ticket", "tickets"),
        done="Ticket {ticket_id}",
        attempt="close ticket {ticket_id}",
    ),
)

DEMO_REQUESTS: tuple[tuple[str, str], ...] = (
    ("find user 12345", "look a user up"),
    ("delete record abc-123", "delete a record (asks for approval)"),
    ("deploy api 1.4.2 to staging", "deploy a version (production asks for approval)"),
    ("deploy web to staging", "deploy; you are asked which version (reply in the thread)"),
    ("status of web", "what version runs where (ask it while a card waits)"),
    ("refund order A-1001 50", "refund part of an order (over 100 asks for approval)"),
    ("show ticket T-100", "an MCP server's read-only tool (with BOT_CONFIG=examples/bot.toml)"),
    ("close ticket T-101", "an MCP tool that changes data (asks for approval)"),
    (
        "reopen ticket T-102",
        "asks for approval, then the MCP server asks why (reply, or decline to answer)",
    ),
    ("help", "show this list"),
)
"""Example requests the demo model understands, each with what it does.

The notes in parentheses are what the bundled ``examples.ops`` agents do with them.
"""

DEMO_PROMPTS = (
    ("Delete a record", "delete record abc-123"),
    ("Deploy to staging", "deploy web to staging"),
    ("Refund an order", "refund order A-1001 150"),
    ("Look a user up", "find user 12345"),
)
"""Requests to suggest when the demo runs (a title, the request): one of each kind."""

DEMO_HELP = "\n".join(
    [
        "I'm the offline demo model (BOT_MODEL=demo), not an AI. I understand only these "
        "requests and hand them to the bot's agents, whose tools run for real; the notes "
        "say what the bundled example ops agents (the default BOT_AGENT) do with them:",
        *(f"- {example}: {meaning}" for example, meaning in DEMO_REQUESTS),
    ]
)
"""The help text: what the demo model answers to ``help`` and to requests it does not know."""

DEMO_NOT_UNDERSTOOD = (
    'Sorry, I don\'t understand "{text}". The requests I know are listed above '
    "(or send `help` to see them again)."
)
"""The answer to a request the demo model does not know, once the conversation has the list."""

_HELP = re.compile(r"^\s*(?:help|\?|what can you do\??)\s*$", re.IGNORECASE)
_NOTES = re.compile(r"\A\s*(?:\[[^\n]*\]\s*\n)+")
"""Bracketed lines before a request (what the person is looking at, which a chat layer
puts first): context for a model that reads it, not part of the request."""


class DemoModel:
    """A deterministic, offline ``Model`` for the documented demo requests.

    Text is streamed word by word, like a real model's. ``structured`` extracts
    fields with simple rules (see ``extract_fields``).
    """

    @property
    def name(self) -> str:
        """Always ``demo``."""
        return "demo"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Answer one request: a tool call for a new request, or text after results."""
        text, calls = _respond(list(request.messages), request.tools)
        for piece in re.findall(r"\S+\s*|\s+", text):
            yield TextDelta(text=piece)
        for call in calls:
            yield ToolCallEvent(call=call)
        yield ModelFinish(
            stop_reason="tool_use" if calls else "end_turn",
            usage=Usage(output_tokens=len(text.split()), requests=1),
        )

    async def structured(self, request: StructuredRequest) -> dict[str, Any]:
        """Extract the fields of ``request.schema`` from the user's reply."""
        return extract_fields(_reply_text(request.messages), request.schema)


# -- answering ----------------------------------------------------------------


def _respond(messages: list[Message], tools: Sequence[ToolSpec]) -> tuple[str, list[ToolCallPart]]:
    last = messages[-1] if messages else Message.user("")
    if last.role == "user" and last.tool_results:
        return _answer(messages, last.tool_results), []
    text = _NOTES.sub("", last.text).strip()
    if not text or _HELP.match(text):
        return DEMO_HELP, []
    for intent in _INTENTS:
        args = intent.parse(text)
        if args is None:
            continue
        target = _route(intent, tools)
        if target is None:
            attempt = intent.attempt.format_map(_Missing(args))
            return f"I understood that as: {attempt}. But I have no tool or agent for it here.", []
        if target.name.startswith(DELEGATION_PREFIX):
            args = {"task": text}
        return "", [_call(target.name, args)]
    if any(m.role == "assistant" and DEMO_HELP in m.text for m in messages[:-1]):
        # The list is above in this conversation: a short hint, not the list again.
        return DEMO_NOT_UNDERSTOOD.format(text=text), []
    return f'Sorry, I don\'t understand "{text}".\n\n{DEMO_HELP}', []


def _route(intent: _Intent, tools: Sequence[ToolSpec]) -> ToolSpec | None:
    """The intent's own tool if offered, else the best-fitting delegation tool."""
    for spec in tools:
        if spec.name == intent.tool:
            return spec
    best: tuple[int, ToolSpec] | None = None
    for spec in tools:
        if not spec.name.startswith(DELEGATION_PREFIX):
            continue
        about = f"{spec.name} {spec.description}".lower()
        words = set(re.findall(r"[\w-]+", about))
        # A description naming the tool itself is the surest sign; topic words break ties.
        score = 10 * (intent.tool in about) + sum(topic in words for topic in intent.topics)
        if score and (best is None or score > best[0]):
            best = (score, spec)
    return best[1] if best else None


def _call(tool_name: str, args: dict[str, Any]) -> ToolCallPart:
    # Globally unique: tools use the call id as an idempotency key, so ids must
    # never repeat, not even after a restart.
    return ToolCallPart(tool_call_id=f"demo_{uuid.uuid4().hex}", tool_name=tool_name, args=args)


def _answer(messages: list[Message], results: list[ToolResultPart]) -> str:
    calls = {c.tool_call_id: c for m in messages if m.role == "assistant" for c in m.tool_calls}
    lines = []
    for result in results:
        call = calls.get(result.tool_call_id)
        lines.append(_describe(result, call.args if call else {}))
    return "\n".join(lines)


def _describe(result: ToolResultPart, args: dict[str, Any]) -> str:
    """One honest sentence about one tool result: the arguments it ran with (a person's
    edit over the call's own), the result's content."""
    if result.tool_name.startswith(DELEGATION_PREFIX):
        return result.content  # the sub-agent's own answer, relayed as it is
    intent = next((i for i in _INTENTS if i.tool == result.tool_name), None)
    if result.given_by is not None:
        attempt = intent.attempt.format_map(_Missing(args)) if intent else f"run {result.tool_name}"
        return GIVEN_NOTE.format(
            attempt=attempt, who=result.given_by, said=_sentence(result.content)
        )
    if result.edited_args is not None:
        args = result.edited_args
    edited = EDITED_NOTE if result.edited_args is not None else ""
    fields = _Missing(args)
    if result.is_error:
        attempt = intent.attempt.format_map(fields) if intent else f"run {result.tool_name}"
        return f"I could not {attempt}{edited}. {_sentence(result.content)}"
    if intent is None:
        return f"{result.tool_name}{edited} returned: {_render(result.content)}"
    said = {str(v) for k, v in args.items() if f"{{{k}}}" in intent.done}
    return f"{intent.done.format_map(fields)}{edited}: {_render(result.content, said)}"


EDITED_NOTE = " (arguments edited before approval)"
"""Follows what was done when a person edited the call's arguments before approving it."""
GIVEN_NOTE = "I did not {attempt}: {who} answered for it instead: {said}"
"""The answer about a call a person answered for instead of letting it run."""


class _Missing(dict[str, Any]):
    """Format arguments, showing a placeholder for ones the call did not have."""

    def __missing__(self, key: str) -> str:
        return f"<{key}>"


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else f"{text}."


def _render(content: str, said: Collection[str] = ()) -> str:
    """Tool output as ``key: value`` pairs (JSON objects) or as it is (text).

    Top-level values already ``said`` in the answer's lead are not repeated.
    """
    try:
        value = json.loads(content)
    except ValueError:
        return _sentence(content)
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if str(v) not in said}
    return _sentence(_render_value(value))


def _render_value(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(
            f"{str(k).replace('_', ' ')}: {_render_value(v)}"
            for k, v in value.items()
            if v is not None
        )
    if isinstance(value, list):
        return ", ".join(_render_value(v) for v in value) or "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


# -- structured output --------------------------------------------------------

_REPLY_MARKER = "The user replied:"


def _reply_text(messages: Sequence[Message]) -> str:
    """The last user text; after the auto-resume prompt's marker, only the reply."""
    text = next((m.text for m in reversed(messages) if m.role == "user" and m.text), "")
    _, marker, reply = text.rpartition(_REPLY_MARKER)
    return (reply if marker else text).strip()


_VALUE = {
    "integer": r"-?\d+",
    "number": r"-?\d+(?:\.\d+)?",
    "boolean": r"yes|no|true|false",
    "string": r"\"[^\"]*\"|[^,;\n]+",
}


def extract_fields(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Fill the properties of a JSON schema from free text, by simple rules.

    In order: a labelled value (``seats: 4``, ``seats=4``, ``4 seats``); then,
    for what is left, a lone text field takes the whole text, a lone number field
    takes the text's only number, a lone yes/no field takes a yes or no, and an
    enum field takes the one allowed value the text mentions. What no rule finds
    is left out, so validation reports it instead of a guess.
    """
    defs: dict[str, Any] = schema.get("$defs", {})
    properties = {name: _resolve(prop, defs) for name, prop in schema.get("properties", {}).items()}
    kinds = {name: _kind(prop) for name, prop in properties.items()}
    found: dict[str, Any] = {}
    for name, kind in kinds.items():
        raw = _labelled(text, name, kind)
        if raw is not None:
            found[name] = _coerce(raw, kind)
    left = {name: kind for name, kind in kinds.items() if name not in found}
    for name, kind in left.items():
        prop = properties[name]
        same_kind = [n for n, k in left.items() if k == kind]
        if kind == "enum":
            allowed = next(o["enum"] for o in prop.get("anyOf", [prop]) if "enum" in o)
            hits = [v for v in allowed if re.search(rf"\b{re.escape(str(v))}\b", text, re.I)]
            if len(hits) == 1:
                found[name] = hits[0]
        elif len(same_kind) != 1:
            continue
        elif kind == "string" and text:
            found[name] = text
        elif kind in ("integer", "number"):
            numbers = re.findall(_VALUE[kind], text)
            if len(numbers) == 1:
                found[name] = _coerce(numbers[0], kind)
        elif kind == "boolean":
            words = set(re.findall(rf"\b(?:{_VALUE['boolean']})\b", text, re.I))
            if len(words) == 1:
                found[name] = _coerce(words.pop(), kind)
    return found


def _resolve(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A property with local ``$ref``s (pydantic's enums and models) replaced by their target."""
    if "anyOf" in prop:
        return {**prop, "anyOf": [_resolve(option, defs) for option in prop["anyOf"]]}
    ref = prop.get("$ref", "")
    if ref.startswith("#/$defs/"):
        target: dict[str, Any] = defs.get(ref.removeprefix("#/$defs/"), {})
        return target
    return prop


def _kind(prop: dict[str, Any]) -> str:
    """The JSON type of a property (``enum`` for a fixed set), through ``anyOf`` (optional)."""
    options = prop.get("anyOf", [prop])
    if any("enum" in o for o in options):
        return "enum"
    types = [o.get("type") for o in options if o.get("type") not in (None, "null")]
    return str(types[0]) if types else "string"


def _labelled(text: str, name: str, kind: str) -> str | None:
    if kind not in _VALUE:
        return None
    label = re.escape(name).replace("_", "[ _]")
    value = _VALUE[kind]
    before = re.search(rf"\b{label}\s*[:=]\s*(?P<v>{value})", text, re.IGNORECASE)
    if before is None and kind != "string":
        before = re.search(rf"\b{label}\s+(?:is\s+)?(?P<v>{value})\b", text, re.IGNORECASE)
        before = before or re.search(rf"(?P<v>{value})\s+{label}\b", text, re.IGNORECASE)
    return before.group("v").strip().strip('"') if before else None


def _coerce(raw: str, kind: str) -> Any:
    if kind == "integer":
        return int(raw)
    if kind == "number":
        return float(raw)
    if kind == "boolean":
        return raw.lower() in ("yes", "true")
    return raw
