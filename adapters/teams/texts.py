"""Every user-facing string of the Teams adapter, in one place: what only Teams says
(errors answered to Teams, streaming words, how it names places). What a card, a
question, a pointer or the approvals list says is the core's (``bot.compose``).

Placeholders are ``str.format`` fields. Cards use Adaptive Card markdown.
"""

from __future__ import annotations

from typing import Final

TRUNCATED: Final = "… (truncated)"
"""Ends a value or text shortened to fit a Teams message."""
FIELD_REQUIRED: Final = "{label} is required."
"""What Teams shows under a required input left empty."""
MENTION_NOBODY: Final = "someone"
"""A mention of someone whose name is all markup."""

ACTION_NOT_SUPPORTED: Final = "This button is not supported by this bot."
ACTION_FAILED: Final = "Something went wrong on my side; please try again in a moment."
FEEDBACK_MALFORMED: Final = (
    "A feedback action names the rated message (replyToId) and carries actionName"
    ' "feedback" with actionValue.reaction "like" or "dislike".'
)

LINK: Final = "[{words}]({url})"
PLACE_CHANNEL: Final = "a channel thread"
PLACE_GROUP_CHAT: Final = "a group chat"
PLACE_PERSONAL: Final = "a 1:1 chat with the bot"
PLACE_ELSEWHERE: Final = "another conversation"
APPROVERS_CHANNEL: Final = "the approvers' channel"
"""A channel a card was sent to (Teams names no channel by its id)."""

STOPPED: Final = "Stopped."
STOP_MALFORMED: Final = 'A Stop action carries the verb "stop" and data {kind: "stop", run_id}.'
CLICK_DONE: Final = "Done."

APPROVALS_PRIVATE: Final = (
    "Your approvals list is private: send me `approvals` in a 1:1 chat with me "
    "(and `approvals revoke` there to end the grants you gave)."
)

STREAM_WORKING: Final = "Working…"
STREAM_RUNNING: Final = "Running {title}…"
STREAM_WAITING: Final = "{title} is waiting"
STREAM_STEP: Final = "{mark} {title}"
STREAM_STEP_DETAIL: Final = "{mark} {title}: {detail}"
STREAM_STEP_MARKS: Final = {"pending": "⏳", "in_progress": "▶️", "complete": "✅", "error": "❌"}
STREAM_MORE_STEPS: Final = "…and {count} more"

CARD_REFRESH: Final = "Refresh"
CARD_UNKNOWN: Final = "This card is no longer known to the bot."

MORE_ACTIONS: Final = "More…"
"""The action that shows the buttons a card has beyond the six Teams shows."""
