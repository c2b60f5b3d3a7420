"""👍 / 👎 on a finished answer: Teams' own feedback buttons ("Enhance AI-generated bot
messages"). The last message of a finished run carries ``channelData``
``{"feedbackLoopEnabled": true}``; a press comes back as a ``message/submitAction`` invoke
whose ``replyToId`` is that message's id, without the run. So each such message's run is
kept as a chat-state note under its conversation and activity id, on any replica.
"""

from __future__ import annotations

import logging
from typing import Final

from botbuilder.schema import Activity

from bot import NoteState

log = logging.getLogger(__name__)

SUBMIT_ACTION_INVOKE: Final = "message/submitAction"
"""The invoke a press of the feedback buttons arrives as (after Teams' own form)."""
CHANNEL_DATA: Final = {"feedbackLoopEnabled": True}
"""What makes Teams show its 👍 / 👎 under a message."""
ANSWER_NOTE_PREFIX: Final = "teams-answer:"
"""``teams-answer:<conversation id>:<activity id>`` -> the run that message answered."""
ANSWER_NOTE_TTL: Final = 30 * 24 * 3600.0
"""How long (seconds) an answer can be rated: a press on an older one is thanked by Teams
and dropped here, so the notes of every answer ever posted do not pile up."""


def offer(activity: Activity) -> Activity:
    """``activity`` with Teams' feedback buttons (its other channel data kept)."""
    data = activity.channel_data if isinstance(activity.channel_data, dict) else {}
    activity.channel_data = {**data, **CHANNEL_DATA}
    return activity


def note_key(conversation_id: str, activity_id: str) -> str:
    """The note naming the run a posted answer belongs to."""
    return f"{ANSWER_NOTE_PREFIX}{conversation_id}:{activity_id}"


async def keep(chat: NoteState, conversation_id: str, activity_id: str | None, run_id: str) -> None:
    """Remember that the message ``activity_id`` answers ``run_id``. The message is out
    already, so a failure is logged: its ratings are dropped, nothing is posted twice."""
    if not activity_id:
        log.info("Teams answered run %s without a message id: it cannot be rated", run_id)
        return
    try:
        await chat.set_note(note_key(conversation_id, activity_id), run_id, ttl=ANSWER_NOTE_TTL)
    except Exception:
        log.exception("could not keep which run the answer %s belongs to", activity_id)
