"""Claude through the Anthropic Messages API, as a ``Model``."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import random
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

import anthropic
import httpx2
from anthropic import AsyncAnthropic, Omit, omit
from anthropic.types import (
    AssistantMessageParam,
    CacheControlEphemeralParam,
    InputJSONDelta,
    MessageParam,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStreamEvent,
    TextBlock,
    TextBlockParam,
    ToolChoiceToolParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlock,
    ToolUseBlockParam,
    UserMessageParam,
)
from anthropic.types import TextDelta as AnthropicTextDelta

from ..messages import Message, TextPart, ToolCallPart, ToolResultPart
from ..texts import EDITED, GIVEN_BY, MODEL_PROBLEMS, ModelProblem
from ..usage import Usage
from . import _guard
from .base import (
    ModelError,
    ModelEvent,
    ModelFinish,
    ModelRequest,
    StopReason,
    StructuredRequest,
    TextDelta,
    ToolCallEvent,
    ToolSpec,
)

# Not "claude-sonnet-4-5": anthropic 2.14 lists it in DEPRECATED_MODELS and warns on every call.
log = logging.getLogger(__name__)

DEFAULT_MODEL: Final = "claude-sonnet-5-5"
DEFAULT_MAX_RETRIES: Final = 4
DEFAULT_TIMEOUT: Final = 60.0

Problem = ModelProblem
USER_MESSAGES = MODEL_PROBLEMS
"""What people in a chat see for each kind of failure (kept in ``agents.texts``)."""

STREAM_RETRY_FIRST = 0.5
STREAM_RETRY_MAX = 8.0
"""Seconds before retrying a stream that reported an overload: doubling, with jitter."""
_RETRIED_IN_STREAM: Final = frozenset({"overloaded_error", "api_error"})
_CACHED: Final = CacheControlEphemeralParam(type="ephemeral")
_TOO_LONG: Final = ("prompt is too long", "too many tokens", "context window", "context length")
"""What Anthropic's 400 says when the conversation itself is too long."""

_PROBLEM_BY_ERROR_TYPE: Final[dict[str, Problem]] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limited",
    "authentication_error": "auth",
    "permission_error": "permission",
    "billing_error": "billing",
    "not_found_error": "not_found",
    "invalid_request_error": "invalid_request",
    "timeout_error": "timeout",
    "api_error": "server",
}

_PROBLEM_BY_STATUS: Final[dict[int, Problem]] = {
    400: "invalid_request",
    401: "auth",
    402: "billing",
    403: "permission",
    404: "not_found",
    408: "timeout",
    413: "conversation_too_long",
    429: "rate_limited",
    504: "timeout",
    529: "overloaded",
}

_STOP_REASONS: Final[dict[str, StopReason]] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
    # The context window filled up before max_tokens: for the run loop, the same outcome.
    "model_context_window_exceeded": "max_tokens",
}

_LENGTH_LIMITS: Final = frozenset(
    api_reason for api_reason, reason in _STOP_REASONS.items() if reason == "max_tokens"
)
"""API stop reasons meaning the answer was cut off by a length limit."""

# The SDK's own errors, httpx2 errors raised while reading a stream body (the SDK wraps
# only the connect/send phase), and the decode errors it lets through on garbled bodies.
_CLIENT_ERRORS: Final = (
    anthropic.AnthropicError,
    httpx2.HTTPError,
    json.JSONDecodeError,
    UnicodeDecodeError,
)


