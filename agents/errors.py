"""Typed errors of the agent runtime. Each names the run and the tool call, and
raising one never changes stored state."""

from __future__ import annotations

from collections.abc import Sequence

from .snapshot import Decision


class AgentError(Exception):
    """Base class of the runtime's errors."""


class RunNotFoundError(AgentError):
    """No run with this id exists in the store."""

    def __init__(self, run_id: str, tool_call_id: str | None = None) -> None:
        super().__init__(f"run {run_id!r} not found{_call(tool_call_id)}")
        self.run_id = run_id
        self.tool_call_id = tool_call_id


class RunNotPausedError(AgentError):
    """The run exists but waits for nobody (finished, failed or still running)."""

    def __init__(self, run_id: str, status: str, tool_call_id: str | None = None) -> None:
        super().__init__(
            f"run {run_id!r} is {status}, not waiting for a decision{_call(tool_call_id)}"
        )
        self.run_id = run_id
        self.status = status
        self.tool_call_id = tool_call_id


class ToolCallNotPendingError(AgentError):
    """The run does not wait on this tool call (or waits on it for another reason)."""

    def __init__(self, run_id: str, tool_call_id: str, detail: str = "is not pending") -> None:
        super().__init__(f"run {run_id!r}: tool call {tool_call_id!r} {detail}")
        self.run_id = run_id
        self.tool_call_id = tool_call_id


class AlreadyDecidedError(ToolCallNotPendingError):
    """Someone else decided this call first; ``decision`` says who and how."""

    def __init__(self, run_id: str, tool_call_id: str, decision: Decision) -> None:
        who = decision.decided_by or "someone"
        super().__init__(run_id, tool_call_id, f"was already {_past(decision.event)} by {who}")
        self.decision = decision


class CallExpiredError(ToolCallNotPendingError):
    """The pending call (an approval or a question) expired before this decision arrived."""

    def __init__(self, run_id: str, tool_call_id: str) -> None:
        super().__init__(run_id, tool_call_id, "has expired")


ApprovalExpiredError = CallExpiredError
"""The earlier name, from when only approvals could expire."""


class RunChangedError(AgentError):
    """The run was changed by someone else while this decision was taken.

    The store's compare-and-set refused the write, so this decision did not
    happen; trying again sees the run as it is now.
    """

    def __init__(self, run_id: str, tool_call_id: str | None = None) -> None:
        super().__init__(
            f"run {run_id!r} changed while deciding{_call(tool_call_id)}; nothing was decided"
        )
        self.run_id = run_id
        self.tool_call_id = tool_call_id


class _InvalidDataError(AgentError):
    """Data for a tool call failed its schema; ``errors`` are the validation messages."""

    what = "invalid data"

    def __init__(self, run_id: str, tool_call_id: str, errors: Sequence[str]) -> None:
        super().__init__(
            f"run {run_id!r}: tool call {tool_call_id!r}: {self.what}: " + "; ".join(errors)
        )
        self.run_id = run_id
        self.tool_call_id = tool_call_id
        self.errors = list(errors)


class ResumeDataInvalidError(_InvalidDataError):
    """Resume data failed the tool's ``resume_schema``; the run stays suspended."""

    what = "invalid resume data"


class ArgsInvalidError(_InvalidDataError):
    """Edited arguments failed the tool's input schema (or its check); nothing changed."""

    what = "invalid edited arguments"


class SuspendPayloadInvalidError(_InvalidDataError):
    """A tool called ``suspend()`` with a payload its ``suspend_schema`` rejects."""

    what = "suspended with an invalid payload"


def _call(tool_call_id: str | None) -> str:
    return f" (tool call {tool_call_id!r})" if tool_call_id is not None else ""


def _past(event: str) -> str:
    return "answered" if event == "resumed" else event


def validation_messages(exc: Exception) -> list[str]:
    """Short ``field: message`` lines from a pydantic ``ValidationError``."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return [str(exc)]
    out = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "input"
        # Pydantic's text for a pattern quotes the regex, which means nothing to people.
        message = (
            "is not in the expected format"
            if err["type"] == "string_pattern_mismatch"
            else err["msg"].removeprefix("Value error, ")
        )
        out.append(f"{where}: {message}")
    return out
