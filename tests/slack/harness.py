"""The bot as Slack sees it: a real aiohttp server with the Slack adapter, signed requests.

``BotServer`` starts the adapter's routes over a ``ChatBot`` on a random port and
speaks to it the way Slack does: events as JSON, interactivity as a form with a
``payload`` field, each signed ``v0:{timestamp}:{body}`` with HMAC-SHA256.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp.test_utils import TestServer
from slack_sdk.signature import SignatureVerifier

from adapters.slack import SlackAdapter, SlackSettings
from adapters.slack.blocks import SlackMessage, render
from adapters.web import page_routes
from agents import Agent, Store, open_store
from bot import ApprovalPolicy, ChatBot, Settings, SuggestedPrompt, View, build_app
from bot.clients import Clients

from .fake_slack import (
    APP_TOKEN,
    BOT_USER_ID,
    TEAM_ID,
    TOKEN,
    Ephemeral,
    FakeSlack,
    HomeTab,
    Posted,
)

SIGNING_SECRET = "test-signing-secret"
CHANNEL = "C0CHAN001"
DM_CHANNEL = "D0DM00001"
GROUP_DM = "G0MPIM0001"
"""A group DM (``mpim``) of Alice, Bob and the bot."""
ALICE = "U0ALICE01"
BOB = "U0BOB0001"

_event_ids = itertools.count(1)
_message_ts = itertools.count(1)


def drawn(view: View, *, link: str | None = None) -> SlackMessage:
    """The one message that shows ``view`` (a card, a question, a pointer)."""
    (message,) = render(view, link=link)
    return message


def signed_headers(
    body: str, *, secret: str = SIGNING_SECRET, timestamp: int | None = None
) -> dict[str, str]:
    """The two headers Slack adds to every request."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    assert signature is not None
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": signature}


def new_ts() -> str:
    """A fresh message timestamp for a person's message."""
    return f"{1_600_000_000 + next(_message_ts)}.000300"


def event_body(event: dict[str, Any], *, event_id: str | None = None) -> dict[str, Any]:
    """An Events API envelope around ``event``."""
    return {
        "token": "legacy",
        "team_id": TEAM_ID,
        "api_app_id": "A0APP0001",
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_event_ids):08d}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
        "event": event,
    }


