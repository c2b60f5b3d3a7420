"""Every user-facing string of the chat core, in one place.

Placeholders are ``str.format`` fields. ``{who}`` in a private answer is people
by name (or id). A notice meant for someone names them itself (``Notice.to``).
"""

from __future__ import annotations

from typing import Final

THINKING: Final = "is thinking…"
STEP_APPROVAL: Final = "Waiting for approval"
STEP_APPROVAL_FROM: Final = "Waiting for approval from {who}"
STEP_MORE: Final = " and {count} more"
STEP_QUESTION: Final = "Waiting for an answer"

# -- messages in a thread ------------------------------------------------------

APPROVAL_PENDING: Final = (
    "A message can't approve `{tool}`: only the Approve and Decline buttons on its card "
    "above decide it. Meanwhile, ask me anything else here."
)
APPROVAL_WORDS: Final = frozenset(
    {
        "approve",
        "approved",
        "approve it",
        "lgtm",
        "decline",
        "declined",
        "decline it",
        "deny",
        "denied",
        "reject",
        "rejected",
    }
)
"""A message that is only one of these, while an approval waits, is someone deciding by
text: they are told only the card decides it. Only words that name a decision: a "yes"
or "ok" may answer what the conversation asked since, so it is a new turn."""
WAITING_NOTE: Final = (
    "[Still waiting in this thread at {now}, not run yet: `{tool}` ({args}), asked by "
    '{requester} for "{request}". It runs only once someone decides it on its approval '
    "card; a message cannot approve it.]"
)
"""Put before a new request's text for the agent (never shown to people), for each call
waiting in the thread: the conversation goes on while a card waits, and the model knows.
``now`` dates it: kept in the thread's history, it reads as what was true then."""
WAITING_QUESTION_NOTE: Final = (
    "[Still waiting in this thread at {now}: `{tool}` asked {requester} a question for "
    '"{request}"; their plain reply in the thread answers it.]'
)
ANSWER_ABOUT: Final = "About “{request}”:\n\n"
"""Leads the answer of a request that was waiting while the thread went on (a follow-up
was answered meanwhile): which request this answer is about."""
REQUEST_SHOWN: Final = 120
"""The longest request an answer's lead (``ANSWER_ABOUT``) quotes."""
ANSWER_RACED: Final = (
    "Someone changed this request at the same moment, so your answer did not count. "
    "Please send it again."
)
QUESTION_WAITS_CHOICE: Final = (
    "`{tool}` is still waiting for one of its answers ({choices}), and your message is none "
    "of them, so I did not take it as one. Reply with one of them, or `cancel` to leave "
    "the question; then send your request again."
)
"""A question whose answers are its choices says what a new request is: anything longer."""
CANCEL_WORDS: Final = frozenset({"cancel", "stop", "never mind", "nevermind", "forget it"})
"""A reply that is only one of these leaves the question (unless it is one of its choices)."""
QUESTION_GONE: Final = (
    "That question was already answered, or it expired; nothing was changed. "
    "Send your message again if it was meant as a new request."
)
DELAYED: Final = (
    "I can't reach my storage right now. Your request is queued and goes ahead as soon "
    "as it's back; no need to send it again."
)
LOOKING_AT: Final = "[The person is looking at {context}.]"
"""Put before a new request's text for the agent (never shown to people), when the
platform says what the person is looking at (``IncomingMessage.context``)."""
RUN_FAILED: Final = "I couldn't finish this: {error}"
INTERNAL_ERROR: Final = (
    "Something went wrong on my side; the details are in the bot's log. Please try again."
)
DECIDED_APPROVED: Final = "your request to run `{tool}` was approved; it runs now."
DECIDED_GRANTED: Final = (
    "your request to run `{tool}` was approved, with its later calls here for {duration}; "
    "it runs now."
)
DECIDED_EDITED: Final = (
    "your request to run `{tool}` was approved with edited arguments ({changes}); "
    "it runs now, exactly as edited."
)
DECIDED_DECLINED: Final = "your request to run `{tool}` was declined, so it did not run."
DECIDED_DECLINED_HERE: Final = (
    "your request to run `{tool}` was declined, so it did not run, and `{tool}` is not "
    "asked for again in this thread for {duration}."
)
DECIDED_DECLINED_WHY: Final = (
    "your request to run `{tool}` was declined, so it did not run. Reason: {reason}"
)
DECIDED_RESPONDED: Final = (
    "your request to run `{tool}` was answered instead, so it did not run: {response}"
)
"""Said to whoever asked, when someone else decided their card (the card says who)."""
GRANTED_RUN: Final = (
    "`{tool}` ran under your grant for this thread, without a new card "
    "(reply `revoke` to end this thread's grants)."
)
GRANT_NOT_OFFERED: Final = "This request can't be approved for the thread; approve it on its own."
GRANTS_REVOKED: Final = (
    "Ended {count} grant(s) or standing decline(s) in this thread: each call asks for "
    "approval again."
)
NO_GRANTS: Final = "There are no grants or standing declines in this thread to end."
FEEDBACK_THANKS: Final = "Thanks: your rating of this answer is noted."
FEEDBACK_UNKNOWN: Final = "That answer is not known here any more."
GRANT_ENDED: Final = (
    "ended the grant for `{tool}` in this thread: its calls ask for approval again."
)
GRANT_GONE: Final = "The grant for `{tool}` has ended already."
GRANT_UNKNOWN: Final = "That grant is not known in this thread."
GRANT_NOT_YOURS: Final = (
    "Only the requester, whoever granted it, or an approver of `{tool}` can end this grant."
)
GRANTS_GIVEN_ENDED: Final = (
    "Ended {count} grant(s) or standing decline(s) you gave: those calls ask for approval again."
)
NO_GRANTS_GIVEN: Final = "You have no grants or standing declines running."
REVOKE_WORDS: Final = frozenset({"revoke", "revoke grants"})
"""A message that is only one of these ends the thread's grants."""
APPROVALS_USAGE: Final = (
    "`/approvals` shows what waits for your decision; `/approvals revoke` ends the grants you gave."
)
REMINDER: Final = "reminder: `{tool}` is still waiting for a decision (the card above)."
ESCALATED: Final = (
    "`{tool}` has waited long for a decision, so you may now decide it too (the card above)."
)
EXPIRED_APPROVAL: Final = (
    "nobody decided on `{tool}` in time, so the request expired and the tool did not run."
)
EXPIRED_QUESTION: Final = (
    "the question from `{tool}` expired without an answer, so the tool did not continue."
)
FINISH_NOTES: Final = {
    "refusal": "The model declined to help with this request.",
    "length": "The answer was cut off: it reached the model's length limit.",
    "max_steps": "I stopped after too many steps without finishing; please ask more narrowly.",
}
"""Said after an answer that ended for a reason other than being done."""
NO_REQUESTER: Final = "Heads up: {text}"
"""A notice meant for whoever asked, when nobody is on record as having asked."""
ANSWER_FIELD: Final = "answer"
"""How a card labels a reply the tool takes as it is, beside its arguments."""
QUESTION_FALLBACK: Final = "`{tool}` needs more information to continue."