class AnthropicModel:
    """Claude via ``anthropic.AsyncAnthropic``; the SDK retries overloads and rate limits.

    Args:
        model_name: The Claude model to call.
        api_key: The API key; when None the SDK looks in ``ANTHROPIC_API_KEY`` and
            its other credential sources.
        base_url: The API host root; when None, ``ANTHROPIC_BASE_URL`` or the public API.
        max_retries: Retries of 408/409/429/5xx/529 answers and connection errors.
        timeout: Seconds allowed for each phase of a request (connect, each read).
        max_tokens: The answer length limit sent with every request.
        client: A ready client; ``api_key``, ``base_url``, ``max_retries`` and
            ``timeout`` are then ignored, and ``aclose`` leaves it open.

    Raises:
        ModelError: No api_key was given and the SDK's own credential sources
            (an explicitly chosen profile or config directory) are broken.
    """

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float = DEFAULT_TIMEOUT,
        max_tokens: int = 4096,
        client: AsyncAnthropic | None = None,
    ) -> None:
        self._model_name = model_name
        self._max_tokens = max_tokens
        self._owns_client = client is None
        try:
            self._client = client or AsyncAnthropic(
                api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
            )
        except anthropic.CredentialsError as err:
            raise _model_error(err) from err

    @classmethod
    def from_env(
        cls,
        model_name: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
    ) -> AnthropicModel:
        """Build from the environment; an argument that is not None wins over its variable.

        Environment variables (empty counts as unset):

        - ``ANTHROPIC_API_KEY``: the API key (else the SDK's other credential sources);
        - ``ANTHROPIC_BASE_URL``: the API host root (default: the public API);
        - ``BOT_MODEL``: the Claude model name (default ``DEFAULT_MODEL``);
        - ``ANTHROPIC_MAX_RETRIES``: how many times a request is retried after a
          429, 529, other 5xx, 408 or 409 answer or a connection error, with
          backoff: a whole number, 0 or more (default 4);
        - ``ANTHROPIC_TIMEOUT``: seconds allowed for each phase of a request
          (connecting, then each read of the stream): a number above 0 (default 60).

        Raises:
            ValueError: ``ANTHROPIC_MAX_RETRIES`` or ``ANTHROPIC_TIMEOUT`` (or the
                matching argument) is not a valid value; the message names it.
            ModelError: No key was found and the SDK's own credential sources are broken.
        """
        if max_retries is None:
            max_retries = _env_number(
                "ANTHROPIC_MAX_RETRIES", int, DEFAULT_MAX_RETRIES, _MAX_RETRIES_RULE
            )
        if timeout is None:
            timeout = _env_number("ANTHROPIC_TIMEOUT", float, DEFAULT_TIMEOUT, _TIMEOUT_RULE)
        _check_limits(max_retries, timeout)
        return cls(
            model_name or os.environ.get("BOT_MODEL") or DEFAULT_MODEL,
            api_key=api_key or os.environ.get("ANTHROPIC_API_KEY") or None,
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
            max_retries=max_retries,
            timeout=timeout,
        )

    @property
    def name(self) -> str:
        """``anthropic:<model name>``, for logs and metrics."""
        return f"anthropic:{self._model_name}"

    @property
    def model_name(self) -> str:
        """The Claude model this adapter calls."""
        return self._model_name

    async def aclose(self) -> None:
        """Close the HTTP client, if this adapter created it."""
        if self._owns_client:
            await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """Stream one answer: text deltas, complete tool calls, then one ``ModelFinish``.

        Raises:
            ModelError: The request failed after the SDK's retries, or the stream broke.
            RuntimeError: Model requests are switched off (``_guard``) for this host.
        """
        self._check_ready()
        retries = 0
        while True:
            assembler = _StreamAssembler()
            said = False
            try:
                events = await self._client.messages.create(
                    model=self._model_name,
                    max_tokens=self._max_tokens,
                    messages=to_anthropic_messages(request.messages),
                    system=_system(request.system),
                    tools=_tools(request.tools),
                    stream=True,
                )
                async with events:
                    async for event in events:
                        for model_event in assembler.feed(event):
                            said = True
                            yield model_event
                break
            except _CLIENT_ERRORS as err:
                # An overload reported inside a 200 stream is not retried by the SDK
                # (the HTTP answer was a success): retried here, as long as nothing of
                # this answer was passed on, so nothing is said twice.
                if said or retries >= self._client.max_retries or not _retry_in_stream(err):
                    raise _model_error(err) from err
            retries += 1
            delay = min(STREAM_RETRY_MAX, STREAM_RETRY_FIRST * 2 ** (retries - 1))
            log.warning("Anthropic stream reported an overload; retry %d in %.1f s", retries, delay)
            await asyncio.sleep(delay * random.uniform(0.75, 1.0))
        yield assembler.finish()

    async def structured(self, request: StructuredRequest) -> dict[str, Any]:
        """Force a call of one tool whose input schema is ``request.schema``; return its input.

        Raises:
            ModelError: The request failed, or the answer holds no call of that tool.
            RuntimeError: Model requests are switched off (``_guard``) for this host.
        """
        self._check_ready()
        tool = _tool_param(
            ToolSpec(
                name=request.name, description=request.description, input_schema=request.schema
            )
        )
        try:
            answer = await self._client.messages.create(
                model=self._model_name,
                max_tokens=self._max_tokens,
                messages=to_anthropic_messages(request.messages),
                system=_system(request.system),
                tools=[tool],
                tool_choice=ToolChoiceToolParam(type="tool", name=request.name),
            )
        except _CLIENT_ERRORS as err:
            raise _model_error(err) from err
        inputs = [
            block.input
            for block in answer.content
            if isinstance(block, ToolUseBlock) and block.name == request.name
        ]
        if inputs and isinstance(inputs[0], dict):
            return dict(inputs[0])
        raise ModelError(
            f"Anthropic answered without calling {request.name!r} "
            f"(stop_reason={answer.stop_reason}, request-id {answer.id})",
            user_message=USER_MESSAGES["no_structured_answer"],
        )

    async def check(self) -> None:
        """Ask the API about this model once, without retries: the key is accepted, the
        model exists and the host answers (``ModelError`` says which did not)."""
        self._check_ready()
        client = self._client.with_options(max_retries=0, timeout=CHECK_TIMEOUT)
        try:
            await client.models.retrieve(self._model_name)
        except anthropic.APIStatusError as err:
            raise ModelError(
                f"{self._model_name} at {self._client.base_url}: HTTP {err.status_code} "
                f"({_error_type(err)})"
            ) from err
        except anthropic.APIConnectionError as err:
            raise ModelError(f"cannot reach {self._client.base_url} ({err})") from err

    def _check_ready(self) -> None:
        _guard.check_allowed(str(self._client.base_url))
        # Without credentials the SDK raises a bare TypeError while building headers.
        if self._client.credentials is None and not any(
            key.lower() in ("authorization", "x-api-key") and isinstance(value, str)
            for key, value in self._client.default_headers.items()
        ):
            raise ModelError(
                "no Anthropic credentials: set ANTHROPIC_API_KEY or pass api_key",
                user_message=USER_MESSAGES["no_credentials"],
            )


