"""Every string the console shows, in one place."""

from __future__ import annotations

from typing import Final

WELCOME: Final = (
    "Approval bot console: you are {user}. Write a request; approval cards and "
    "questions are answered on the next line, and a longer line at a card is a "
    "message while the card waits. End with Ctrl-D."
)
INPUT: Final = "you> "
STILL_WAITING: Final = "(these still wait in thread '{thread}', from an earlier session)"
CARD_QUESTION: Final = "Approve? {options} > "
CARD_QUESTION_OF: Final = "Approve {call}? {options} > "
"""The prompt of one call of a card of several, naming which."""
CARD_DECLINE_QUESTION: Final = "Decline? {options} > "
"""The prompt of a card its reader may decline but not approve (their own request)."""
CARD_REASK: Final = (
    "Please answer {options}. A longer line is sent as a message, and the card waits."
)
APPROVE_OPTION: Final = ("[a]pprove", "'a' (or 'y') to approve")
EDIT_OPTION: Final = ("[e]dit", "'e' to edit the arguments first")
GRANT_OPTION: Final = (
    "[g]rant for this thread ({durations})",
    "'g' (or 'g {duration}') to approve it and its like in this thread for a while",
)
RESPOND_OPTION: Final = (
    "[r]espond instead (text)",
    "'r' then your answer to answer for the tool instead of running it",
)
DECLINE_OPTION: Final = (
    "[d]ecline (reason)",
    "'d' or 'n' (then a reason, if you like) to decline",
)
ALL_OPTION: Final = (
    "[a all] / [d all] ({count} calls)",
    "'a all' or 'd all' to approve or decline all {count} calls of this card",
)
NEVER_OPTION: Final = (
    "[never] again here ({durations})",
    "'never' (or 'never {duration}') to decline it and the tool's later calls in this "
    "thread for a while",
)
"""Each answer a card takes: as the prompt lists it, and as the re-ask explains it."""
STOP_ANSWER: Final = "'stop' to stop the whole request"
"""Also taken at a card's prompt, and named only when it asks again."""
EDIT_FIELD: Final = "    {label} [{value}]: "
FORM_FIELD: Final = "    {label}{hint}{default}: "
FORM_CHOICES: Final = "one of {choices}"
FORM_KINDS: Final = {
    "number": "a number",
    "integer": "a whole number",
    "boolean": "true or false",
}
FORM_REQUIRED_HINT: Final = "required"
FORM_REQUIRED: Final = "    ({label} is required)"
LEFT_WAITING: Final = (
    "(still waiting in thread '{thread}': {what}; `make run` shows it again, "
    "or `python -m bot console --thread {thread}`)"
)
REPLY: Final = "bot> {text}"
NOTICE: Final = "(bot) {text}"
PRIVATE: Final = "(only you see this) {text}"
STATUS: Final = "… {status}"
COMMANDS: Final = "(or type {commands})"
COMMAND: Final = "{command} to {label}"
THREAD: Final = "thread '{thread}'"