# -- answers to a click, shown to the clicker only ----------------------------

CLICK_ALREADY_DECIDED: Final = "This request was already {action} by {who}."
CLICK_ALREADY_DECIDED_UNKNOWN: Final = "This request was already decided."
CLICK_EXPIRED: Final = "This request expired; nothing was run."
CLICK_INTERRUPTED: Final = "The bot stopped while working on this request, so it was closed."
CLICK_UNKNOWN: Final = "This request no longer exists, so there is nothing to decide."
CLICK_STOPPED: Final = "This request was stopped, so there is nothing to decide."
STOP_WORDS: Final = frozenset({"stop", "cancel", "abort", "stop it", "stop that"})
"""A whole message that stops the thread's work (a waiting question hears ``cancel``)."""
STOPPED: Final = "stopped as you asked. Nothing more runs for this request."
"""Said in the thread to whoever stopped it (named first, as a notice's person is)."""
STOPPING: Final = (
    "stopping as you asked: a tool already running finishes, and nothing runs after it."
)
NOTHING_TO_STOP: Final = "Nothing is running or waiting here, so there is nothing to stop."
STOP_NOT_YOURS: Final = (
    "Only whoever asked, or someone who may decide what it waits for, can stop this."
)
CLICK_OTHER_THREAD: Final = "This card does not belong to this conversation."
CLICK_NOT_AN_APPROVAL: Final = "This request waits for an answer in the thread, not a button."
EDIT_INTRO: Final = "Change what `{tool}` runs with, then approve: it runs exactly as sent."
EDIT_INVALID: Final = "Those arguments do not fit: {errors}. Please correct them and send again."
EDIT_NOT_OFFERED: Final = (
    "This request can't be edited (it needs several approvals, or its arguments "
    "are not plain values); approve or decline it as it is."
)
CLICK_NOT_A_QUESTION: Final = "This request waits for a decision, not for an answer."
FORM_INVALID: Final = "That answer does not fit: {errors}. Please correct it and send it again."
CLICK_OUTDATED: Final = (
    "This card is out of date: the request changed since it was posted. "
    "Use its newest card in the thread."
)
CLICK_ALREADY_VOTED: Final = "You already approved; waiting for {more} more."
CLICK_UNAVAILABLE: Final = "I can't record decisions right now; please try again in a moment."
CLICK_DELAYED: Final = (
    "I can't reach my storage right now. Your click is kept and counts as soon as it's "
    "back; no need to click again."
)
CLICK_QUEUED: Final = "Your click is recorded; the card updates once it is carried out."
CLICK_RACED: Final = (
    "Someone changed this request at the same moment, so your click did not count. "
    "Please look at the card again."
)