_Number = TypeVar("_Number", int, float)

CHECK_TIMEOUT: Final = 10.0
"""Seconds ``check`` waits for the API (no retries: a check says what happens now)."""


def _error_type(err: anthropic.APIStatusError) -> str:
    """The API's error type (``authentication_error``, ``not_found_error``), else its text."""
    body = err.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("type"), str):
            return str(error["type"])
    return err.message


_MAX_RETRIES_RULE: Final = "ANTHROPIC_MAX_RETRIES must be a whole number, 0 or more"
_TIMEOUT_RULE: Final = "ANTHROPIC_TIMEOUT must be a number of seconds above 0"


def _env_number(name: str, kind: type[_Number], default: _Number, rule: str) -> _Number:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{rule} (got {raw!r})") from None


def _check_limits(max_retries: int, timeout: float) -> None:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"{_MAX_RETRIES_RULE} (got {max_retries!r})")
    if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"{_TIMEOUT_RULE} (got {timeout!r})")


_Block = TextBlockParam | ToolUseBlockParam | ToolResultBlockParam


def to_anthropic_messages(messages: Sequence[Message]) -> list[MessageParam]:
    """Translate the conversation to Messages API turns.

    Consecutive turns of one role are merged (the API wants them alternating), empty
    text is dropped (the API rejects it), and in a user turn the tool results come
    first (the API wants them right after the assistant's ``tool_use`` blocks).
    """
    turns: list[tuple[Literal["user", "assistant"], list[_Block]]] = []
    for message in messages:
        blocks = [_block(part) for part in message.parts if not _is_empty_text(part)]
        if not blocks:
            continue
        if turns and turns[-1][0] == message.role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((message.role, blocks))
    params: list[MessageParam] = []
    for role, blocks in turns:
        if role == "user":
            blocks.sort(key=lambda block: block["type"] != "tool_result")
            params.append(UserMessageParam(role="user", content=blocks))
        else:
            params.append(AssistantMessageParam(role="assistant", content=blocks))
    return params


