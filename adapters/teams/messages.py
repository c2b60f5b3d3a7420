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
CARD_TITLE_APPROVED: Final = "✅ Approved by {who}"
CARD_TITLE_GRANTED: Final = "✅ Approved by {who} for this thread ({duration})"
CARD_TITLE_DECLINED: Final = "❌ Declined by {who}"
CARD_TITLE_EXPIRED: Final = "⌛ Expired: nobody decided in time, nothing was run"
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
CARD_REASON: Final = "Reason: {reason}"
CARD_REASON_LABEL: Final = "Reason (optional, shown with a decline)"
CARD_REASON_PLACEHOLDER: Final = "Why?"
CARD_EDIT_HINT: Final = "Change the arguments, then approve them as edited."
CARD_EDITED: Final = "Edited by {who}: {changes}"
CARD_EDIT_CHANGE: Final = "{key} {before} → {after}"
CARD_EDIT_UNCHANGED: Final = "the same arguments"
CARD_EDIT_UNSET: Final = "(not set)"

PROMPT: Final = "**{tool}** asks: {question}"
PROMPT_FIELDS: Final = "Reply here to answer ({fields})."
PROMPT_ERROR: Final = "⚠️ {error}"
PROMPT_FROM: Final = "(via {agent})"

QUESTION_TITLE_WAITING: Final = "Answer needed"
QUESTION_TITLE_ANSWERED: Final = "✅ Answered by {who}"
QUESTION_TITLE_DECLINED: Final = "❌ Declined by {who}"
QUESTION_TITLE_CANCELLED: Final = "🚫 Cancelled by {who}"
QUESTION_TITLE_EXPIRED: Final = "⌛ Expired: nobody answered in time"
QUESTION_SUMMARY: Final = "{tool} asks: {question}"
QUESTION_REPLY: Final = "Reply here to answer."
QUESTION_REQUIRED: Final = "{label} is required."
QUESTION_SEND: Final = "Send"
QUESTION_CANCEL: Final = "Cancel"
QUESTION_DECLINE_TOOLTIP: Final = "Refuse to answer: the tool is told you declined"
QUESTION_CANCEL_TOOLTIP: Final = "Dismiss the question without answering"

ACTION_NOT_SUPPORTED: Final = "This button is not supported by this bot."
ACTION_FAILED: Final = "Something went wrong on my side; please try again in a moment."