# -- approval policy refusals --------------------------------------------------

POLICY_NOT_APPROVER: Final = "You are not one of the approvers for `{tool}`."
ANSWER_NOT_ALLOWED: Final = (
    "Only people who may approve `{tool}` may answer its question; your reply was not used."
)
POLICY_DECIDERS_WHEN: Final = (
    "The approval policy's rule for `{tool}` (deciders_when) does not let you decide this request."
)
POLICY_EDITOR: Final = "You edited this `{tool}` request; someone else has to approve it."
POLICY_DECIDERS_UNKNOWN: Final = (
    "The approval policy's rule for `{tool}` (deciders_when) could not be checked for you "
    "right now (a user group could not be looked up); please try again in a moment."
)
VOTE_SAME_GROUP: Final = (
    "This `{tool}` request needs approvals from people of {count} different groups; your "
    "vote would not add one that is still missing, so it was not counted."
)
REVIEW_CAUTION: Final = "🤖 Reviewer: caution: {reason}"
"""On a card whose call the policy's reviewer model read and did not clear."""
REVIEWED_RUN: Final = "{tool} ran without a card: the approval policy's reviewer cleared it."
REVIEW_NONE: Final = "🤖 Reviewer: no verdict ({why}); a person decides."
POLICY_SELF_APPROVAL: Final = "You asked for `{tool}` yourself; someone else has to approve it."

DECIDED: Final = "decided"

# -- what an edit changed (bot.outcome) ----------------------------------------