def _is_empty_text(part: TextPart | ToolCallPart | ToolResultPart) -> bool:
    return isinstance(part, TextPart) and not part.text


def _block(part: TextPart | ToolCallPart | ToolResultPart) -> _Block:
    match part:
        case TextPart():
            return TextBlockParam(type="text", text=part.text)
        case ToolCallPart():
            return ToolUseBlockParam(
                type="tool_use", id=part.tool_call_id, name=part.tool_name, input=dict(part.args)
            )
        case ToolResultPart():
            # The API rejects an error result without content.
            content = part.content or ("The tool call failed." if part.is_error else "")
            notes = []
            if part.given_by is not None:
                # A person answered in the tool's place: Claude is told so first.
                notes.append(GIVEN_BY.format(who=part.given_by))
            if part.edited_args is not None:
                # Claude asked with other arguments: a note first says which ones ran.
                notes.append(EDITED.format(args=json.dumps(part.edited_args, ensure_ascii=False)))
            if not notes:
                return ToolResultBlockParam(
                    type="tool_result",
                    tool_use_id=part.tool_call_id,
                    content=content,
                    is_error=part.is_error,
                )
            blocks = [TextBlockParam(type="text", text=note) for note in notes]
            if content:  # the API rejects an empty text block
                blocks.append(TextBlockParam(type="text", text=content))
            return ToolResultBlockParam(
                type="tool_result",
                tool_use_id=part.tool_call_id,
                content=blocks,
                is_error=part.is_error,
            )


def _tool_param(tool: ToolSpec) -> ToolParam:
    return ToolParam(name=tool.name, description=tool.description, input_schema=tool.input_schema)


def _system(system: str) -> list[TextBlockParam] | Omit:
    """The system prompt, marked as the end of the cached prefix (tools come before it)."""
    if not system:
        return omit
    return [TextBlockParam(type="text", text=system, cache_control=_CACHED)]


def _tools(tools: Sequence[ToolSpec]) -> list[ToolParam] | Omit:
    """The tools, the last one ending a cached prefix (as the system prompt does).

    Every model turn of a run sends the same tools and system prompt, so with a
    cache breakpoint after them a long tool list is paid for once per few minutes
    (Anthropic caches prefixes above a minimum length; shorter ones are not cached).
    """
    params = [_tool_param(tool) for tool in tools]
    if params:
        params[-1]["cache_control"] = _CACHED
    return params or omit


def _retry_in_stream(err: Exception) -> bool:
    """An error event inside a stream that a retry may cure (overloaded, internal)."""
    return (
        isinstance(err, anthropic.APIStatusError)
        and err.status_code < 400
        and err.type in _RETRIED_IN_STREAM
    )


@dataclass(kw_only=True)
class _PendingToolCall:
    id: str
    name: str
    start_input: dict[str, object]
    json_pieces: list[str] = field(default_factory=list)

    def complete(self) -> ToolCallPart:
        raw = "".join(self.json_pieces)
        if not raw.strip():
            return ToolCallPart(tool_call_id=self.id, tool_name=self.name, args=self.start_input)
        try:
            args = json.loads(raw)
        except json.JSONDecodeError as err:
            raise _malformed(
                f"tool {self.name!r} input is not JSON ({err}): {raw[:200]!r}"
            ) from err
        if not isinstance(args, dict):
            raise _malformed(f"tool {self.name!r} input is not an object: {raw[:200]!r}")
        return ToolCallPart(tool_call_id=self.id, tool_name=self.name, args=args)


