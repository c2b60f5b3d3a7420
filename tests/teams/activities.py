"""Bot Framework activities as Teams sends them (JSON), for posting to /api/messages."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

TENANT = "tenant-1"
CHANNEL = "19:ops-channel@thread.tacv2"
GROUP_CHAT = "19:group-chat@thread.v2"
PERSONAL_CHAT = "a:personal-chat-with-alice"
BOT = {"id": "28:approval-bot", "name": "Ops (prod) Bot"}
ALICE = {"id": "29:alice", "aadObjectId": "aad-alice", "name": "Alice"}
BOB = {"id": "29:bob", "aadObjectId": "aad-bob", "name": "Bob"}
CAROL = {"id": "29:carol", "aadObjectId": "aad-carol", "name": "Carol"}

_ids = itertools.count(1)


def next_id() -> str:
    """A fresh activity id (Teams ids are numeric strings)."""
    return str(1_700_000_000_000 + next(_ids))


def _base(service_url: str, conversation: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    return {
        "channelId": "msteams",
        "serviceUrl": service_url,
        "from": user,
        "recipient": BOT,
        "conversation": conversation,
        "channelData": {"tenant": {"id": TENANT}},
        "locale": "en-US",
    }


def channel_conversation(root: str | None, *, channel: str = CHANNEL) -> dict[str, Any]:
    """A channel conversation; ``root`` is the thread (``None``: a new top-level post)."""
    conv_id = channel if root is None else f"{channel};messageid={root}"
    return {"id": conv_id, "conversationType": "channel", "tenantId": TENANT, "isGroup": True}


def chat_conversation(kind: str = "personal", *, conv_id: str | None = None) -> dict[str, Any]:
    """A personal chat (Alice's with the bot unless ``conv_id`` names another) or the group chat."""
    conv_id = conv_id or (PERSONAL_CHAT if kind == "personal" else GROUP_CHAT)
    return {"id": conv_id, "conversationType": kind, "tenantId": TENANT}


def message(
    service_url: str,
    text: str,
    *,
    conversation: dict[str, Any],
    user: dict[str, Any] = ALICE,
    mention: bool = False,
    activity_id: str | None = None,
) -> dict[str, Any]:
    """A text message; ``mention`` prefixes it with an @mention of the bot."""
    activity = {
        **_base(service_url, conversation, user),
        "type": "message",
        "id": activity_id or next_id(),
        "text": text,
        "textFormat": "plain",
    }
    if mention:
        at = f"<at>{BOT['name']}</at>"
        activity["text"] = f"{at} {text}"
        activity["entities"] = [{"type": "mention", "text": at, "mentioned": BOT}]
    return activity


def channel_post(
    service_url: str, text: str, *, root: str | None = None, **kw: Any
) -> dict[str, Any]:
    """A message in a channel: a new top-level post (``root=None``) or a reply in a thread.

    Like Teams, a new post's conversation id already names its own id as the root.
    """
    activity_id = kw.pop("activity_id", None) or next_id()
    conversation = channel_conversation(root or activity_id)
    return message(service_url, text, conversation=conversation, activity_id=activity_id, **kw)


def all_actions(card: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The card's actions, and those of the cards its Action.ShowCards open."""
    for action in card.get("actions") or []:
        yield action
        if action["type"] == "Action.ShowCard":
            yield from all_actions(action["card"])


def action_data(card: dict[str, Any], verb: str) -> dict[str, Any]:
    """The ``data`` of the card's Action.Execute with ``verb`` (a shown card's too)."""
    for action in all_actions(card):
        if action["type"] == "Action.Execute" and action["verb"] == verb:
            data: dict[str, Any] = action["data"]
            return data
    raise AssertionError(f"no Action.Execute {verb!r} on the card")


def fallback_data(card: dict[str, Any], verb: str) -> dict[str, Any]:
    """The ``data`` of the Action.Submit fallback of the card's ``verb`` action."""
    for action in all_actions(card):
        if action.get("verb") == verb:
            fallback = action["fallback"]
            assert fallback["type"] == "Action.Submit"
            data: dict[str, Any] = fallback["data"]
            return data
    raise AssertionError(f"no action {verb!r} on the card")


def execute(
    service_url: str,
    card: dict[str, Any],
    verb: str,
    *,
    conversation: dict[str, Any],
    card_id: str,
    user: dict[str, Any] = BOB,
    reason: str | None = None,
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``adaptiveCard/action`` invoke Teams sends when someone presses a button.

    ``inputs`` are the card's input values by input id, merged into the data as Teams does.
    """
    data = dict(action_data(card, verb))
    if reason is not None:
        data["reason"] = reason
    data.update(inputs or {})
    return {
        **_base(service_url, conversation, user),
        "type": "invoke",
        "name": "adaptiveCard/action",
        "id": next_id(),
        "replyToId": card_id,
        "value": {
            "action": {"type": "Action.Execute", "verb": verb, "data": data},
            "trigger": "manual",
        },
    }


def submit(
    service_url: str,
    card: dict[str, Any],
    verb: str,
    *,
    conversation: dict[str, Any],
    card_id: str,
    user: dict[str, Any] = BOB,
    reason: str | None = None,
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The message activity an Action.Submit fallback sends (inputs merged into ``value``)."""
    value = dict(fallback_data(card, verb))
    if reason is not None:
        value["reason"] = reason
    value.update(inputs or {})
    return {
        **_base(service_url, conversation, user),
        "type": "message",
        "id": next_id(),
        "replyToId": card_id,
        "value": value,
    }


def refresh(
    service_url: str,
    card: dict[str, Any],
    *,
    conversation: dict[str, Any],
    card_id: str,
    user: dict[str, Any] = BOB,
    trigger: str = "automatic",
) -> dict[str, Any]:
    """The ``adaptiveCard/action`` invoke Teams sends for a card's ``refresh`` when
    ``user``'s client shows it (``trigger: manual`` for their Refresh card)."""
    action = card["refresh"]["action"]
    return {
        **_base(service_url, conversation, user),
        "type": "invoke",
        "name": "adaptiveCard/action",
        "id": next_id(),
        "replyToId": card_id,
        "value": {
            "action": {"type": "Action.Execute", "verb": action["verb"], "data": action["data"]},
            "trigger": trigger,
        },
    }


def refreshes_for(card: dict[str, Any], user: dict[str, Any]) -> bool:
    """Whether Teams refreshes ``card`` by itself for ``user`` (listed, or nobody is)."""
    refresh_ = card.get("refresh")
    if refresh_ is None:
        return False
    listed = refresh_.get("userIds")
    return listed is None or user["id"] in listed


def feedback(
    service_url: str,
    *,
    conversation: dict[str, Any],
    message_id: str | None,
    reaction: str = "like",
    user: dict[str, Any] = BOB,
    value: Any = None,
) -> dict[str, Any]:
    """The ``message/submitAction`` invoke Teams sends when ``user`` gives 👍 (``like``) or
    👎 (``dislike``) on the bot's message ``message_id`` (its form's text as a JSON string);
    ``value`` replaces the whole value, as a client that sends something else would."""
    activity = {
        **_base(service_url, conversation, user),
        "type": "invoke",
        "name": "message/submitAction",
        "id": next_id(),
        "value": {
            "actionName": "feedback",
            "actionValue": {"reaction": reaction, "feedback": '{"feedbackText":"thanks"}'},
        }
        if value is None
        else value,
    }
    if message_id is not None:
        activity["replyToId"] = message_id
    return activity
