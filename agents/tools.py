"""Tools: functions the model may call, with schemas, approval rules and suspension."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import (
    Any,
    ClassVar,
    Literal,
    NoReturn,
    Protocol,
    get_type_hints,
    overload,
    runtime_checkable,
)

from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from pydantic import BaseModel, ConfigDict, ValidationError, create_model, model_validator

from .errors import SuspendPayloadInvalidError, validation_messages
from .models.base import ToolSpec

ApprovalPredicate = Callable[..., bool | Awaitable[bool]]
"""``(args)`` or ``(args, ctx)`` -> bool, sync or async; ``args`` is the validated input."""

ToolCheck = Callable[..., Awaitable[None] | None]
"""``(args)`` or ``(args, ctx)``, sync or async: raises to refuse a call before anyone is asked."""


class ToolSuspended(BaseException):
    """Raised by ``ToolContext.suspend``; ends the tool call and pauses the run.

    A ``BaseException`` so that a tool's own ``except Exception`` cannot swallow it.
    """

    def __init__(self, payload: Any, schema: dict[str, Any] | None = None) -> None:
        super().__init__("tool suspended")
        self.payload = payload
        self.schema = schema
        """The JSON schema of the answer this suspension expects, when the tool has no
        ``resume_schema`` (an MCP server's question brings its own)."""


@dataclass(kw_only=True)
class ToolContext:
    """What a tool knows about the call it serves.

    ``tool_call_id`` is stable across pauses, resumes and processes: use it as
    an idempotency key for side effects. ``resume_data`` is the validated data a
    person supplied after ``suspend()`` (``None`` on the first attempt). Fields of
    the answer that name arguments are already folded into the arguments, so read
    them from there. A call approved after an answer runs with exactly the
    approved arguments and that answer, both as the approver saw them.
    """

    run_id: str
    tool_call_id: str
    tool_name: str
    thread_id: str | None = None
    resource_id: str | None = None
    agent_path: tuple[str, ...] = ()
    approved: bool = False
    resume_data: Any = None
    suspended: Any = None
    """On a resumed call: the payload it suspended with (what the answer answers)."""
    declined: Literal["decline", "cancel"] | None = None
    """On a question the person declined to answer (or called off): how. Only a tool
    that ``hears_declines`` is run again then, with no ``resume_data``."""
    _suspend_schema: type[BaseModel] | None = field(default=None, repr=False)

    def suspend(self, payload: Any, *, answer_schema: dict[str, Any] | None = None) -> NoReturn:
        """End this call and pause the run until someone resumes it.

        The payload is validated against the tool's ``suspend_schema``; an invalid
        payload raises ``SuspendPayloadInvalidError`` instead. ``answer_schema``
        (JSON Schema) is what the answer must satisfy when the tool has no
        ``resume_schema`` of its own.
        """
        if self._suspend_schema is not None:
            try:
                payload = self._suspend_schema.model_validate(payload).model_dump(mode="json")
            except ValidationError as exc:
                raise SuspendPayloadInvalidError(
                    self.run_id, self.tool_call_id, validation_messages(exc)
                ) from exc
        raise ToolSuspended(payload, answer_schema)


@runtime_checkable
class ToolSource(Protocol):
    """Tools that come and go while an agent runs (an MCP server's: ``McpTools``).

    ``tools()`` is read at every model turn and every call, so a tool listed
    later is offered at once and one withdrawn is no longer called.
    """

    name: str

    def tools(self) -> Mapping[str, Tool]:
        """The tools offered now, by the name the model knows."""
        ...


class LiveTools(Mapping[str, "Tool"]):
    """An agent's own tools, then those its sources offer now (an own tool wins a name)."""

    def __init__(self, own: Mapping[str, Tool], sources: Sequence[ToolSource] = ()) -> None:
        self._own = dict(own)
        self._sources = tuple(sources)

    @property
    def sources(self) -> tuple[ToolSource, ...]:
        return self._sources

    def __getitem__(self, name: str) -> Tool:
        if name in self._own:
            return self._own[name]
        for source in self._sources:
            found = source.tools().get(name)
            if found is not None:
                return found
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        seen = set(self._own)
        yield from self._own
        for source in self._sources:
            for name in source.tools():
                if name not in seen:
                    seen.add(name)
                    yield name

    def __len__(self) -> int:
        return sum(1 for _ in self)


class SchemaChecked(BaseModel):
    """A JSON object checked against a JSON schema (``schema_check``; one subclass per
    schema): what a tool gets when its schema is not a Python model's."""

    model_config = ConfigDict(extra="allow")
    schema_check: ClassVar[Validator | None] = None

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        if cls.schema_check is not None:
            problems = [
                f"{'/'.join(map(str, e.absolute_path)) or 'value'}: {e.message}"
                for e in sorted(cls.schema_check.iter_errors(data), key=lambda e: e.path)
            ]
            if problems:
                raise ValueError("; ".join(problems))
        return data


def schema_model(schema: dict[str, Any], name: str = "answer") -> type[SchemaChecked]:
    """A ``SchemaChecked`` model for one JSON schema.

    Raises:
        jsonschema.SchemaError: The schema itself is invalid.
    """
    check = validator_for(schema)
    check.check_schema(schema)
    model = create_model(name, __base__=SchemaChecked)
    model.schema_check = check(schema)
    return model


@functools.lru_cache(maxsize=4096)
def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a tool's input model, built once per model (shared: read only).

    Every model turn offers every tool; pydantic builds a schema afresh each
    time it is asked, which was a sixth of a scripted approval cycle.
    """
    return model.model_json_schema()


@dataclass(kw_only=True)
class Tool:
    """A callable the model can use. Build one with ``@tool`` or ``Tool.from_function``."""

    name: str
    description: str
    fn: Callable[..., Any]
    input_model: type[BaseModel]
    output_model: type[BaseModel] | None = None
    suspend_schema: type[BaseModel] | None = None
    resume_schema: type[BaseModel] | None = None
    require_approval: bool | ApprovalPredicate = False
    check: ToolCheck | None = None
    """Refuses calls that can only fail (raise with a reason for the model) before approval."""
    expires_in: timedelta | None = None
    idempotent: bool = False
    context_param: str | None = None
    unpack_args: bool = True
    delegate_to: str | None = None
    """Set on the ``agent-<key>`` tools of a supervisor: the sub-agent's key."""
    schema: dict[str, Any] | None = None
    """The input's JSON schema as offered to the model, when it is not ``input_model``'s
    own (an MCP tool's, from its server; its ``input_model`` checks against it)."""
    source: str | None = None
    """The ``ToolSource`` offering it (an MCP server's name); cards name it."""
    hears_declines: bool = False
    """Run again (with ``ctx.declined``) when a person declines its question, instead of
    ending the call with "declined" (an MCP tool: its server hears the decline)."""

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        input_model: type[BaseModel] | None = None,
        output_model: type[BaseModel] | None = None,
        suspend_schema: type[BaseModel] | None = None,
        resume_schema: type[BaseModel] | None = None,
        require_approval: bool | ApprovalPredicate = False,
        check: ToolCheck | None = None,
        expires_in: timedelta | None = None,
        idempotent: bool = False,
    ) -> Tool:
        """Build a tool from a function (sync or async).

        The input schema comes from the signature unless ``input_model`` is given,
        in which case the function receives one validated model instance. A
        parameter annotated ``ToolContext`` receives the call's context.
        ``check`` runs on the validated arguments before the approval rule: an
        exception it raises refuses the call, and its message goes to the model.
        """
        hints = get_type_hints(fn, include_extras=True)
        params = inspect.signature(fn).parameters
        context_param = next((p for p in params if hints.get(p) is ToolContext), None)
        unpack = input_model is None
        if input_model is None:
            input_model = _model_from_signature(fn, hints, context_param)
        return cls(
            name=name or fn.__name__,
            description=description or inspect.getdoc(fn) or "",
            fn=fn,
            input_model=input_model,
            output_model=output_model,
            suspend_schema=suspend_schema,
            resume_schema=resume_schema,
            require_approval=require_approval,
            check=check,
            expires_in=expires_in,
            idempotent=idempotent,
            context_param=context_param,
            unpack_args=unpack,
        )

    def spec(self) -> ToolSpec:
        """How the tool is offered to the model."""
        return ToolSpec(
            name=self.name,
            description=self.description,
            input_schema=self.schema if self.schema is not None else input_schema(self.input_model),
        )

    def validate_args(self, args: dict[str, Any]) -> BaseModel:
        """Validate the model's arguments (raises ``ValidationError``)."""
        return self.input_model.model_validate(args)

    def dump_args(self, args: BaseModel) -> dict[str, Any]:
        """Validated arguments as JSON: what an approver sees and what an approval binds to."""
        return args.model_dump(mode="json", by_alias=True)

    def answered_args(self, args: dict[str, Any], answer: Any) -> BaseModel:
        """The call's arguments with a person's answer folded in.

        Each field of the (validated) answer that names an argument becomes that
        argument, and the result is validated as the arguments are, so an answer
        given before approval is checked, and shown, as what will run. Raises
        ``ValidationError`` when the answer makes the arguments invalid.
        """
        given = (
            answer.model_dump(mode="json", by_alias=True, exclude_unset=True)
            if isinstance(answer, BaseModel)
            else answer
        )
        if not isinstance(given, dict):
            return self.validate_args(args)
        names = {f.alias or name for name, f in self.input_model.model_fields.items()}
        return self.validate_args({**args, **{k: v for k, v in given.items() if k in names}})

    async def refusal(self, args: BaseModel, ctx: ToolContext) -> str | None:
        """Why ``check`` refuses this call, or ``None`` when it may go ahead."""
        if self.check is None:
            return None
        try:
            await _call_rule(self.check, args, ctx)
        except ToolSuspended:
            return "its check asked a question, which only the tool itself may do"
        except Exception as exc:
            return str(exc) or type(exc).__name__
        return None

    async def needs_approval(self, args: BaseModel, ctx: ToolContext) -> bool:
        """Whether this call must wait for a person. A failing predicate fails closed."""
        rule = self.require_approval
        if isinstance(rule, bool):
            return rule
        try:
            return bool(await _call_rule(rule, args, ctx))
        except Exception:
            return True

    def validate_resume(self, data: Any, schema: dict[str, Any] | None = None) -> Any:
        """Validate resume data against ``resume_schema``, else against ``schema`` (the
        JSON schema the suspension asked for, if any). Raises ``ValidationError``."""
        if self.resume_schema is not None:
            return self.resume_schema.model_validate(data)
        if schema is not None:
            return schema_model(schema).model_validate(data).model_dump(mode="json")
        return data

    async def invoke(self, args: BaseModel, ctx: ToolContext) -> Any:
        """Run the function; returns its (validated) output, raises what it raises."""
        ctx._suspend_schema = self.suspend_schema
        kwargs: dict[str, Any] = dict(vars(args)) if self.unpack_args else {}
        positional: list[Any] = [] if self.unpack_args else [args]
        if self.context_param:
            kwargs[self.context_param] = ctx
        if inspect.iscoroutinefunction(self.fn):
            result = await self.fn(*positional, **kwargs)
        else:
            # A sync tool may block (files, HTTP, sleep): keep it off the event loop.
            result = await asyncio.to_thread(self.fn, *positional, **kwargs)
            if inspect.isawaitable(result):
                result = await result
        if self.output_model is not None:
            result = self.output_model.model_validate(result)
        return result