class _StreamAssembler:
    """Turns the SDK's raw stream events into model events, checking the sequence."""

    def __init__(self) -> None:
        self._pending: dict[int, _PendingToolCall] = {}
        self._unreadable: ModelError | None = None
        """A tool input that did not parse; what it means depends on the stop reason."""
        self._input_tokens = 0
        self._output_tokens = 0
        self._cache_read = 0
        self._cache_write = 0
        self._stop_reason: str | None = None
        self._stopped = False

    def feed(self, event: RawMessageStreamEvent) -> list[ModelEvent]:
        """The model events that ``event`` completes (often none)."""
        # The SDK builds events without validation: check the fields we rely on.
        match event:
            case RawMessageStartEvent(type="message_start"):
                usage = getattr(event.message, "usage", None)
                self._input_tokens = _tokens(usage, "input_tokens")
                self._cache_read = _tokens(usage, "cache_read_input_tokens")
                self._cache_write = _tokens(usage, "cache_creation_input_tokens")
            case RawContentBlockStartEvent(type="content_block_start"):
                return self._start_block(event.index, event.content_block)
            case RawContentBlockDeltaEvent(type="content_block_delta"):
                return self._delta(event.index, event.delta)
            case RawContentBlockStopEvent(type="content_block_stop"):
                pending = self._pending.pop(event.index, None)
                if pending is not None:
                    return self._complete(pending)
            case RawMessageDeltaEvent(type="message_delta"):
                self._stop_reason = getattr(event.delta, "stop_reason", None)
                self._check_unreadable()
                self._output_tokens = _tokens(event.usage, "output_tokens")
                # message_delta's counts are cumulative and may revise message_start's.
                self._input_tokens = _tokens(event.usage, "input_tokens") or self._input_tokens
                self._cache_read = (
                    _tokens(event.usage, "cache_read_input_tokens") or self._cache_read
                )
                self._cache_write = (
                    _tokens(event.usage, "cache_creation_input_tokens") or self._cache_write
                )
            case _ if event.type == "message_stop":
                self._stopped = True
            case _:
                pass  # ping-like or newer events carry nothing we translate
        return []

    def finish(self) -> ModelFinish:
        """The final event; raises ``ModelError`` if the stream ended early."""
        if self._unreadable is not None:
            raise self._unreadable  # the stream ended before saying why the input broke off
        if not self._stopped:
            raise _malformed("stream ended before message_stop")
        if self._pending:
            raise _malformed(f"tool_use blocks never stopped: {sorted(self._pending)}")
        if self._stop_reason is None:
            raise _malformed("stream finished without a stop_reason")
        stop_reason = _STOP_REASONS.get(self._stop_reason)
        if stop_reason is None:
            raise ModelError(f"unsupported Anthropic stop_reason {self._stop_reason!r}")
        usage = Usage(
            input_tokens=self._input_tokens,
            output_tokens=self._output_tokens,
            requests=1,
            cache_read_tokens=self._cache_read,
            cache_write_tokens=self._cache_write,
        )
        return ModelFinish(stop_reason=stop_reason, usage=usage)

    def _complete(self, pending: _PendingToolCall) -> list[ModelEvent]:
        # A tool input cut off by max_tokens stops as unparsable JSON, and only the
        # message_delta after it tells a length limit from a garbled stream.
        try:
            call = pending.complete()
        except ModelError as err:
            self._unreadable = self._unreadable or err
            return []
        return [] if self._unreadable is not None else [ToolCallEvent(call=call)]

    def _check_unreadable(self) -> None:
        """Raise for a tool input that did not parse, now that the stop reason is known."""
        if self._unreadable is None:
            return
        if self._stop_reason in _LENGTH_LIMITS:
            raise ModelError(
                f"Anthropic answer hit its length limit (stop_reason={self._stop_reason}) "
                f"inside a tool call: {self._unreadable}",
                user_message=USER_MESSAGES["too_long"],
            ) from self._unreadable
        raise self._unreadable

    def _start_block(self, index: object, block: object) -> list[ModelEvent]:
        if not isinstance(index, int):
            raise _malformed(f"content_block_start without an index: {block!r}")
        if isinstance(block, ToolUseBlock) and block.type == "tool_use":
            if not (isinstance(block.id, str) and isinstance(block.name, str)):
                raise _malformed(f"tool_use block without id or name: {block!r}")
            start_input = block.input if isinstance(block.input, dict) else {}
            self._pending[index] = _PendingToolCall(
                id=block.id, name=block.name, start_input=start_input
            )
        elif isinstance(block, TextBlock) and block.type == "text" and block.text:
            return [TextDelta(text=block.text)]
        return []

    def _delta(self, index: object, delta: object) -> list[ModelEvent]:
        if isinstance(delta, AnthropicTextDelta) and delta.type == "text_delta":
            if not isinstance(delta.text, str):
                raise _malformed(f"text_delta without text: {delta!r}")
            return [TextDelta(text=delta.text)] if delta.text else []
        if isinstance(delta, InputJSONDelta) and delta.type == "input_json_delta":
            pending = self._pending.get(index) if isinstance(index, int) else None
            if pending is None or not isinstance(delta.partial_json, str):
                raise _malformed(f"input_json_delta outside a tool_use block (index {index!r})")
            pending.json_pieces.append(delta.partial_json)
        return []  # thinking, signature and citation deltas are not part of the answer