SOMEONE: Final = "someone"
"""Who decided, on a card whose decider is not on record."""
EDITED_BY: Final = "Edited by {who}"
EDITED_NOTE: Final = " (edited: {changes})"
"""What an edit changed, after a one-line outcome (a notification text, a pointer)."""
OUTCOME_REASON: Final = "Reason: {reason}"
"""A decline's reason, on a line of its own where a platform shows it so."""
CHANGE: Final = "{name}: {before} → {after}"
CHANGE_SEPARATOR: Final = "; "
CHANGE_ABSENT: Final = "(none)"
"""One side of a change where the argument is absent (added, or removed, by the edit)."""
AUDIT_CHANGED: Final = "changed {changes}"
"""The audit report's detail of an ``edited`` entry: what the edit changed."""

# -- the views (bot.compose): every card, question, pointer and list ----------------

AGENT_PATH_SEPARATOR: Final = " › "
CARD_TITLE: Final = "🔒 {approval_needed} {tool}"
APPROVAL_NEEDED: Final = "Approval needed:"
CARD_SUMMARY: Final = "Approval needed: {tool} (asked by {requester})"
BATCH_TITLE: Final = "🔒 {approval_needed} {count} calls"
BATCH_SUMMARY: Final = "Approval needed: {count} calls (asked by {requester})"
BATCH_DONE_TITLE: Final = "{count} calls, each decided"
BATCH_DONE_SUMMARY: Final = "{count} calls, each decided"
BATCH_CALLS: Final = "Calls"
BATCH_CALL: Final = "{mark}{tool} {args}"
BATCH_VIA: Final = "via {agent}"
APPROVE_ALL: Final = "Approve all ({count})"
DECLINE_ALL: Final = "Decline all ({count})"
APPROVE_ALL_CONFIRM_TITLE: Final = "Approve all?"
APPROVE_ALL_CONFIRM_TEXT: Final = (
    "The agent will run each of the {count} calls still waiting, with the arguments shown."
)
DECLINE_ALL_CONFIRM_TITLE: Final = "Decline all?"
DECLINE_ALL_CONFIRM_TEXT: Final = "None of the {count} calls still waiting will run."
BATCH_NONE_WAITING: Final = "None of these calls waits any more."
BATCH_SOME_REFUSED: Final = "{count} of them were not decided: {why}"
SETTLED_TITLE: Final = "{mark} {title} {tool}"
OUTCOME_TITLE: Final = "{title}:"
SETTLED_SUMMARY: Final = "{tool}: {outcome}"
FACT_AGENT: Final = "Agent"
FACT_ASKED_BY: Final = "Asked by"
FACT_REQUESTED_IN: Final = "Requested in"
FACT_EXPIRES: Final = "Expires"
FACT_APPROVALS: Final = "Approvals"
APPROVALS_SO_FAR: Final = " ({count} of {quorum})"
NO_APPROVALS: Final = "none yet"
ARGUMENTS: Final = "Arguments"
NO_ARGUMENTS: Final = "no arguments"
FOR_APPROVERS: Final = "Only the approvers can decide this."
"""On a pending card shown to someone who may not decide it (no buttons)."""