def mention_event(
    text: str,
    *,
    user: str = ALICE,
    ts: str | None = None,
    thread_ts: str | None = None,
    channel: str = CHANNEL,
) -> dict[str, Any]:
    """``app_mention``: "<@bot> text" in the test channel (or ``channel``)."""
    event = {
        "type": "app_mention",
        "user": user,
        "text": f"<@{BOT_USER_ID}> {text}",
        "ts": ts or new_ts(),
        "channel": channel,
        "event_ts": ts,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def message_event(
    text: str,
    *,
    user: str = ALICE,
    channel: str = CHANNEL,
    channel_type: str = "channel",
    ts: str | None = None,
    thread_ts: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A ``message`` event (``message.channels`` / ``message.im`` / ``message.mpim``)."""
    event = {
        "type": "message",
        "user": user,
        "text": text,
        "ts": ts or new_ts(),
        "channel": channel,
        "channel_type": channel_type,
        **extra,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def find_button(
    blocks: list[dict[str, Any]], action_id: str, *, index: int = 0, where: str = ""
) -> dict[str, Any]:
    """The ``index``-th element with ``action_id`` among top-level ``blocks``."""
    found = [
        element
        for block in blocks
        for element in block.get("elements", [])
        if element.get("action_id") == action_id
    ]
    if len(found) <= index:
        raise AssertionError(f"no {action_id} button #{index} in {where}")
    return dict(found[index])


def pressed(user: str, action_id: str, value: str, **where: Any) -> dict[str, Any]:
    """The ``block_actions`` Slack sends when ``user`` presses a button; ``where`` says
    where the button was (its ``container`` and what comes with it)."""
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "team_id": TEAM_ID},
        "api_app_id": "A0APP0001",
        "token": "legacy",
        "team": {"id": TEAM_ID, "domain": "fake"},
        "trigger_id": f"trigger-{time.monotonic_ns()}",
        **where,
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "b1",
                "value": value,
                "action_ts": str(time.time()),
            }
        ],
    }


def button(posted: Posted, action_id: str) -> dict[str, Any]:
    """The button with ``action_id`` on a posted card."""
    return find_button(posted.blocks, action_id, where=repr(posted.text))


def block_actions(
    posted: Posted, action_id: str, *, user: str = ALICE, value: str | None = None
) -> dict[str, Any]:
    """What Slack sends when ``user`` presses a button on a card in a thread."""
    element = button(posted, action_id)
    return pressed(
        user,
        action_id,
        element["value"] if value is None else value,
        container={
            "type": "message",
            "message_ts": posted.ts,
            "channel_id": posted.channel,
            "is_ephemeral": False,
            "thread_ts": posted.thread_ts,
        },
        channel={"id": posted.channel, "name": "ops"},
        message={"ts": posted.ts, "thread_ts": posted.thread_ts, "text": posted.text},
        response_url="https://hooks.slack.invalid/actions/1",
    )


def inbox_button(answer: Ephemeral, action_id: str, *, index: int = 0) -> dict[str, Any]:
    """The ``index``-th button with ``action_id`` in an ephemeral answer (an inbox)."""
    return find_button(answer.blocks, action_id, index=index, where=repr(answer.text))


def ephemeral_actions(
    slack: FakeSlack, answer: Ephemeral, action_id: str, *, index: int = 0
) -> dict[str, Any]:
    """What Slack sends when the one who sees ``answer`` presses one of its buttons:
    no ``message`` (Slack keeps none), a container saying so, a new ``response_url``."""
    element = inbox_button(answer, action_id, index=index)
    return pressed(
        answer.user,
        action_id,
        element["value"],
        container={
            "type": "message",
            "message_ts": answer.ts,
            "channel_id": answer.channel,
            "is_ephemeral": True,
        },
        channel={"id": answer.channel, "name": "ops"},
        response_url=slack.response_url(channel=answer.channel, user=answer.user, ts=answer.ts),
    )


def home_opened_event(user: str, *, tab: str = "home") -> dict[str, Any]:
    """``app_home_opened``: ``user`` opened the bot's Home tab (or its Messages tab)."""
    return {
        "type": "app_home_opened",
        "user": user,
        "channel": "D" + user.removeprefix("U")[:10],
        "tab": tab,
        "event_ts": f"{time.time():.6f}",
    }


def assistant_started_event(
    thread_ts: str, *, user: str = ALICE, channel: str = DM_CHANNEL
) -> dict[str, Any]:
    """``assistant_thread_started``: ``user`` opened the assistant view, a new thread
    ``thread_ts`` in their direct message with the bot, looking at the test channel."""
    return {
        "type": "assistant_thread_started",
        "assistant_thread": {
            "user_id": user,
            "context": {"channel_id": CHANNEL, "team_id": TEAM_ID, "enterprise_id": None},
            "channel_id": channel,
            "thread_ts": thread_ts,
        },
        "event_ts": f"{time.time():.6f}",
    }


def home_button(home: HomeTab, action_id: str, *, index: int = 0) -> dict[str, Any]:
    """The ``index``-th button with ``action_id`` in a Home tab."""
    return find_button(home.blocks, action_id, index=index, where=f"the Home tab of {home.user}")


def home_actions(
    home: HomeTab, action_id: str, *, index: int = 0, user: str | None = None
) -> dict[str, Any]:
    """What Slack sends when ``user`` (the tab's owner) presses a button in a Home tab:
    the view as the container, no channel, no message, no ``response_url``."""
    element = home_button(home, action_id, index=index)
    return pressed(
        user or home.user,
        action_id,
        element["value"],
        container={"type": "view", "view_id": home.id},
        view={
            "id": home.id,
            "team_id": TEAM_ID,
            "type": "home",
            "blocks": home.blocks,
            "private_metadata": "",
            "callback_id": "",
            "state": {"values": {}},
            "hash": "1700000000.abcdef",
        },
    )


def command_body(
    slack: FakeSlack, text: str = "", *, user: str = ALICE, channel: str = CHANNEL
) -> dict[str, str]:
    """What Slack POSTs for ``/approvals <text>`` (form-encoded), with a fresh response URL."""
    return {
        "token": "legacy",
        "team_id": TEAM_ID,
        "team_domain": "fake",
        "channel_id": channel,
        "channel_name": "ops",
        "user_id": user,
        "user_name": user.lower(),
        "command": "/approvals",
        "text": text,
        "api_app_id": "A0APP0001",
        "is_enterprise_install": "false",
        "response_url": slack.response_url(channel=channel, user=user),
        "trigger_id": f"trigger-{time.monotonic_ns()}",
    }


def view_submission(view: dict[str, Any], *, user: str, reason: str | None) -> dict[str, Any]:
    """What Slack sends when the decline modal is submitted."""
    return {
        "type": "view_submission",
        "team": {"id": TEAM_ID, "domain": "fake"},
        "user": {"id": user, "username": user.lower(), "team_id": TEAM_ID},
        "api_app_id": "A0APP0001",
        "token": "legacy",
        "trigger_id": f"trigger-{time.monotonic_ns()}",
        "view": {
            **view,
            "id": "V0VIEW001",
            "state": {
                "values": {"reason": {"reason": {"type": "plain_text_input", "value": reason}}}
            },
        },
    }


@dataclass
class BotServer:
    """A running bot: adapter, core, HTTP server, and a client that signs like Slack."""

    slack: FakeSlack
    bot: ChatBot
    adapter: SlackAdapter
    server: TestServer
    session: aiohttp.ClientSession
    statuses: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return str(self.server.make_url("/slack/events"))

    async def post(
        self,
        body: str,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        """POST a raw body, signed unless ``headers`` are given."""
        all_headers = {"Content-Type": content_type, **(headers or signed_headers(body))}
        async with self.session.post(self.url, data=body.encode(), headers=all_headers) as resp:
            self.statuses.append(resp.status)
            return resp.status, await resp.text()

    async def send_event(
        self, event: dict[str, Any], *, event_id: str | None = None, retry: int | None = None
    ) -> int:
        """Deliver an event as the Events API does; return the HTTP status."""
        body = json.dumps(event_body(event, event_id=event_id))
        headers = signed_headers(body)
        if retry is not None:
            headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
        status, _ = await self.post(body, headers=headers)
        return status

    async def interact(self, payload: dict[str, Any]) -> tuple[int, str]:
        """Send an interactivity payload (form-encoded ``payload=<json>``)."""
        body = urlencode({"payload": json.dumps(payload)})
        return await self.post(body, content_type="application/x-www-form-urlencoded")

    async def command(
        self, text: str = "", *, user: str = ALICE, channel: str = CHANNEL
    ) -> tuple[int, str]:
        """Type ``/approvals <text>``; the HTTP status and body of the answer."""
        body = urlencode(command_body(self.slack, text, user=user, channel=channel))
        return await self.post(body, content_type="application/x-www-form-urlencoded")

    async def open_home(self, user: str) -> HomeTab:
        """``user`` opens the bot's Home tab; the tab as published for them then."""
        before = self.slack.publishes(user)
        assert await self.send_event(home_opened_event(user)) == 200
        await self.idle()
        await self.slack.wait_for(
            lambda: self.slack.publishes(user) > before, what=f"the Home tab of {user}"
        )
        return self.slack.home_of(user)

    async def press(self, posted: Posted, action_id: str, *, user: str = ALICE) -> int:
        """Press a button on a card; return the HTTP status."""
        status, _ = await self.interact(block_actions(posted, action_id, user=user))
        return status

    async def idle(self) -> None:
        """Wait until the adapter and the core have nothing left to do."""
        await self.adapter.drain()

    async def close(self) -> None:
        """Stop like the real server: finish the work, stop the adapter, close the port."""
        await self.session.close()
        await self.server.close()


async def start_bot(
    slack: FakeSlack,
    agent: Agent,
    *,
    policy: ApprovalPolicy | None = None,
    socket_mode: bool = False,
    prompts: tuple[SuggestedPrompt, ...] = (),
    clients: Clients | None = None,
) -> BotServer:
    """Serve the Slack adapter over a ``ChatBot`` on a random local port (``prompts``:
    the requests it suggests; ``clients``: who may ask through its API)."""
    settings = SlackSettings(
        slack_bot_token=TOKEN,
        slack_signing_secret=SIGNING_SECRET,
        slack_app_token=APP_TOKEN if socket_mode else None,
        slack_api_url=slack.url,
    )
    bot = ChatBot(agent, policy=policy, suggested_prompts=prompts, clients=clients)
    adapter = SlackAdapter(bot, settings)
    app = build_app(Settings(), bot, [adapter], pages=page_routes(bot.pages))
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    bot.links.public_url = str(server.make_url("")).rstrip("/")
    if clients:
        await bot.check_clients()
    return BotServer(slack, bot, adapter, server, aiohttp.ClientSession())


@asynccontextmanager
async def replicas_on(
    slack: FakeSlack,
    url: str,
    agent: Callable[[Store], Agent],
    *,
    count: int = 2,
    policy: ApprovalPolicy | None = None,
    clients: Clients | None = None,
) -> AsyncIterator[list[BotServer]]:
    """``count`` bots, each with its own handle on the one durable store at ``url``
    (replicas), each agent built on its own handle; closed at the end."""
    stores = [open_store(url) for _ in range(count)]
    bots = [
        await start_bot(slack, agent(store), policy=policy, clients=clients) for store in stores
    ]
    try:
        yield bots
    finally:
        for server in reversed(bots):
            await server.close()
        for store in stores:
            await store.close()
