"""manifest/slack.yaml matches the adapter: events it listens to, the slash command it
answers, scopes for what it calls."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from adapters.slack import EVENTS_PATH, LISTENED_EVENTS
from adapters.slack.app import ASSISTANT_VIEW_EVENTS, BOT_SCOPES, REDIRECT_PATH, REVOCATION_EVENTS
from adapters.slack.wire import APPROVALS_COMMAND, APPROVE_ACTION, DECLINE_ACTION
from agents import Store
from bot import ApprovalPolicy, SuggestedPrompt

from .conftest import StartBot
from .fake_slack import FakeSlack
from .harness import (
    ALICE,
    BOB,
    DM_CHANNEL,
    BotServer,
    block_actions,
    home_opened_event,
    mention_event,
    message_event,
    new_ts,
    view_submission,
)
from .scripted import Ran, build_agent
from .test_approvals import ask_for_deploy

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "manifest" / "slack.yaml"
ADAPTER = ROOT / "adapters" / "slack"

# What each Web API method and bot event needs (https://docs.slack.dev/reference).
METHOD_SCOPES: dict[str, frozenset[str]] = {
    "auth.test": frozenset(),
    # With the app-level token (connections:write), no bot scope: check --live.
    "apps.connections.open": frozenset(),
    "chat.postMessage": frozenset({"chat:write"}),
    "chat.update": frozenset({"chat:write"}),
    "chat.postEphemeral": frozenset({"chat:write"}),
    "chat.startStream": frozenset({"chat:write"}),
    "chat.appendStream": frozenset({"chat:write"}),
    "chat.stopStream": frozenset({"chat:write"}),
    "chat.getPermalink": frozenset(),
    "views.open": frozenset(),
    "views.publish": frozenset(),
    "assistant.threads.setStatus": frozenset({"chat:write"}),
    "assistant.threads.setSuggestedPrompts": frozenset({"assistant:write"}),
    "assistant.threads.setTitle": frozenset({"assistant:write"}),
    "conversations.open": frozenset({"im:write"}),
    # The policy's channel may be public or private.
    "conversations.info": frozenset({"channels:read", "groups:read"}),
    # Reading back a post made before a crash (its metadata), in any kind of conversation.
    "conversations.replies": frozenset(
        {"channels:history", "groups:history", "im:history", "mpim:history"}
    ),
    "conversations.history": frozenset(
        {"channels:history", "groups:history", "im:history", "mpim:history"}
    ),
    "usergroups.list": frozenset({"usergroups:read"}),
    "usergroups.users.list": frozenset({"usergroups:read"}),
}
COMMAND_SCOPE = "commands"
EVENT_SCOPES: dict[str, frozenset[str]] = {
    "app_context_changed": frozenset(),
    "app_home_opened": frozenset(),
    "app_mention": frozenset({"app_mentions:read"}),
    "message.channels": frozenset({"channels:history"}),
    "message.groups": frozenset({"groups:history"}),
    "message.im": frozenset({"im:history"}),
    "message.mpim": frozenset({"mpim:history"}),
}


def manifest() -> dict[str, Any]:
    data = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def methods_in_source() -> set[str]:
    """Web API methods the adapter calls: ``client.chat_postMessage(`` is chat.postMessage."""
    found: set[str] = set()
    for path in ADAPTER.glob("*.py"):
        for name in re.findall(r"client\.([a-z]+_[A-Za-z_]+)\(", path.read_text(encoding="utf-8")):
            found.add(name.replace("_", "."))
    return found


def test_the_bot_events_are_exactly_the_ones_the_adapter_listens_to() -> None:
    events = manifest()["settings"]["event_subscriptions"]["bot_events"]
    assert {event.split(".")[0] for event in events} == set(LISTENED_EVENTS)
    assert set(events) == set(EVENT_SCOPES)


def test_the_scopes_cover_every_method_and_event_and_nothing_more() -> None:
    calls = methods_in_source()
    assert calls, "the adapter calls the Web API somewhere"
    assert calls <= set(METHOD_SCOPES), f"add a scope rule for {calls - set(METHOD_SCOPES)}"
    needed = {scope for m in calls for scope in METHOD_SCOPES[m]}
    needed |= {scope for scopes in EVENT_SCOPES.values() for scope in scopes}
    if manifest()["features"].get("slash_commands"):
        needed.add(COMMAND_SCOPE)
    assert set(manifest()["oauth_config"]["scopes"]["bot"]) == needed


def test_the_slash_command_is_the_one_the_adapter_answers_at_its_route() -> None:
    (command,) = manifest()["features"]["slash_commands"]
    assert command["command"] == APPROVALS_COMMAND
    assert command["url"] == manifest()["settings"]["event_subscriptions"]["request_url"]
    assert command["url"].endswith(EVENTS_PATH)
    assert command["should_escape"] is False
    assert 0 < len(command["description"]) <= 100


def test_events_and_interactivity_go_to_the_adapter_route() -> None:
    settings = manifest()["settings"]
    assert settings["event_subscriptions"]["request_url"].endswith(EVENTS_PATH)
    assert settings["interactivity"]["is_enabled"] is True
    assert settings["interactivity"]["request_url"].endswith(EVENTS_PATH)
    assert isinstance(settings["socket_mode_enabled"], bool)
    assert manifest()["features"]["app_home"]["messages_tab_enabled"] is True


def test_agent_messaging_is_on_with_its_events_and_the_assistant_view_is_gone() -> None:
    features = manifest()["features"]
    assert 0 < len(features["agent_view"]["agent_description"]) <= 300
    assert "assistant_view" not in features, "new apps can only use agent messaging"
    events = set(manifest()["settings"]["event_subscriptions"]["bot_events"])
    assert {"app_home_opened", "app_context_changed", "message.im"} <= events
    assert "assistant:write" in manifest()["oauth_config"]["scopes"]["bot"]
    # Handled for apps still on the assistant view; agent messaging sends none of them.
    assert not events & set(ASSISTANT_VIEW_EVENTS)
    assert not set(LISTENED_EVENTS) & set(ASSISTANT_VIEW_EVENTS)


def test_the_home_tab_is_on_and_its_event_subscribed() -> None:
    app_home = manifest()["features"]["app_home"]
    assert app_home["home_tab_enabled"] is True
    assert app_home["messages_tab_read_only_enabled"] is False, "people write to the bot there"
    assert "app_home_opened" in manifest()["settings"]["event_subscriptions"]["bot_events"]


async def test_a_whole_conversation_calls_only_methods_the_manifest_allows(
    bot: BotServer, slack: FakeSlack
) -> None:
    card = await ask_for_deploy(bot, slack)
    late = block_actions(card, APPROVE_ACTION, user=BOB)  # a stale copy of the card
    await bot.press(card, DECLINE_ACTION, user=BOB)
    await slack.wait_for(lambda: bool(slack.of("views.open")))
    await bot.interact(
        view_submission(slack.of("views.open")[0].args["view"], user=BOB, reason=None)
    )
    await bot.idle()
    await bot.interact(late)  # too late: an ephemeral answer
    await bot.send_event(mention_event("hello"))
    await bot.idle()
    called = {c.method for c in slack.calls}
    assert {"chat.update", "chat.postEphemeral", "assistant.threads.setStatus"} <= called
    assert called <= set(METHOD_SCOPES), called - set(METHOD_SCOPES)
    assert called <= methods_in_source() | {"auth.test"}


async def test_an_agent_messaging_conversation_calls_only_methods_the_manifest_allows(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    bot = await serve(build_agent(store, ran), prompts=(SuggestedPrompt(title="Hi", message="hi"),))
    assert await bot.send_event(home_opened_event(ALICE, tab="messages")) == 200
    viewing = {
        "type": "app_context_changed",
        "user": ALICE,
        "channel": DM_CHANNEL,
        "context": {"entities": [{"type": "slack#/types/channel_id", "value": "C0CHAN001"}]},
        "event_ts": new_ts(),
    }
    assert await bot.send_event(viewing) == 200
    request = message_event("hello", channel=DM_CHANNEL, channel_type="im")
    assert await bot.send_event(request) == 200
    await bot.idle()

    called = {c.method for c in slack.calls}
    assert {"assistant.threads.setSuggestedPrompts", "assistant.threads.setTitle"} <= called
    assert "assistant.threads.setStatus" in called
    assert called <= methods_in_source() | {"auth.test"}
    granted = set(manifest()["oauth_config"]["scopes"]["bot"])
    assert {scope for m in called for scope in METHOD_SCOPES[m]} <= granted


async def test_routing_groups_and_the_inbox_call_only_methods_the_manifest_allows(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    slack.add_channel("C0APPROVERS")
    slack.add_group("S0GROUP", "oncall", [BOB])
    policy = ApprovalPolicy.from_toml(
        '[tools.deploy]\napprovers = ["@oncall"]\nnotify = "dm"\n'
        '[tools.release]\nchannel = "C0APPROVERS"\n'
    )
    bot = await serve(build_agent(store, ran), policy=policy)
    await bot.bot.check_places()
    assert await bot.send_event(mention_event("deploy api")) == 200
    await bot.idle()
    assert await bot.command(user=BOB) == (200, "")
    await bot.idle()
    await slack.wait_for(lambda: bool(slack.answers_to(BOB)), what="the inbox")

    called = {c.method for c in slack.calls}
    assert {"conversations.info", "conversations.open", "usergroups.list"} <= called
    assert {"usergroups.users.list", "chat.getPermalink"} <= called
    assert called <= set(METHOD_SCOPES), called - set(METHOD_SCOPES)
    assert called <= methods_in_source() | {"auth.test"}
    granted = set(manifest()["oauth_config"]["scopes"]["bot"])
    assert {scope for m in called for scope in METHOD_SCOPES[m]} <= granted


DISTRIBUTED = ROOT / "manifest" / "slack-distributed.yaml"


def distributed() -> dict[str, Any]:
    data = yaml.safe_load(DISTRIBUTED.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_an_installation_asks_for_the_manifests_scopes() -> None:
    assert set(manifest()["oauth_config"]["scopes"]["bot"]) == set(BOT_SCOPES)
    assert set(distributed()["oauth_config"]["scopes"]["bot"]) == set(BOT_SCOPES)


def test_the_distributed_manifest_is_the_same_app_installed_through_oauth() -> None:
    single, many = manifest(), distributed()
    assert many["features"] == single["features"]
    assert many["oauth_config"]["redirect_urls"] == ["https://YOUR-HOST" + REDIRECT_PATH]
    settings = many["settings"]
    events = set(settings["event_subscriptions"]["bot_events"])
    assert events == set(single["settings"]["event_subscriptions"]["bot_events"]) | set(
        REVOCATION_EVENTS
    )
    assert settings["interactivity"] == single["settings"]["interactivity"]
    assert settings["org_deploy_enabled"] is True
    assert settings["token_rotation_enabled"] is True
    assert settings["socket_mode_enabled"] is False
