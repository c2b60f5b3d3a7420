"""Every string the console shows, in one place."""

from __future__ import annotations

from typing import Final

WELCOME: Final = (
    "Approval bot console: you are {user}. Write a request; approval cards and "
    "questions are answered on the next line. End with Ctrl-D."
)
INPUT: Final = "you> "
STILL_WAITING: Final = "(these still wait in thread '{thread}', from an earlier session)"
CARD_QUESTION: Final = "Approve? {options} > "
CARD_DECLINE_QUESTION: Final = "Decline? {options} > "
"""The prompt of a card its reader may decline but not approve (their own request)."""
CARD_REASK: Final = "Please answer {options}."
APPROVE_OPTION: Final = ("[a]pprove", "'a' (or 'y') to approve")
EDIT_OPTION: Final = ("[e]dit", "'e' to edit the arguments first")
GRANT_OPTION: Final = (
    "[g]rant for this thread ({durations})",
    "'g' (or 'g {duration}') to approve it and its like in this thread for a while",
)
DECLINE_OPTION: Final = (
    "[d]ecline (reason)",
    "'d' or 'n' (then a reason, if you like) to decline",
)
"""Each answer a card takes: as the prompt lists it, and as the re-ask explains it."""
STOP_ANSWER: Final = "'stop' to stop the whole request"
"""Also taken at a card's prompt, and named only when it asks again."""
EDIT_FIELD: Final = "    {label} [{value}]: "
CARD_EDITED: Final = "    {mark} {who}: {changes}"
SETTLED: Final = "[{tool}] {mark} {line}"
CARD_HEADER: Final = "[approval needed] {agent} wants to run {tool}"
CARD_ARG: Final = "    {name}: {value}"
CARD_FOOTER: Final = "    requested by {requester}, expires {expires}"
CARD_APPROVALS: Final = "    approvals: {who} ({count} of {quorum})"
NO_APPROVALS: Final = "none yet"
QUESTION: Final = "[question from {tool}] {question}"
QUESTION_FIELDS: Final = "    (answer with: {fields}; or /decline or /cancel)"
QUESTION_FORM: Final = "    (answered field by field below; /decline or /cancel leaves it)"
FORM_FIELD: Final = "    {label}{hint}{default}: "
FORM_CHOICES: Final = "one of {choices}"
FORM_KINDS: Final = {
    "number": "a number",
    "integer": "a whole number",
    "boolean": "true or false",
}
FORM_REQUIRED_HINT: Final = "required"
FORM_REQUIRED: Final = "    ({label} is required)"
QUESTION_ERROR: Final = "    That answer didn't fit: {error}"
QUESTION_HINT: Final = "    (reply to answer, or /decline or /cancel)"
POINTER_CHANNEL: Final = "[waiting for approval in {channel}] {tool}"
POINTER_PEOPLE: Final = "[sent to {who} for approval] {tool}"
INBOX_WAITING: Final = "Waiting for you ({count}); each is asked below, in turn:"
INBOX_NONE_WAITING: Final = "Nothing waits for your decision."
INBOX_ITEM: Final = "  - {tool} ({args}), asked by {requester} in thread '{thread}'"
INBOX_REQUESTED: Final = "Your requests still waiting ({count}):"
INBOX_DECIDED: Final = "Your recent decisions:"
INBOX_DECISION: Final = "  - {at}: {outcome} {tool} ({args})"
INBOX_GRANTS: Final = "Grants you gave that still run: {count} ('/approvals revoke' ends them)"
LEFT_WAITING: Final = (
    "(still waiting in thread '{thread}': {what}; `make run` shows it again, "
    "or `python -m bot console --thread {thread}`)"
)
REPLY: Final = "bot> {text}"
NOTICE: Final = "(bot) {text}"
PRIVATE: Final = "(only you see this) {text}"
STATUS: Final = "… {status}"
SOMEONE: Final = "someone"
