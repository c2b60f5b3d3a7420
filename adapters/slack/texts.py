"""Every string the Slack adapter shows to people or answers to Slack, in one place."""

from __future__ import annotations

# -- assistant view ---------------------------------------------------------------

LOADING_MESSAGES = ("Checking…", "Thinking…", "Working on it…")
"""What the assistant view rotates through while the bot works (under its status)."""
SUGGESTED_PROMPTS_TITLE = "Try asking"
"""Above the suggested prompts of a new assistant thread."""

# -- approval card --------------------------------------------------------------

CARD_TITLE = ":lock: *Approval needed:* `{tool}`"
CARD_FALLBACK = "Approval needed: {tool} (asked by {requester})"
CARD_AGENT = "*Agent:* {path}"
CARD_REQUESTER = "*Asked by:* {requester}"
CARD_EXPIRES = "*Expires:* {when}"
CARD_APPROVALS = "*Approvals:* {who} ({count} of {quorum})"
CARD_REQUESTED_IN = "*Requested in:* {where}"
REQUESTED_IN_LINKED = "{where} (<{url}|open the request>)"
A_DIRECT_MESSAGE = "a direct message"
NO_APPROVALS = "none yet"
CARD_ARGUMENTS = "*Arguments*"
CARD_NO_ARGUMENTS = "_no arguments_"
CARD_TRUNCATED = "_(truncated: {count} more characters)_"
UNKNOWN_PERSON = "someone"
AGENT_PATH_SEPARATOR = " › "

APPROVE = "Approve"
DECLINE = "Decline"
EDIT = "Edit"
CONFIRM_TITLE = "Approve this call?"
CONFIRM_TEXT = "The agent will run `{tool}` with the arguments shown."
CONFIRM_YES = "Approve"
CONFIRM_NO = "Cancel"
GRANT = "Approve for this thread ({duration})"
GRANT_CONFIRM_TITLE = "Approve for this thread?"
GRANT_CONFIRM_TEXT = (
    "The agent will run `{tool}` with the arguments shown, and for {duration} may run "
    "`{tool}` again in this thread, with any arguments, whenever the same person asks, "
    "without a new card."
)
GRANT_CONFIRM_YES = "Approve"

DECIDED_FALLBACK = "{tool}: {outcome}"
SETTLED_TITLE = "{mark} *{title}:* `{tool}`"
EDITED_BY = "{mark} {who}: {changes}"
EDITED_CHANGE = "`{name}`: {before} → {after}"
EDITED_SEPARATOR = "; "

END_GRANT = "End grant"

# -- Stop, under the text before a card or question -------------------------------

STOP = "Stop"
STOP_CONFIRM_TITLE = "Stop this request?"
STOP_CONFIRM_TEXT = "Nothing more runs for it."
STOP_CONFIRM_YES = "Stop"
STOP_CONFIRM_NO = "Keep going"

# -- the line left in the requester's thread for a card shown elsewhere ------------

POINTER_IN_CHANNEL = ":hourglass_flowing_sand: `{tool}` is waiting for approval in {channel}{see}."
POINTER_TO_PEOPLE = ":envelope_with_arrow: `{tool}` was sent to {who} for approval."
POINTER_LINK = "(<{url}|see the card>)"
WAITING = "waiting for approval"

# -- /approvals (only the person who asks sees it) ----------------------------------

INBOX_WAITING = "*Waiting for you*"
INBOX_WAITING_COUNT = "*Waiting for you* ({count})"
INBOX_NOTHING_WAITING = "_Nothing waits for your decision._ :tada:"
INBOX_CALL = "`{tool}` {args}"
INBOX_NO_ARGS = "_no arguments_"
INBOX_ASKED_BY = "asked by {who}"
INBOX_IN = "requested in {where}"
INBOX_EXPIRES = "expires {when}"
INBOX_SEPARATOR = " · "
INBOX_MORE_WAITING = "…and {count} more waiting for you: decide these, then run `/approvals` again."
INBOX_REQUESTED = "*Your requests* (waiting for someone else)"
INBOX_NO_REQUESTS = "_None waiting._"
INBOX_DECIDED = "*Recent decisions*"
INBOX_NO_DECISIONS = "_You have not decided anything lately._"
INBOX_DECISION = "• {when}: {outcome} `{tool}`{args}"
INBOX_MORE = "…and {count} more"
INBOX_GRANTS = "You gave {count} grant(s) that still run: `/approvals revoke` ends them."
INBOX_NO_GRANTS = "You have no grants running."
INBOX_FALLBACK = "Approvals: {waiting} waiting for you, {requested} of your requests waiting"
INBOX_DONE = "`{tool}`: {outcome}"
# -- the Home tab (each person's own inbox, kept current) ---------------------------

HOME_TITLE = "Approvals"  # a header: 150 characters at most
HOME_INTRO = (
    "What waits for your decision in every channel, what you asked for, and what you "
    "decided lately. Decide right here: the card in its thread shows it."
)
HOME_NOTHING_WAITING = (
    "_Nothing waits for your decision._ :tada: When an agent asks for something you may "
    "approve, it shows up here."
)
HOME_MORE_WAITING = "…and {count} more waiting for you: they show here as you decide these."
HOME_UPDATED = "Updated {when}"

INBOX_UNAVAILABLE = "I can't read the approvals right now; please try again in a moment."

# -- decline modal (title, submit and close are limited to 24 characters) -------

MODAL_TITLE = "Decline"
MODAL_SUBMIT = "Decline"
MODAL_CLOSE = "Cancel"
MODAL_INTRO = "The agent will be told you declined, with your reason if you give one."
MODAL_REASON_LABEL = "Reason (optional)"
MODAL_REASON_PLACEHOLDER = "Why not?"

# -- suspension prompt ----------------------------------------------------------

PROMPT_TITLE = ":speech_balloon: *{tool}* asks:"
PROMPT_FIELDS = "_Expected:_ {fields}"
PROMPT_RETRY = ":warning: That reply did not fit: {error}"
PROMPT_HINT = "Reply in this thread to answer, or press Decline or Cancel."
PROMPT_FORM_HINT = "Press *Answer…* to fill in the answer, or Decline or Cancel."
ANSWER = "Answer…"
QUESTION_DECLINE = "Decline"
QUESTION_CANCEL = "Cancel"

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
FEEDBACK_UP = "👍"
FEEDBACK_DOWN = "👎"
FEEDBACK_UP_LABEL = "This answer helped"
FEEDBACK_DOWN_LABEL = "This answer did not help"