def render_result(value: Any) -> str:
    """Tool output as text for the model: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, default=str, ensure_ascii=False)


def jsonable(value: Any) -> Any:
    """Tool output as plain JSON data (for chunks and results)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


async def _call_rule(rule: Callable[..., Any], args: BaseModel, ctx: ToolContext) -> Any:
    """Call an ``(args)`` or ``(args, ctx)`` function, sync or async."""
    takes_ctx = len(inspect.signature(rule).parameters) >= 2
    verdict = rule(args, ctx) if takes_ctx else rule(args)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    return verdict


def _model_from_signature(
    fn: Callable[..., Any], hints: dict[str, Any], context_param: str | None
) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        if name == context_param:
            continue
        annotation = hints.get(name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[name] = (annotation, default)
    model: type[BaseModel] = create_model(
        f"{fn.__name__}_input", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    input_model: type[BaseModel] | None = None,
    output_model: type[BaseModel] | None = None,
    suspend_schema: type[BaseModel] | None = None,
    resume_schema: type[BaseModel] | None = None,
    require_approval: bool | ApprovalPredicate = False,
    check: ToolCheck | None = None,
    expires_in: timedelta | None = None,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    **options: Any,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator form of ``Tool.from_function``: ``@tool`` or ``@tool(require_approval=True)``."""
    if fn is not None:
        return Tool.from_function(fn)

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool.from_function(f, **options)

    return wrap