APPROVE: Final = "Approve"
DECLINE: Final = "Decline"
EDIT: Final = "Edit"
APPROVE_EDITED: Final = "Approve edited"
GRANT: Final = "Approve for this thread ({duration})"
CONFIRM_TITLE: Final = "Approve this call?"
CONFIRM_TEXT: Final = "The agent will run {tool} with the arguments shown."
CONFIRM_YES: Final = "Approve"
CONFIRM_NO: Final = "Cancel"
GRANT_CONFIRM_TITLE: Final = "Approve for this thread?"
GRANT_CONFIRM_TEXT: Final = (
    "The agent will run {tool} with the arguments shown, and for {duration} may run "
    "{tool} again in this thread, with any arguments, whenever the same person asks, "
    "without a new card."
)
GRANT_TOOLTIP: Final = (
    "Approve this call, and for {duration} let {tool} run again in this thread, with any"
    " arguments, whenever the same person asks, without a new card"
)
REASON_LABEL: Final = "Reason (optional, shown with a decline)"
REASON_PLACEHOLDER: Final = "Why?"
EDIT_HINT: Final = "Change the arguments, then approve them as edited."
NEVER: Final = "Decline, don't ask again here ({duration})"
NEVER_CONFIRM_TITLE: Final = "Decline, and not ask again?"
NEVER_CONFIRM_TEXT: Final = (
    "This declines {tool}, and for {duration} declines every call of {tool} in this "
    "thread without asking, whoever asks. `revoke` in the thread, or `/approvals revoke`, "
    "ends it sooner."
)
NEVER_CONFIRM_YES: Final = "Decline"
NEVER_TOOLTIP: Final = (
    "Decline this call, and for {duration} decline {tool} in this thread without asking"
)
NEVER_REASON: Final = "declined, and not to be asked again in this thread for {duration}"
"""The reason a "Decline, don't ask again here" decision gives (the model reads it)."""
NEVER_STANDING: Final = (
    "a person said not to ask again for {tool} in this thread for a while; don't call "
    "it again here unless someone says that has ended"
)
"""Why a call a standing decline covers was declined without asking (the model reads it)."""
NEVER_RAN: Final = (
    "`{tool}` was declined without asking: someone said not to ask again in this thread "
    "for a while (`revoke` here ends it)."
)
"""Said in the thread of a call a standing decline declined (naming who said so)."""
NEVER_NOT_OFFERED: Final = (
    "This card does not offer declining for a while (the policy's `never_for`)."
)
RESPOND: Final = "Respond instead"
RESPOND_HINT: Final = (
    'Answer for {tool} instead of running it ("already restarted it by hand"): it does '
    "not run, and the agent gets your words as its result, marked as yours."
)
RESPONSE_LABEL: Final = "Your answer"
RESPOND_SUBMIT: Final = "Send instead of running"
RESPOND_TOOLTIP: Final = "Answer for the tool instead of running it"
RESPOND_NOT_OFFERED: Final = (
    "This card does not offer answering in the tool's place (the approval policy's `respond`)."
)
RESPONSE_REQUIRED: Final = "Write the answer the agent should get instead of the tool's result."

QUESTION_TITLE: Final = "💬 {tool} asks:"
QUESTION_VIA: Final = "via {agent}"
QUESTION_RETRY: Final = "⚠️ That reply did not fit: {error}"
QUESTION_SUMMARY: Final = "{tool} asks: {question}"
QUESTION_REPLY_HINT: Final = "Reply in this thread to answer."
QUESTION_FIELDS_HINT: Final = "Reply in this thread to answer ({fields})."
QUESTION_FORM_HINT: Final = "Fill in the answer, or reply in this thread."
ANSWER: Final = "Answer…"
ANSWER_INTRO: Final = "Your answer to {tool}"
SEND: Final = "Send"
QUESTION_DECLINE: Final = "Decline"
QUESTION_DECLINE_TOOLTIP: Final = "Refuse to answer: the tool is told you declined"
QUESTION_CANCEL: Final = "Cancel"
QUESTION_CANCEL_TOOLTIP: Final = "Dismiss the question without answering"

POINTER_IN_CHANNEL: Final = "⏳ {tool} is waiting for approval in {channel} {link}"
POINTER_TO_PEOPLE: Final = "📨 {tool} was sent to {who} for approval."
POINTER_LINK: Final = "(see the card)"
WAITING: Final = "waiting for approval"
MORE: Final = "…and {count} more"

STOP: Final = "Stop"
STOP_TOOLTIP: Final = "Stop this request: nothing more runs for it"
STOP_CONFIRM_TITLE: Final = "Stop this request?"
STOP_CONFIRM_TEXT: Final = "Nothing more runs for it."
STOP_CONFIRM_YES: Final = "Stop"
STOP_CONFIRM_NO: Final = "Keep going"
END_GRANT: Final = "End grant"
END_GRANT_TOOLTIP: Final = "End this grant: later calls of the tool here ask for approval again"