def _tokens(usage: object, name: str) -> int:
    value = getattr(usage, name, None)
    return value if isinstance(value, int) else 0


def _malformed(detail: str) -> ModelError:
    return ModelError(
        f"malformed Anthropic answer: {detail}", user_message=USER_MESSAGES["malformed"]
    )


def _model_error(err: Exception) -> ModelError:
    """Translate a client-side failure into a ``ModelError`` with a chat-safe message."""
    if isinstance(err, anthropic.APIStatusError):
        problem = _PROBLEM_BY_ERROR_TYPE.get(err.type or "") or _PROBLEM_BY_STATUS.get(
            err.status_code, "server" if err.status_code >= 500 else "invalid_request"
        )
        # An error event inside a 200 stream arrives with the stream's status.
        where = "in the stream" if err.status_code < 400 else f"HTTP {err.status_code}"
        said = (err.api_message or err.message or "").lower()
        if problem == "invalid_request" and any(words in said for words in _TOO_LONG):
            problem = "conversation_too_long"
        elif problem == "invalid_request":
            # Not the conversation's fault: the bot built a request the API refuses.
            log.error(
                "bug: Anthropic refused the request the bot built: %s (request-id %s)",
                err.api_message or err.message,
                err.request_id,
            )
        return ModelError(
            f"Anthropic API error {where}, {err.type or 'unknown type'}: "
            f"{err.api_message or err.message} (request-id {err.request_id})",
            user_message=USER_MESSAGES[problem],
        )
    if isinstance(err, anthropic.APITimeoutError | httpx2.TimeoutException):
        return ModelError(
            f"Anthropic request timed out: {err!r}", user_message=USER_MESSAGES["timeout"]
        )
    if isinstance(err, anthropic.APIConnectionError | httpx2.HTTPError):
        cause = err.__cause__ or err
        return ModelError(
            f"could not reach the Anthropic API: {cause!r}",
            user_message=USER_MESSAGES["connection"],
        )
    if isinstance(err, anthropic.CredentialsError):
        return ModelError(
            f"Anthropic credentials unavailable: {err}",
            user_message=USER_MESSAGES["no_credentials"],
        )
    if isinstance(err, json.JSONDecodeError | UnicodeDecodeError):
        return _malformed(f"undecodable answer: {err}")
    return ModelError(f"Anthropic request failed: {err!r}")
