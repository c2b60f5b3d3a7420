"""Every string the Slack adapter shows to people, tells the agent or answers to Slack, in
one place."""

from __future__ import annotations

# -- agent messaging and the assistant view ---------------------------------------

LOADING_MESSAGES = ("Checking…", "Thinking…", "Working on it…")
"""What Slack rotates through under the status while the bot works."""
SUGGESTED_PROMPTS_TITLE = "Try asking"
"""Above the suggested prompts (a new assistant thread's, the top of the agent's direct
message)."""

# -- what a person is looking at, for the agent (never shown to people) -----------

VIEWING_CHANNEL = "the channel <#{channel}>"
VIEWING_CANVAS = "the canvas {canvas}"
VIEWING_LIST = "the list {list}"
VIEWING_MESSAGE = "a message in <#{channel}> (ts {ts})"
VIEWING_OTHER = "{kind} {value}"
"""Something Slack names by a kind the bot does not know yet (``thread ts 1712.5``)."""
VIEWING_SEPARATOR = "; "

# -- how Slack draws a document's pieces (the words are the core's, ``bot.texts``) ---

REQUESTED_IN_LINKED = "{where} (<{url}|open the request>)"
"""A thread a card was asked in, linked to the request (``mrkdwn.place_text``)."""
A_DIRECT_MESSAGE = "a direct message"
"""A thread in a direct message: Slack has no mention for it."""
ARGUMENTS_TRUNCATED = "_(truncated: {count} more characters)_"
"""Under arguments too long for a section: what the card leaves out."""
FEEDBACK_UP = "👍"
FEEDBACK_DOWN = "👎"
FEEDBACK_UP_LABEL = "This answer helped"
FEEDBACK_DOWN_LABEL = "This answer did not help"
"""Slack's feedback buttons under a finished answer (``Document.feedback``)."""

INBOX_UNAVAILABLE = "I can't read the approvals right now; please try again in a moment."

# -- decline modal (title, submit and close are limited to 24 characters) -------

MODAL_TITLE = "Decline"
MODAL_SUBMIT = "Decline"
MODAL_CLOSE = "Cancel"
MODAL_INTRO = "The agent will be told you declined, with your reason if you give one."
MODAL_REASON_LABEL = "Reason (optional)"
MODAL_REASON_PLACEHOLDER = "Why not?"

# -- answer form (title, submit and close are limited to 24 characters) ---------

FORM_TITLE = "Answer"
FORM_SUBMIT = "Send"
FORM_CLOSE = "Close"
FORM_CHOOSE = "Choose…"
FORM_YES = "Yes"
FORM_NO = "No"
FORM_UNNAMED = "(unnamed)"
FORM_REFUSED = "That answer was not taken."

# -- edit form (title, submit and close are limited to 24 characters) -----------

EDIT_TITLE = "Edit and approve"
EDIT_SUBMIT = "Approve"
EDIT_CLOSE = "Cancel"
# -- respond form (title, submit and close are limited to 24 characters) --------

RESPOND_TITLE = "Respond instead"
RESPOND_SUBMIT = "Send, don't run"
RESPOND_CLOSE = "Cancel"

EDIT_TOO_BIG = (
    "These arguments are too long or too many to edit in Slack, so nothing was opened; "
    "you can still approve or decline them as they are."
)

# -- HTTP answers to Slack (short, never a trace) -------------------------------

BAD_PAYLOAD = "malformed payload"
BAD_SIGNATURE = "invalid request signature"
OVERLOADED = "the bot cannot take requests right now; please send this again shortly"
UNKNOWN_ACTION = "unknown action"
BAD_ACTION_VALUE = "malformed action value"
NOT_OUR_CARD = "That is not a valid approval card or question, so nothing was decided."
BAD_VIEW_METADATA = "malformed view metadata"
INSTALL_UNAVAILABLE = (
    "The app could not be installed right now (the bot could not keep the installation). "
    "Please try again in a minute: nothing was half-installed."
)