# -- a person's approvals list (bot.inbox.inbox_document) ----------------------------

INBOX_TITLE: Final = "Your approvals"
INBOX_INTRO: Final = (
    "What waits for your decision in every channel, what you asked for, and what you "
    "decided lately. Decide right here: the card in its thread shows it."
)
"""Atop a list kept current where it is shown (Slack's Home tab)."""
INBOX_UPDATED: Final = "Updated {when}"
INBOX_SUMMARY: Final = (
    "Your approvals: {waiting} waiting for you, {requested} of your requests waiting"
)
INBOX_WAITING: Final = "Waiting for you ({count})"
INBOX_NONE_WAITING: Final = "Nothing waits for your decision. 🎉"
INBOX_NONE_WAITING_KEPT: Final = (
    "Nothing waits for your decision. 🎉 When an agent asks for something you may "
    "approve, it shows up here."
)
INBOX_MORE_WAITING: Final = (
    "…and {count} more waiting for you: decide these, then ask for the list again."
)
INBOX_MORE_WAITING_KEPT: Final = (
    "…and {count} more waiting for you: they show here as you decide these."
)
INBOX_CALL: Final = "{tool} {args}"
INBOX_ASKED_BY: Final = "asked by {who}"
INBOX_VIA: Final = "via {agent}"
INBOX_IN: Final = "requested in {where}"
INBOX_EXPIRES: Final = "expires {when}"
INBOX_SEPARATOR: Final = " · "
INBOX_REQUESTED: Final = "Your requests ({count})"
INBOX_NONE_REQUESTED: Final = "None of your requests is waiting for someone else."
INBOX_DECIDED: Final = "Recent decisions"
INBOX_NONE_DECIDED: Final = "You have not decided anything lately."
INBOX_DECISION: Final = "{outcome} {tool}{args}"
INBOX_GRANTS: Final = "Grants you gave that still run: {count}. {revoke} ends them."
INBOX_NO_GRANTS: Final = "You have no grants running."
REVOKE_COMMAND: Final = "revoke"
INBOX_DONE: Final = "{tool}: {outcome}"
INBOX_VOTED: Final = "Your approval of {tool} is counted ({count} of {quorum})."

# -- requests of the team's other agents (bot.service) -----------------------------

CLIENT_ASKS: Final = "{client} asks for approval to run {tool}"
"""Atop a client's card (``bot.service``): the client and its tool's own name."""
CLIENT_ASKS_WHY: Final = "{client} asks for approval to run {tool}: {summary}"
CLIENT_ASKS_QUESTION: Final = "{client} asks:"
"""Atop a client's question (``bot.service``): the question itself follows."""
CLIENT_WITHDREW: Final = "{client} withdrew its request to run {tool}."
CLIENT_SAYS: Final = "{client}: {text}"

# -- decision pages (bot.pages) ---------------------------------------------------

PAGE_TITLE: Final = "Approval"
"""The browser tab's title of a decision page."""
PAGE_FOR: Final = "For {who}: this link is yours alone; it decides once."
PAGE_FORGED: Final = "This link is not one of the bot's (it may be cut short: copy it whole)."
PAGE_UNKNOWN: Final = "This link's request is no longer known."
PAGE_EXPIRED: Final = "This link has expired: its request is no longer waiting."
PAGE_USED: Final = "This link was used already: it decides only once."
PAGE_DECIDED: Final = "This request was decided already."
PAGE_DONE: Final = "Done: your decision is recorded."
PAGE_BAD_FORM: Final = "That was not a form of this page."
"""A ``POST`` that is not the page's form (or is too big to be one)."""
PAGE_UNKNOWN_ACTION: Final = "That is not one of this page's buttons."
PAGE_LINK: Final = "Or decide in your browser: {link}"
"""Under a card sent to one approver: their decision page."""
PAGE_LINK_WORDS: Final = "open the decision page"
