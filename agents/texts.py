"""Every text of the runtime that a person or a model reads, in one place.

Tool results go to the model, which tells the person; run errors reach the
chat as they are. Placeholders are ``str.format`` fields.
"""

from __future__ import annotations

from typing import Final, Literal

# -- tool results the model sees ----------------------------------------------

UNKNOWN_TOOL: Final = "Unknown tool {tool!r}."
INVALID_ARGUMENTS: Final = "Invalid arguments: {errors}"
TOOL_FAILED: Final = "Tool {tool} failed: {error}"
TOOL_REFUSED: Final = "Tool {tool} was not run: {reason}"
DECLINED: Final = "Tool call was not approved by the user"
"""The reference's wording; a reason, when given, follows as ". Reason: ..."."""
DECLINED_REASON: Final = ". Reason: {reason}"
EDITED: Final = (
    "A person edited the arguments before approving; the call ran with exactly these: {args}"
)
"""Said to the model once, before the result of a call whose arguments a person edited."""
QUESTION_DECLINED: Final = "The user declined to answer the question, so the tool did not finish"
QUESTION_CANCELLED: Final = "The user cancelled the question, so the tool did not finish"
EXPIRED: Final = "The approval request expired before anyone decided; the tool did not run."
APPROVED_ARGS_INVALID: Final = (
    "The approved arguments of {tool} are no longer valid ({errors}); it did not run. "
    "Please ask again."
)
APPROVED_ARGS_CHANGED: Final = (
    "{tool} would not run with exactly the arguments that were approved, so it did not run. "
    "Please ask again."
)
STOPPED: Final = "The user stopped the run before this call finished; it did not run."
"""The result a stopped run keeps, in its history, for each call that never ran."""
STOPPED_REPLY: Final = "(Stopped by the user before I answered.)"
"""What a stopped run's history keeps as its answer when the model had said nothing."""
SUB_AGENT_FAILED: Final = "The {agent} agent failed: {error}"
SUB_AGENT_SILENT: Final = "(the agent finished without an answer)"
DELEGATE: Final = "Delegate a task to the {key} agent."
"""The description of an ``agent-<key>`` tool whose sub-agent has none."""

# -- run errors people read ----------------------------------------------------

RUN_CRASHED: Final = "Something went wrong while working on this; the details are in the bot's log."
INTERRUPTED_TOOL: Final = (
    "The bot stopped while {tool} was running, so it may or may not have finished. "
    "It was not run again; please check its effect and ask again."
)
INTERRUPTED_CALL: Final = (
    "The bot stopped while {tool} was running, so it may or may not have finished; "
    "it was not run again."
)
"""The result the model gets for a call a crash cut off (it tells the person)."""
INTERRUPTED_RUN: Final = (
    "The bot stopped while working on this, so some steps may or may not have happened. "
    "Nothing was run again; please check and ask again."
)

# -- a model that cannot answer -------------------------------------------------

MODEL_UNAVAILABLE: Final = "The model could not answer right now."

ModelProblem = Literal[
    "overloaded",
    "rate_limited",
    "auth",
    "no_credentials",
    "permission",
    "billing",
    "not_found",
    "invalid_request",
    "conversation_too_long",
    "timeout",
    "connection",
    "server",
    "malformed",
    "too_long",
    "no_structured_answer",
]
"""The kinds of failure people in a chat are told about."""

MODEL_PROBLEMS: Final[dict[ModelProblem, str]] = {
    "overloaded": "Claude is overloaded right now; please try again in a minute.",
    "rate_limited": "The bot hit its Anthropic rate limit; please try again in a minute.",
    "auth": "The bot's Anthropic credentials were rejected.",
    "no_credentials": "The bot has no Anthropic credentials configured.",
    "permission": "The bot's Anthropic account may not use this model.",
    "billing": "The bot's Anthropic account has a billing problem.",
    "not_found": "The bot's configured Claude model does not exist.",
    "invalid_request": (
        "Claude refused the request the bot built; that is a bug in the bot, and it is logged."
    ),
    "conversation_too_long": (
        "This conversation is too long for Claude; please start again in a new thread."
    ),
    "timeout": "Claude took too long to answer; please try again.",
    "connection": "The bot could not reach Claude; please try again later.",
    "server": "Claude had an internal error; please try again.",
    "malformed": "Claude's answer arrived garbled; please try again.",
    "too_long": (
        "Claude's answer was too long and hit its length limit before it was complete; "
        "please ask for something smaller."
    ),
    "no_structured_answer": "Claude did not answer in the expected form; please try again.",
}
"""What people in a chat see for each kind of failure (``ModelError.user_message``)."""
GIVEN_BY: Final = (
    "The tool did not run: {who} answered for it instead (a person's words, not the tool's output):"
)
"""Put before a result a person gave in the tool's place (``ToolResultPart.given_by``)."""
SOMEONE: Final = "someone"
"""Who answered for a tool when the decision names nobody."""
