"""Every user-facing string of the Teams adapter, in one place.

Placeholders are ``str.format`` fields. Cards use Adaptive Card markdown.
"""

from __future__ import annotations

from typing import Final

APPROVE: Final = "Approve"
DECLINE: Final = "Decline"
EDIT: Final = "Edit"
APPROVE_EDITED: Final = "Approve edited"
GRANT: Final = "Approve for this thread ({duration})"
GRANT_TOOLTIP: Final = (
    "Approve this call, and for {duration} let {tool} run again in this thread, with any"
    " arguments, whenever the same person asks, without a new card"
)

CARD_TITLE_PENDING: Final = "Approval needed"
CARD_SOMEONE: Final = "someone"
CARD_AN_AGENT: Final = "An agent"
CARD_SUMMARY: Final = "{agent} wants to run {tool}"
CARD_WANTS_TO_RUN: Final = "**{agent}** wants to run **{tool}**"
CARD_NO_ARGS: Final = "(no arguments)"
CARD_MORE_ARGS: Final = "…and {count} more"
CARD_TRUNCATED: Final = "… (truncated)"
CARD_ASKED_BY: Final = "Asked by"
CARD_AGENT: Final = "Agent"
CARD_APPROVALS: Final = "Approvals"
CARD_APPROVALS_SO_FAR: Final = "{who} ({count} of {quorum})"
CARD_NO_APPROVALS: Final = "none yet"
CARD_EXPIRES: Final = "Expires {{{{DATE({at}, SHORT)}}}} at {{{{TIME({at})}}}}"
CARD_REASON_LABEL: Final = "Reason (optional, shown with a decline)"
CARD_REASON_PLACEHOLDER: Final = "Why?"
CARD_EDIT_HINT: Final = "Change the arguments, then approve them as edited."
CARD_EDITED: Final = "{mark} {who}: {changes}"
POINTER_SETTLED: Final = "**{tool}**: {outcome}"
CARD_EDIT_CHANGE: Final = "{key} {before} → {after}"

PROMPT: Final = "**{tool}** asks: {question}"
PROMPT_FIELDS: Final = "Reply here to answer ({fields})."
PROMPT_ERROR: Final = "⚠️ {error}"
PROMPT_FROM: Final = "(via {agent})"

QUESTION_TITLE_WAITING: Final = "Answer needed"
QUESTION_SUMMARY: Final = "{tool} asks: {question}"
QUESTION_REPLY: Final = "Reply here to answer."
QUESTION_REQUIRED: Final = "{label} is required."
QUESTION_SEND: Final = "Send"
QUESTION_CANCEL: Final = "Cancel"
QUESTION_DECLINE_TOOLTIP: Final = "Refuse to answer: the tool is told you declined"
QUESTION_CANCEL_TOOLTIP: Final = "Dismiss the question without answering"

ACTION_NOT_SUPPORTED: Final = "This button is not supported by this bot."
ACTION_FAILED: Final = "Something went wrong on my side; please try again in a moment."
FEEDBACK_MALFORMED: Final = (
    "A feedback action names the rated message (replyToId) and carries actionName"
    ' "feedback" with actionValue.reaction "like" or "dislike".'
)

REQUESTED_IN: Final = "Requested in {place}"
REQUESTED_IN_LINK: Final = "[{words}]({url})"
PLACE_CHANNEL: Final = "a channel thread"
PLACE_GROUP_CHAT: Final = "a group chat"
PLACE_PERSONAL: Final = "a 1:1 chat with the bot"
PLACE_ELSEWHERE: Final = "another conversation"

POINTER_CHANNEL: Final = "⏳ **{tool}** is waiting for approval in {place}."
POINTER_CHANNEL_PLACE: Final = "the approvers' channel"
POINTER_PEOPLE: Final = "⏳ **{tool}** was sent to {who} for approval."
POINTER_NOBODY: Final = "⏳ **{tool}** is waiting for approval elsewhere."

STOP: Final = "Stop"
STOP_TOOLTIP: Final = "Stop this request: nothing more runs for it"
STOPPED: Final = "Stopped."
STOP_MALFORMED: Final = 'A Stop action carries the verb "stop" and data {kind: "stop", run_id}.'

END_GRANT: Final = "End grant"
END_GRANT_TOOLTIP: Final = "End this grant: later calls of the tool here ask for approval again"
CLICK_DONE: Final = "Done."

APPROVALS_PRIVATE: Final = (
    "Your approvals list is private: send me `approvals` in a 1:1 chat with me "
    "(and `approvals revoke` there to end the grants you gave)."
)
INBOX_TITLE: Final = "Your approvals"
INBOX_WAITING: Final = "Waiting for you ({count})"
INBOX_NONE_WAITING: Final = "Nothing waits for your decision. 🎉"
INBOX_ITEM: Final = "**{tool}** asked by {requester}"
INBOX_ITEM_AGENT: Final = "via {agent}"
INBOX_REQUESTED: Final = "Your requests ({count})"
INBOX_NONE_REQUESTED: Final = "None of your requests is waiting for someone else."
INBOX_REQUEST: Final = (
    "**{tool}** waits for approval, expires {{{{DATE({at}, SHORT)}}}} {{{{TIME({at})}}}}"
)
INBOX_DECIDED: Final = "Recent decisions"
INBOX_NONE_DECIDED: Final = "You have not decided anything lately."
INBOX_DECISION: Final = "{outcome} **{tool}** {args}· {{{{DATE({at}, SHORT)}}}} {{{{TIME({at})}}}}"
INBOX_GRANTS: Final = (
    "Grants you gave that still run: {count}. Send **approvals revoke** to end them."
)
INBOX_NO_GRANTS: Final = "You have no grants running."
INBOX_CLICKED: Final = "{title}: **{tool}**"
INBOX_VOTED: Final = "Your approval of **{tool}** is counted ({count} of {quorum})."
INBOX_MORE: Final = "…and {count} more"
INBOX_SUMMARY: Final = "Your approvals: {count} waiting for you"

STREAM_WORKING: Final = "Working…"
STREAM_RUNNING: Final = "Running {title}…"
STREAM_WAITING: Final = "{title} is waiting"
STREAM_STEP: Final = "{mark} {title}"
STREAM_STEP_DETAIL: Final = "{mark} {title}: {detail}"
STREAM_STEP_MARKS: Final = {"pending": "⏳", "in_progress": "▶️", "complete": "✅", "error": "❌"}
STREAM_MORE_STEPS: Final = "…and {count} more"

CARD_FOR_APPROVERS: Final = "Only the approvers can decide this."
CARD_REFRESH: Final = "Refresh"
CARD_UNKNOWN: Final = "This card is no longer known to the bot."
