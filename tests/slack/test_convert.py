"""Payload conversion: mention stripping, thread roots, dedupe keys, click threads."""

from __future__ import annotations

import pytest

from adapters.slack.convert import (
    ActionIn,
    HomeOpenedIn,
    Ignored,
    MessageIn,
    MessagesOpenedIn,
    is_home,
    modal_metadata,
    parse,
    strip_mention,
    to_click,
    to_incoming,
)
from adapters.slack.wire import (
    APPROVE_ACTION,
    FEEDBACK_ACTION,
    HOME_CHANNEL,
    STOP_ACTION,
    PayloadError,
    encode_button_value,
)

from .fake_slack import BOT_USER_ID, TEAM_ID
from .harness import CHANNEL, event_body, home_opened_event, mention_event, message_event


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"<@{BOT_USER_ID}> deploy api", "deploy api"),
        (f"<@{BOT_USER_ID}|approval-bot> deploy api", "deploy api"),
        (f"please <@{BOT_USER_ID}> deploy", "please deploy"),
        ("ask <@U0OTHER01> &amp; me: 1 &lt; 2", "ask <@U0OTHER01> & me: 1 < 2"),
        (f"<@{BOT_USER_ID}>", ""),
    ],
)
def test_the_bot_mention_is_stripped_and_escapes_undone(text: str, expected: str) -> None:
    assert strip_mention(text, BOT_USER_ID) == expected


def test_a_mention_becomes_a_message_on_its_own_thread_with_two_dedupe_keys() -> None:
    event = mention_event("hello", ts="1700.1")
    parsed = parse(event_body(event, event_id="Ev1"))
    assert isinstance(parsed, MessageIn)
    message = to_incoming(parsed, workspace=TEAM_ID, bot_user_id=BOT_USER_ID)
    assert message is not None
    assert message.thread.id == f"slack:{TEAM_ID}:{CHANNEL}:1700.1"
    assert message.dedupe_keys == ("event:Ev1", f"message:{CHANNEL}:1700.1")


def test_a_thread_reply_belongs_to_the_thread_root() -> None:
    parsed = parse(event_body(message_event("x", ts="1700.9", thread_ts="1700.1")))
    assert isinstance(parsed, MessageIn)
    assert parsed.kind == "thread_reply"
    assert parsed.root == "1700.1"


@pytest.mark.parametrize(
    ("text", "mentioned"),
    [
        (f"<@{BOT_USER_ID}> deploy web", True),
        (f"  <@{BOT_USER_ID}|approval-bot> deploy web", True),
        ("1.4.2", False),
        (f"use 1.4.2 <@{BOT_USER_ID}>", False),
    ],
)
def test_a_thread_reply_that_starts_with_the_mention_is_a_new_request(
    text: str, mentioned: bool
) -> None:
    """Either event of the pair (app_mention, message) says the same, whichever comes first."""
    reply = message_event(text, ts="1700.9", thread_ts="1700.1")
    for event in (reply, {**reply, "type": "app_mention"}):
        parsed = parse(event_body(event))
        assert isinstance(parsed, MessageIn)
        message = to_incoming(parsed, workspace=TEAM_ID, bot_user_id=BOT_USER_ID)
        assert message is not None
        assert message.mentioned is mentioned


def test_a_message_that_is_only_the_mention_is_dropped() -> None:
    parsed = parse(event_body(message_event(f"<@{BOT_USER_ID}>", channel_type="im")))
    assert isinstance(parsed, MessageIn)
    assert to_incoming(parsed, workspace=TEAM_ID, bot_user_id=BOT_USER_ID) is None


def test_a_top_level_channel_message_is_ignored() -> None:
    assert isinstance(parse(event_body(message_event("hi"))), Ignored)


def _action(container: dict[str, str], message: dict[str, str] | None) -> dict[str, object]:
    return {
        "type": "block_actions",
        "user": {"id": "U0BOB0001"},
        "team": {"id": TEAM_ID},
        "trigger_id": "t",
        "container": {"type": "message", "channel_id": CHANNEL, **container},
        "message": message,
        "actions": [{"action_id": APPROVE_ACTION, "value": encode_button_value("r", "c")}],
    }


@pytest.mark.parametrize(
    ("container", "message", "root"),
    [
        ({"message_ts": "2.0", "thread_ts": "1.0"}, {"ts": "2.0"}, "1.0"),
        ({"message_ts": "2.0"}, {"ts": "2.0", "thread_ts": "1.5"}, "1.5"),
        ({"message_ts": "2.0"}, None, "2.0"),
    ],
)
def test_a_click_is_in_the_thread_of_its_card(
    container: dict[str, str], message: dict[str, str] | None, root: str
) -> None:
    parsed = parse(_action(container, message))
    assert isinstance(parsed, ActionIn)
    click = to_click(parsed, workspace=None)
    assert click.thread.id == f"slack:{TEAM_ID}:{CHANNEL}:{root}"
    assert (click.run_id, click.tool_call_id, click.action) == ("r", "c", "approve")
    assert click.message_ref == {"channel": CHANNEL, "ts": "2.0"}


def test_a_click_without_any_team_is_malformed() -> None:
    payload = _action({"message_ts": "2.0"}, None)
    del payload["team"]
    with pytest.raises(PayloadError):
        parse(payload)


def _home_action(view_type: str = "home", **action: str) -> dict[str, object]:
    pressed = action or {
        "action_id": APPROVE_ACTION,
        "value": encode_button_value("r", "c", ask="a1"),
    }
    return {
        "type": "block_actions",
        "user": {"id": "U0BOB0001"},
        "team": {"id": TEAM_ID},
        "trigger_id": "t",
        "container": {"type": "view", "view_id": "V1"},
        "view": {"id": "V1", "type": view_type, "blocks": []},
        "actions": [pressed],
    }


def test_a_click_in_the_home_tab_is_in_the_home_and_in_no_message() -> None:
    parsed = parse(_home_action())
    assert isinstance(parsed, ActionIn)
    assert (parsed.home, parsed.ephemeral, parsed.response_url) == (True, False, None)
    click = to_click(parsed, workspace=TEAM_ID)
    assert is_home(click.thread)
    assert (click.thread.channel, click.thread.root) == (HOME_CHANNEL, "")
    assert click.message_ref is None
    assert (click.run_id, click.tool_call_id, click.ask) == ("r", "c", "a1")
    metadata = modal_metadata(parsed, workspace=TEAM_ID)
    assert (metadata.channel, metadata.root, metadata.ts) == (HOME_CHANNEL, "", None)


@pytest.mark.parametrize(
    "payload",
    [
        _home_action("modal"),
        _home_action(action_id=FEEDBACK_ACTION, value="helpful:run-1"),
        _home_action(action_id=STOP_ACTION, value="run-1"),
    ],
    ids=["in a modal", "feedback in the home", "stop in the home"],
)
def test_a_press_of_ours_where_the_bot_puts_none_is_malformed(payload: dict[str, object]) -> None:
    with pytest.raises(PayloadError):
        parse(payload)


def test_opening_the_home_tab_and_the_messages_tab_are_read_and_another_tab_ignored() -> None:
    opened = parse(event_body(home_opened_event("U0BOB0001")))
    assert opened == HomeOpenedIn(team=TEAM_ID, user="U0BOB0001")
    messages = home_opened_event("U0BOB0001", tab="messages")
    assert parse(event_body(messages)) == MessagesOpenedIn(
        team=TEAM_ID, user="U0BOB0001", channel=messages["channel"]
    )
    assert isinstance(parse(event_body(home_opened_event("U0BOB0001", tab="about"))), Ignored)
