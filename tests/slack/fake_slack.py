"""A local fake of the Slack Web API, for the real ``AsyncWebClient`` to talk to.

It records every call, keeps the channel messages (so tests see what people
would see after ``chat.update``, which keeps what it is not given, as Slack does),
checks the Block Kit limits Slack enforces (in the blocks of attachments too),
and answers like Slack: ``{"ok": true, ...}`` or ``{"ok": false, "error": ...}``.
Errors (and 429s) can be scripted per method. It knows the channels, direct
messages and user groups a test gives it, and serves ``response_url``s: the
answers to a slash command or to a click in a message only one person sees,
kept as those people would see them.

Messages keep their ``metadata`` (one Slack would ignore, of a bad ``event_type``, is a
problem), and ``conversations.replies`` / ``conversations.history`` read them back (with
``include_all_metadata``), a page at a time: the bot's messages only, as it posted them.
``after_call`` lets a test act once a call was carried out, before it is answered.

Streamed messages (``chat.startStream`` / ``appendStream`` / ``stopStream``) are
messages of the thread like any other: their ``text`` is the Markdown streamed so
far, and their ``chunks`` every chunk in order (``tasks``: each task as it is now).
Streaming can be refused everywhere or in one channel (``refuse_streaming``).

The agent and assistant calls (``assistant.threads.setSuggestedPrompts`` / ``setTitle`` /
``setStatus``) are checked against Slack's limits, and each thread's prompts and
title kept as its person would see them (``prompts``, ``titles``); prompts may name no
thread (agent messaging: the top of the direct message).

Home tabs (``views.publish``) are kept per person as they would see them, each
checked against the limits of a Home view (100 blocks, 250 kB).

Many workspaces (OAuth): ``oauth.v2.access`` exchanges a code a test gave it
(``installs``) for that workspace's bot token, once, given the app's client id and
secret; the fake then accepts that token too, and ``auth.test`` answers the workspace
of the token it is called with. Each call records the token it came with.

Enterprise Grid: a code in ``org_installs`` is exchanged for an org-wide install of an
enterprise (no team), whose token speaks for every workspace of the organization.
Token rotation (``token_lifetime``): each exchange also gives a refresh token, and the
token stops working when it expires (``token_expired``); ``oauth.v2.access`` with
``grant_type=refresh_token`` gives a new token and a new refresh token for one not used
yet, and revokes the one it used (``invalid_refresh_token`` for it after), as Slack does.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"
TEAM_ID = "T0TEAM001"
BOT_USER_ID = "U0BOT0001"
BOT_ID = "B0BOT0001"
CLIENT_ID = "1111.2222"
CLIENT_SECRET = "test-client-secret"
APP_ID = "A0APP0001"

SECTION_TEXT_LIMIT = 3000
BUTTON_VALUE_LIMIT = 2000
ID_LIMIT = 255
BLOCKS_LIMIT = 50
ACTIONS_ELEMENTS_LIMIT = 25
BUTTON_TEXT_LIMIT = 75
CONFIRM_TEXT_LIMIT = 300
MODAL_TITLE_LIMIT = 24
MODAL_BLOCKS_LIMIT = 100
HOME_BLOCKS_LIMIT = 100
VIEW_SIZE_LIMIT = 250_000
"""A view's JSON (Slack answers ``view_too_large`` above it)."""
HEADER_TEXT_LIMIT = 150
CONTEXT_ELEMENTS_LIMIT = 10
LABEL_LIMIT = 2000
PLACEHOLDER_LIMIT = 150
OPTIONS_LIMIT = 100
OPTION_TEXT_LIMIT = 75
OPTION_VALUE_LIMIT = 150
TEXT_LIMIT = 3000
ATTACHMENTS_LIMIT = 100
MARKDOWN_TEXT_LIMIT = 12_000
"""``markdown_text`` in one ``chat.*Stream`` call (also each ``markdown_text`` chunk)."""
TASK_FIELD_LIMIT = 256
"""A ``task_update``'s ``details`` and ``output``."""
MESSAGE_LIMIT = 40_000
"""Where Slack truncates a message's text."""
PROMPTS_LIMIT = 4
"""Suggested prompts in one assistant thread."""
PROMPT_TITLE_LIMIT = 75
PROMPT_MESSAGE_LIMIT = 1000
THREAD_TITLE_LIMIT = 255
STATUS_LIMIT = 255
LOADING_MESSAGES_LIMIT = 10
LOADING_MESSAGE_LIMIT = 255
CHUNK_TYPES = frozenset({"markdown_text", "task_update", "plan_update", "blocks"})
TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
COLOR = re.compile(r"#[0-9A-Fa-f]{6}|good|warning|danger")
EVENT_TYPE = re.compile(r"[A-Za-z0-9_-]+")
"""What a message metadata ``event_type`` may hold (Slack ignores others, with a warning)."""
HISTORY_LIMIT = 1000
"""The most messages one ``conversations.history``/``replies`` page holds."""
NUMBER = re.compile(r"-?\d+(\.\d+)?")
WHOLE_NUMBER = re.compile(r"-?\d+")


@dataclass
class ApiCall:
    """One Web API request as the fake received it."""

    method: str
    args: dict[str, Any]
    at: float = field(default_factory=time.monotonic)
    """When it arrived (``time.monotonic``)."""
    token: str | None = None
    """The bearer token it came with (``None``: none, or the client's id and secret)."""
    client: tuple[str, str] | None = None
    """The client id and secret it came with (HTTP basic auth: ``oauth.v2.access``)."""


@dataclass
class Posted:
    """A message in a channel, as it looks now: its ``blocks``, then its ``attachments``
    (each a colour bar beside blocks of its own)."""

    channel: str
    ts: str
    thread_ts: str | None
    text: str
    blocks: list[dict[str, Any]]
    updates: int = 0
    updated_at: float | None = None
    """``time.perf_counter()`` of the last ``chat.update`` (for benchmarks)."""
    attachments: list[dict[str, Any]] = field(default_factory=list)
    chunks: list[dict[str, Any]] = field(default_factory=list)
    """A streamed message's chunks, in the order they came (its ``text`` is their Markdown)."""
    streaming: bool = False
    """Whether it is still being streamed (started, not stopped)."""
    started_with: dict[str, Any] | None = None
    """A streamed message's ``chat.startStream`` arguments (``None``: posted whole)."""
    metadata: dict[str, Any] | None = None
    """Its message metadata (``event_type``, ``event_payload``), as Slack keeps it."""
    posted_at: float = field(default_factory=time.time)
    """When it was posted (``time.time``): the fake's ``ts`` count, Slack's are this time,
    so ``oldest``/``latest`` of the history methods are held against it."""
    bot_id: str = BOT_ID
    """The bot that posted it (a test may put another app's message in a thread)."""

    @property
    def tasks(self) -> dict[str, dict[str, Any]]:
        """A streamed message's tasks as they look now, by id, in the order they appeared."""
        now: dict[str, dict[str, Any]] = {}
        for chunk in self.chunks:
            if chunk.get("type") == "task_update":
                now[chunk["id"]] = {**now.get(chunk["id"], {}), **chunk}
        return now

    def task_statuses(self, task_id: str) -> list[str]:
        """Every status a task was shown in, in order."""
        return [
            c["status"]
            for c in self.chunks
            if c.get("type") == "task_update" and c.get("id") == task_id
        ]

    @property
    def shown(self) -> list[dict[str, Any]]:
        """Every block a person sees, wherever it is: the message's, then its attachments'."""
        return shown_blocks(self.blocks, self.attachments)

    @property
    def colors(self) -> list[str]:
        """The colour of each attachment's bar."""
        return [str(a.get("color", "")) for a in self.attachments]


@dataclass
class Ephemeral:
    """A message only ``user`` sees, posted through a ``response_url``, as it looks now."""

    channel: str
    user: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    replaced: int = 0


@dataclass
class HomeTab:
    """A person's Home tab as they see it now: the last view published for them."""

    user: str
    id: str
    view: dict[str, Any]
    publishes: int = 1

    @property
    def blocks(self) -> list[dict[str, Any]]:
        """The view's blocks."""
        return list(self.view.get("blocks") or [])


@dataclass
class ResponseUrl:
    """A ``response_url`` Slack handed out: for whom, and for which message (``ts``,
    the message a click was in; ``None`` for a slash command's)."""

    channel: str
    user: str
    ts: str | None = None
    uses: int = 0
    payloads: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Group:
    """A user group: its id (``S…``), its handle (without ``@``), its members."""

    id: str
    handle: str
    users: list[str]
    enabled: bool = True


RESPONSE_URL_USES = 5
"""How often Slack lets one ``response_url`` be used."""


@dataclass
class Scripted:
    """A scripted answer for the next calls of a method."""

    error: str | None = None
    status: int = 200
    times: int = 1
    retry_after: int = 0


@dataclass
class FakeSlack:
    """The fake Web API server; ``url`` is the ``base_url`` for ``AsyncWebClient``."""

    calls: list[ApiCall] = field(default_factory=list)
    messages: dict[tuple[str, str], Posted] = field(default_factory=dict)
    scripted: dict[str, list[Scripted]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    ws_url: str | None = None
    sockets: list[web.WebSocketResponse] = field(default_factory=list)
    socket_acks: dict[str, dict[str, Any]] = field(default_factory=dict)
    channels: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Channels ``conversations.info`` knows, by id (``add_channel``)."""
    groups: dict[str, Group] = field(default_factory=dict)
    direct: dict[str, str] = field(default_factory=dict)
    """The bot's direct message channel with each user, once opened."""
    response_urls: dict[str, ResponseUrl] = field(default_factory=dict)
    ephemerals: list[Ephemeral] = field(default_factory=list)
    homes: dict[str, HomeTab] = field(default_factory=dict)
    prompts: dict[tuple[str, str], list[dict[str, str]]] = field(default_factory=dict)
    """Each assistant thread's suggested prompts, by ``(channel, thread_ts)``; those at the
    top of a direct message (agent messaging: no thread) by ``(channel, "")``."""
    titles: dict[tuple[str, str], str] = field(default_factory=dict)
    """Each assistant thread's title, by ``(channel, thread_ts)``."""
    """Each person's Home tab, by user id, once published."""
    refused_streams: dict[str | None, str] = field(default_factory=dict)
    """Channels where ``chat.startStream`` answers with an error (``None``: everywhere)."""
    installs: dict[str, tuple[str, str]] = field(default_factory=dict)
    """OAuth codes ``oauth.v2.access`` exchanges (once each), for ``(team_id, bot_token)``."""
    issued: dict[str, str] = field(default_factory=dict)
    """Bot tokens ``oauth.v2.access`` gave, with their workspace."""
    org_installs: dict[str, tuple[str, str]] = field(default_factory=dict)
    """OAuth codes ``oauth.v2.access`` exchanges (once each) for an org-wide install of
    an Enterprise Grid organization: ``(enterprise_id, bot_token)``."""
    token_lifetime: int | None = None
    """Token rotation: the seconds a token from a code lasts (``None``: rotation off)."""
    refreshed_lifetime: int = 43_200
    """The seconds a token from a refresh lasts (Slack's 12 hours)."""
    refresh_tokens: dict[str, str] = field(default_factory=dict)
    """Each refresh token not used yet, with the bot token it came with."""
    expires: dict[str, float] = field(default_factory=dict)
    """When each rotated bot token stops working (``time.time()``)."""
    rotations: list[tuple[str, str]] = field(default_factory=list)
    """Each refresh, in order: ``(old bot token, new bot token)``."""
    before_refresh: Callable[[], Awaitable[None]] | None = None
    """Awaited (once: it is cleared first) when a refresh arrives, before it is
    answered: what happens meanwhile elsewhere (another replica refreshing first)."""
    after_call: Callable[[ApiCall], Awaitable[None]] | None = None
    """Awaited with each Web API call once it is carried out (a message kept as posted),
    before it is answered: what happens meanwhile (the bot killed before it hears back)."""
    url: str = ""
    base: str = ""
    _ts: Any = field(default_factory=lambda: itertools.count(1))
    _runner: web.AppRunner | None = None

    async def start(self) -> str:
        """Listen on 127.0.0.1 at a free port; return the API base URL."""
        app = web.Application()
        app.router.add_post("/api/{method}", self._handle)
        app.router.add_get("/api/{method}", self._handle)
        app.router.add_post("/response/{id}", self._respond)
        app.router.add_get("/socket", self._socket)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base = f"http://127.0.0.1:{port}"
        self.url = f"{self.base}/api/"
        self.ws_url = f"ws://127.0.0.1:{port}/socket"
        return self.url

    async def stop(self) -> None:
        """Stop listening."""
        for socket in self.sockets:
            await socket.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- what tests look at --------------------------------------------------------

    def of(self, method: str) -> list[ApiCall]:
        """The calls of one method, in order."""
        return [c for c in self.calls if c.method == method]

    def in_thread(self, channel: str, root: str) -> list[Posted]:
        """Messages the bot posted in a thread, oldest first."""
        return [m for m in self.messages.values() if m.channel == channel and m.thread_ts == root]

    def top_level(self, channel: str) -> list[Posted]:
        """Messages the bot posted in a channel outside any thread, oldest first."""
        return [m for m in self.messages.values() if m.channel == channel and m.thread_ts is None]

    def add_channel(
        self, channel: str, *, name: str = "approvers", member: bool = True, archived: bool = False
    ) -> None:
        """A channel ``conversations.info`` knows (the bot in it unless ``member=False``)."""
        self.channels[channel] = {
            "id": channel,
            "name": name,
            "is_channel": True,
            "is_member": member,
            "is_archived": archived,
        }

    def add_group(self, group: str, handle: str, users: list[str], *, enabled: bool = True) -> None:
        """A user group the ``usergroups`` methods know."""
        self.groups[group] = Group(group, handle, list(users), enabled)

    def dm_of(self, user: str) -> str:
        """The id of the bot's direct message channel with ``user`` (whether opened or not)."""
        return "D" + user.removeprefix("U")[:10]

    def response_url(self, *, channel: str, user: str, ts: str | None = None) -> str:
        """A fresh ``response_url`` for ``user`` in ``channel`` (for the message ``ts``)."""
        key = f"R{next(self._ts):06d}"
        self.response_urls[key] = ResponseUrl(channel=channel, user=user, ts=ts)
        return f"{self.base}/response/{key}"

    def home_of(self, user: str) -> HomeTab:
        """``user``'s Home tab (failing the test if none was published)."""
        home = self.homes.get(user)
        if home is None:
            raise AssertionError(f"no Home tab was published for {user}; calls: {self.summary()}")
        return home

    def publishes(self, user: str) -> int:
        """How often a Home tab was published for ``user``."""
        home = self.homes.get(user)
        return home.publishes if home is not None else 0

    def answers_to(self, user: str) -> list[Ephemeral]:
        """What ``user`` was shown through response URLs, oldest first."""
        return [e for e in self.ephemerals if e.user == user]

    def refuse_streaming(self, error: str = "not_allowed", *, channel: str | None = None) -> None:
        """Refuse ``chat.startStream`` with ``error`` in ``channel`` (or everywhere)."""
        self.refused_streams[channel] = error

    def posts_in(self, channel: str, root: str) -> list[Posted]:
        """The messages posted whole in a thread (cards, questions, notices), oldest first."""
        return [m for m in self.in_thread(channel, root) if m.started_with is None]

    def streamed(self, channel: str, root: str) -> list[Posted]:
        """The streamed messages in a thread, oldest first."""
        return [m for m in self.in_thread(channel, root) if m.started_with is not None]

    def script(self, method: str, answer: Scripted) -> None:
        """Answer the next ``answer.times`` calls of ``method`` with an error or status."""
        self.scripted.setdefault(method, []).append(answer)

    async def wait_for(
        self, condition: Callable[[], bool], *, within: float = 5.0, what: str = "condition"
    ) -> None:
        """Poll until ``condition()`` holds; fail the test after ``within`` seconds."""
        deadline = time.monotonic() + within
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; calls: {self.summary()}")
            await asyncio.sleep(0.005)

    def summary(self) -> list[str]:
        """The methods called so far (for failure messages)."""
        return [c.method for c in self.calls]

    # -- Socket Mode -------------------------------------------------------------------

    async def send_envelope(self, kind: str, payload: dict[str, Any], *, retry: int = 0) -> str:
        """Push a Socket Mode envelope (``events_api``, ``interactive``) to the app."""
        envelope_id = f"env-{next(self._ts)}"
        await self.sockets[-1].send_json(
            {
                "envelope_id": envelope_id,
                "type": kind,
                "payload": payload,
                "accepts_response_payload": kind != "events_api",
                "retry_attempt": retry,
                "retry_reason": "timeout" if retry else "",
            }
        )
        return envelope_id

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        self.sockets.append(socket)
        await socket.send_json({"type": "hello", "num_connections": 1})
        async for message in socket:
            if message.type == web.WSMsgType.TEXT:
                ack = json.loads(message.data)
                self.socket_acks[ack.get("envelope_id", "")] = ack
        return socket

    # -- the API ---------------------------------------------------------------------

    async def _respond(self, request: web.Request) -> web.Response:
        """A ``response_url``: an ephemeral answer, or one replacing the message clicked in."""
        target = self.response_urls.get(request.match_info["id"])
        if target is None:
            return web.Response(status=404, text="no_such_response_url")
        payload = await request.json()
        target.uses += 1
        target.payloads.append(payload)
        if target.uses > RESPONSE_URL_USES:
            self.problems.append("a response_url used more than 5 times")
            return web.Response(status=404, text="used_up")
        problem = self._check_message({"channel": target.channel, **payload})
        if problem or payload.get("response_type", "ephemeral") != "ephemeral":
            self.problems.append(f"response refused: {problem or 'not ephemeral'}")
            return web.Response(status=400, text=problem or "not_ephemeral")
        text, blocks = payload.get("text", ""), payload.get("blocks") or []
        replaced = next((e for e in self.ephemerals if e.ts == target.ts), None)
        if payload.get("replace_original") and replaced is not None:
            replaced.text, replaced.blocks = text, blocks
            replaced.replaced += 1
            return web.Response(text="ok")
        if payload.get("replace_original"):
            self.problems.append("replace_original with no message to replace")
        ts = f"{1_700_000_000 + next(self._ts)}.000300"
        self.ephemerals.append(Ephemeral(target.channel, target.user, ts, text, blocks))
        return web.Response(text="ok")

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        # Arguments come as the query (GET, and some POSTs: conversations.open), or the body.
        args = {**request.query, **(await _args(request) if request.method == "POST" else {})}
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        client = _basic(auth)
        self.calls.append(ApiCall(method, args, token=token, client=client))
        if method == "oauth.v2.access":
            meanwhile = self.before_refresh
            if meanwhile is not None and args.get("grant_type") == "refresh_token":
                self.before_refresh = None
                await meanwhile()
            return self._scripted(method) or self._oauth_v2_access(args, client)
        if method == "apps.connections.open":
            known = token == APP_TOKEN
        else:
            known = token == TOKEN or token in self.issued
        if not known:
            return _fail("invalid_auth")
        if token in self.expires and time.time() >= self.expires[token]:
            return _fail("token_expired")
        scripted = self._scripted(method)
        if scripted is not None:
            return scripted
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return _fail("unknown_method")
        if method == "auth.test":
            return self._auth_test(args, token=token)
        result: web.Response = handler(args)
        if self.after_call is not None:
            await self.after_call(self.calls[-1])
        return result

    def _scripted(self, method: str) -> web.Response | None:
        """The scripted answer to this call of ``method``, if any."""
        pending = self.scripted.get(method)
        if not pending:
            return None
        answer = pending[0]
        answer.times -= 1
        if answer.times <= 0:
            pending.pop(0)
        if answer.status == 429:
            headers = {"Retry-After": str(answer.retry_after)}
            return web.json_response(
                {"ok": False, "error": "ratelimited"}, status=429, headers=headers
            )
        if answer.status >= 500:
            return web.Response(status=answer.status, text="upstream trouble")
        if answer.error:
            return _fail(answer.error)
        return None

    def _auth_test(self, args: dict[str, Any], *, token: str | None = None) -> web.Response:
        workspace = self.issued.get(token or "", TEAM_ID)
        # An org-wide token's workspace is its enterprise.
        org = {"enterprise_id": workspace, "is_enterprise_install": True}
        return _ok(
            url="https://fake.slack.com/",
            team="Fake Team",
            user="approval-bot",
            team_id=workspace,
            user_id=BOT_USER_ID,
            bot_id=BOT_ID,
            **(org if workspace.startswith("E") else {}),
        )

    def _oauth_v2_access(
        self, args: dict[str, Any], client: tuple[str, str] | None
    ) -> web.Response:
        """A code for its workspace's bot token, given the app's id and secret."""
        if client is None or client[0] != CLIENT_ID:
            return _fail("invalid_client_id")
        if client[1] != CLIENT_SECRET:
            return _fail("bad_client_secret")
        if args.get("grant_type") == "refresh_token":
            return self._refresh(str(args.get("refresh_token", "")))
        code = str(args.get("code", ""))
        org = self.org_installs.pop(code, None)
        found = self.installs.pop(code, None) if org is None else org
        if found is None:
            return _fail("invalid_code")
        workspace, token = found
        self.issued[token] = workspace
        return _ok(
            access_token=token,
            token_type="bot",
            scope="chat:write,commands",
            bot_user_id=BOT_USER_ID,
            app_id=APP_ID,
            **_installed_in(workspace, org=org is not None),
            authed_user={"id": "U0INSTALL1"},
            **self._expiring(token, self.token_lifetime),
        )

    def _refresh(self, refresh_token: str) -> web.Response:
        """A new bot token for a refresh token not used yet, which it revokes."""
        old = self.refresh_tokens.pop(refresh_token, None)
        if old is None:
            return _fail("invalid_refresh_token")
        token = f"{old.partition('~')[0]}~{len(self.rotations) + 1}"
        self.issued[token] = self.issued[old]
        self.rotations.append((old, token))
        return _ok(
            access_token=token,
            token_type="bot",
            scope="chat:write,commands",
            bot_user_id=BOT_USER_ID,
            app_id=APP_ID,
            **_installed_in(self.issued[token], org=self.issued[token].startswith("E")),
            **self._expiring(token, self.refreshed_lifetime),
        )

    def _expiring(self, token: str, lifetime: int | None) -> dict[str, Any]:
        """With rotation on: a refresh token for ``token``, which lasts ``lifetime``."""
        if lifetime is None:
            return {}
        refresh_token = f"xoxe-1-{token}"
        self.refresh_tokens[refresh_token] = token
        self.expires[token] = time.time() + lifetime
        return {"refresh_token": refresh_token, "expires_in": lifetime}

    def _chat_postMessage(self, args: dict[str, Any]) -> web.Response:
        problem = self._check_message(args)
        if problem:
            return _fail(problem)
        ts = f"{1_700_000_000 + next(self._ts)}.000100"
        channel = args["channel"]
        blocks = args.get("blocks") or []
        message = Posted(channel, ts, args.get("thread_ts"), args.get("text", ""), blocks)
        message.attachments = args.get("attachments") or []
        message.metadata = self._metadata_of(args)
        self.messages[(channel, ts)] = message
        return _ok(channel=channel, ts=ts, message={"text": message.text, "ts": ts})

    def _chat_update(self, args: dict[str, Any]) -> web.Response:
        problem = self._check_message(args)
        if problem:
            return _fail(problem)
        message = self.messages.get((args.get("channel", ""), args.get("ts", "")))
        if message is None:
            return _fail("message_not_found")
        # As Slack does: what an update does not mention stays, except that new text
        # without blocks replaces the blocks.
        message.text = args.get("text", "")
        if "blocks" in args or "text" in args:
            message.blocks = args.get("blocks") or []
        if "attachments" in args:
            message.attachments = args["attachments"] or []
        if "metadata" in args:
            message.metadata = self._metadata_of(args)
        message.updates += 1
        message.updated_at = time.perf_counter()
        return _ok(channel=message.channel, ts=message.ts, text=message.text)

    def _chat_startStream(self, args: dict[str, Any]) -> web.Response:
        channel, thread_ts = args.get("channel", ""), args.get("thread_ts")
        if not channel:
            return _fail("channel_not_found")
        refused = self.refused_streams.get(channel) or self.refused_streams.get(None)
        if refused:
            return _fail(refused)
        if not thread_ts:
            return self._problem("a stream that replies to nothing (no thread_ts)")
        if not channel.startswith("D"):
            # Outside a DM a stream is addressed to someone: both ids are required.
            if not args.get("recipient_user_id"):
                return _fail("missing_recipient_user_id")
            if not args.get("recipient_team_id"):
                return _fail("missing_recipient_team_id")
        if args.get("task_display_mode", "timeline") not in ("timeline", "plan"):
            return self._problem("task_display_mode not timeline or plan")
        chunks, problem = self._chunks_of(args)
        if problem:
            return _fail(problem)
        ts = f"{1_700_000_000 + next(self._ts)}.000400"
        message = Posted(channel, ts, thread_ts, "", [], streaming=True, started_with=args)
        self.messages[(channel, ts)] = message
        self._stream_into(message, chunks)
        return _ok(channel=channel, ts=ts)

    def _chat_appendStream(self, args: dict[str, Any]) -> web.Response:
        message, problem = self._stream_of(args)
        if message is None:
            return _fail(problem or "message_not_found")
        if not args.get("markdown_text") and not args.get("chunks"):
            return _fail("no_text")
        chunks, problem = self._chunks_of(args)
        if problem:
            return _fail(problem)
        self._stream_into(message, chunks)
        return _ok(channel=message.channel, ts=message.ts)

    def _chat_stopStream(self, args: dict[str, Any]) -> web.Response:
        message, problem = self._stream_of(args)
        if message is None:
            return _fail(problem or "message_not_found")
        chunks, problem = self._chunks_of(args)
        if problem:
            return _fail(problem)
        blocks = args.get("blocks")
        if blocks is not None:
            if isinstance(blocks, str):
                blocks = json.loads(blocks)
            problem = next((p for b in blocks if (p := _block_problem(b))), None)
            if problem:
                self.problems.append(f"chat.stopStream: {problem}")
                return _fail("invalid_blocks")
            message.blocks = list(blocks)
        if "metadata" in args:
            message.metadata = self._metadata_of(args)
        self._stream_into(message, chunks)
        message.streaming = False
        message.updated_at = time.perf_counter()
        return _ok(
            channel=message.channel,
            ts=message.ts,
            message={"text": message.text, "ts": message.ts, "bot_id": BOT_ID},
        )

    def _stream_of(self, args: dict[str, Any]) -> tuple[Posted | None, str | None]:
        """The streamed message a call names, or why there is none to stream into."""
        message = self.messages.get((args.get("channel", ""), args.get("ts", "")))
        if message is None or message.started_with is None:
            return None, "message_not_found"
        if not message.streaming:
            return None, "message_not_in_streaming_state"
        return message, None

    def _chunks_of(self, args: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
        """A call's ``markdown_text`` and ``chunks`` as one list of chunks, checked as Slack
        checks them (with the error it would answer, if any)."""
        chunks = args.get("chunks") or []
        if not isinstance(chunks, list) or not all(isinstance(c, dict) for c in chunks):
            return [], self._problem_error("chunks not a list of objects", error="invalid_chunks")
        text = args.get("markdown_text")
        if text is not None:
            chunks = [{"type": "markdown_text", "text": text}, *chunks]
        for chunk in chunks:
            problem = _chunk_problem(chunk)
            if problem:
                return [], self._problem_error(problem, error="invalid_chunks")
        markdown = sum(len(c["text"]) for c in chunks if c["type"] == "markdown_text")
        if markdown > MARKDOWN_TEXT_LIMIT:
            return [], self._problem_error(
                "over 12,000 characters of markdown in one call", error="msg_too_long"
            )
        return chunks, None

    def _stream_into(self, message: Posted, chunks: list[dict[str, Any]]) -> None:
        """Add checked chunks to a streamed message: its text grows by their Markdown."""
        for chunk in chunks:
            message.chunks.append(chunk)
            if chunk["type"] == "markdown_text":
                message.text += chunk["text"]
        message.updates += 1
        if len(message.text) > MESSAGE_LIMIT:
            self.problems.append("a streamed message over 40,000 characters")

    def _metadata_of(self, args: dict[str, Any]) -> dict[str, Any] | None:
        """A post's ``metadata`` as Slack keeps it: one of an ``event_type`` Slack does not
        take is dropped (Slack warns ``invalid_metadata_schema``; here, a problem)."""
        metadata = args.get("metadata")
        if metadata is None:
            return None
        if isinstance(metadata, str):
            metadata = json.loads(metadata)
        kind = metadata.get("event_type") if isinstance(metadata, dict) else None
        if not isinstance(kind, str) or not EVENT_TYPE.fullmatch(kind):
            self.problems.append(f"metadata Slack would ignore: {metadata!r}")
            return None
        if not isinstance(metadata.get("event_payload"), dict):
            self.problems.append(f"metadata without an event_payload object: {metadata!r}")
            return None
        return dict(metadata)

    def _conversations_replies(self, args: dict[str, Any]) -> web.Response:
        """A thread's replies the bot posted, oldest first (the fake keeps no one else's)."""
        channel, ts = args.get("channel", ""), args.get("ts", "")
        if not channel or not ts:
            return _fail("invalid_arguments")
        thread = [m for m in self.messages.values() if m.channel == channel and m.thread_ts == ts]
        return self._history_page(args, thread)

    def _conversations_history(self, args: dict[str, Any]) -> web.Response:
        """A channel's top-level messages the bot posted, newest first."""
        channel = args.get("channel", "")
        if not channel:
            return _fail("channel_not_found")
        top = [m for m in self.messages.values() if m.channel == channel and m.thread_ts is None]
        return self._history_page(args, list(reversed(top)))

    def _history_page(self, args: dict[str, Any], messages: list[Posted]) -> web.Response:
        """One page of ``messages`` between ``oldest`` and ``latest``, ``limit`` long, from
        ``cursor`` on; metadata only with ``include_all_metadata``."""
        inclusive = _flag(args.get("inclusive"))
        oldest, latest = float(args.get("oldest") or 0), float(args.get("latest") or "inf")
        shown = [
            m
            for m in messages
            if (oldest <= m.posted_at if inclusive else oldest < m.posted_at)
            and (m.posted_at <= latest if inclusive else m.posted_at < latest)
        ]
        limit = min(int(args.get("limit") or HISTORY_LIMIT), HISTORY_LIMIT)
        start = int(args.get("cursor") or 0)
        page = shown[start : start + limit]
        more = start + limit < len(shown)
        metadata = _flag(args.get("include_all_metadata"))
        return _ok(
            messages=[_history_message(m, metadata=metadata) for m in page],
            has_more=more,
            response_metadata={"next_cursor": str(start + limit) if more else ""},
        )

    def _chat_postEphemeral(self, args: dict[str, Any]) -> web.Response:
        if not args.get("channel") or not args.get("user") or not args.get("text"):
            return _fail("invalid_arguments")
        return _ok(message_ts=f"{1_700_000_000 + next(self._ts)}.000200")

    def _views_open(self, args: dict[str, Any]) -> web.Response:
        view = args.get("view")
        if not args.get("trigger_id") or not isinstance(view, dict):
            return _fail("invalid_arguments")
        if len(view.get("private_metadata", "")) > 3000:
            return self._problem("private_metadata over 3000 characters")
        problem = _view_problem(view)
        if problem:
            return self._problem(problem)
        return _ok(view={"id": f"V{next(self._ts):08d}", **view})

    def _views_publish(self, args: dict[str, Any]) -> web.Response:
        user, view = args.get("user_id"), args.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        if not user or not isinstance(view, dict):
            return _fail("invalid_arguments")
        if view.get("type") != "home":
            return self._problem(f"views.publish of a {view.get('type')!r} view, not a home")
        if len(json.dumps(view)) > VIEW_SIZE_LIMIT:
            self.problems.append("a Home view over 250 kB")
            return _fail("view_too_large")
        problem = _home_problem(view)
        if problem:
            return self._problem(problem)
        home = self.homes.get(user)
        if home is None:
            home = self.homes[user] = HomeTab(user, f"VH{next(self._ts):08d}", view, publishes=0)
        home.view = view
        home.publishes += 1
        return _ok(view={"id": home.id, "team_id": TEAM_ID, **view})

    def _assistant_threads_setStatus(self, args: dict[str, Any]) -> web.Response:
        if not args.get("channel_id") or not args.get("thread_ts") or "status" not in args:
            return _fail("invalid_arguments")
        if len(str(args["status"])) > STATUS_LIMIT:
            return self._problem("status too long")
        loading = args.get("loading_messages")
        if loading is not None:
            if not isinstance(loading, list) or not 0 < len(loading) <= LOADING_MESSAGES_LIMIT:
                return self._problem(f"loading_messages not a list of 1-10: {loading!r}")
            for message in loading:
                if not isinstance(message, str) or not 0 < len(message) <= LOADING_MESSAGE_LIMIT:
                    return self._problem(f"bad loading message {message!r}")
        return _ok()

    def _assistant_threads_setSuggestedPrompts(self, args: dict[str, Any]) -> web.Response:
        channel, thread_ts, prompts = (
            args.get("channel_id"),
            args.get("thread_ts"),
            args.get("prompts"),
        )
        if not channel:
            return _fail("invalid_arguments")
        if not isinstance(prompts, list) or not 0 < len(prompts) <= PROMPTS_LIMIT:
            return self._problem(f"prompts not a list of 1-{PROMPTS_LIMIT}: {prompts!r}")
        for prompt in prompts:
            if not isinstance(prompt, dict) or set(prompt) != {"title", "message"}:
                return self._problem(f"a prompt is a title and a message: {prompt!r}")
            title, message = prompt["title"], prompt["message"]
            if not isinstance(title, str) or not 0 < len(title) <= PROMPT_TITLE_LIMIT:
                return self._problem(f"bad prompt title {title!r}")
            if not isinstance(message, str) or not 0 < len(message) <= PROMPT_MESSAGE_LIMIT:
                return self._problem(f"bad prompt message {message!r}")
        # No thread: the top of the direct message (agent messaging).
        self.prompts[(str(channel), str(thread_ts or ""))] = prompts
        return _ok()

    def _assistant_threads_setTitle(self, args: dict[str, Any]) -> web.Response:
        channel, thread_ts, title = args.get("channel_id"), args.get("thread_ts"), args.get("title")
        if not channel or not thread_ts:
            return _fail("invalid_arguments")
        if not isinstance(title, str) or not title.strip() or len(title) > THREAD_TITLE_LIMIT:
            return self._problem(f"bad thread title {title!r}")
        self.titles[(str(channel), str(thread_ts))] = title
        return _ok()

    def _apps_connections_open(self, args: dict[str, Any]) -> web.Response:
        return _ok(url=self.ws_url)

    def _conversations_open(self, args: dict[str, Any]) -> web.Response:
        users = [u for u in str(args.get("users", "")).split(",") if u]
        if len(users) != 1:
            return _fail("users_list_not_supplied" if not users else "not_supported_in_test")
        channel = self.direct.setdefault(users[0], self.dm_of(users[0]))
        return _ok(channel={"id": channel})

    def _conversations_info(self, args: dict[str, Any]) -> web.Response:
        channel = args.get("channel", "")
        if channel in self.channels:
            return _ok(channel=self.channels[channel])
        if channel in self.direct.values():
            return _ok(channel={"id": channel, "is_im": True})
        return _fail("channel_not_found")

    def _usergroups_list(self, args: dict[str, Any]) -> web.Response:
        disabled = _flag(args.get("include_disabled"))
        groups = [
            {"id": g.id, "handle": g.handle, "name": g.handle.title(), "date_delete": 0}
            for g in self.groups.values()
            if g.enabled or disabled
        ]
        return _ok(usergroups=groups)

    def _usergroups_users_list(self, args: dict[str, Any]) -> web.Response:
        group = self.groups.get(args.get("usergroup", ""))
        if group is None:
            return _fail("no_such_subteam")
        return _ok(users=group.users)

    def _chat_getPermalink(self, args: dict[str, Any]) -> web.Response:
        channel, ts = args.get("channel", ""), args.get("message_ts", "")
        if not channel:
            return _fail("channel_not_found")
        if not ts:
            return _fail("message_not_found")
        return _ok(channel=channel, permalink=permalink(channel, ts))

    # -- Slack's checks --------------------------------------------------------------

    def _check_message(self, args: dict[str, Any]) -> str | None:
        if not args.get("channel"):
            return "channel_not_found"
        blocks, attachments = args.get("blocks"), args.get("attachments")
        if not blocks and not attachments:
            return None if args.get("text") else "no_text"
        if not args.get("text"):
            self.problems.append("blocks without a top-level text")
        if attachments is not None:
            problem = _attachments_problem(attachments)
            if problem:
                return self._problem_error(problem, error="invalid_attachments")
        if blocks is not None and not isinstance(blocks, list):
            return self._problem_error("blocks not a list")
        every = shown_blocks(blocks or [], attachments or [])
        if len(every) > BLOCKS_LIMIT:
            return self._problem_error("too many blocks")
        for block in every:
            problem = _block_problem(block)
            if problem:
                return self._problem_error(problem)
        return None

    def _problem(self, problem: str) -> web.Response:
        self.problems.append(problem)
        return _fail("invalid_arguments")

    def _problem_error(self, problem: str, *, error: str = "invalid_blocks") -> str:
        self.problems.append(problem)
        return error


def shown_blocks(
    blocks: list[dict[str, Any]], attachments: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A message's blocks and then those of its attachments, in the order people see them."""
    inside = [b for a in attachments if isinstance(a, dict) for b in a.get("blocks") or []]
    return [*blocks, *inside]


def _attachments_problem(attachments: Any) -> str | None:
    """Attachments Slack would refuse: not a list of objects, too many, a colour it
    cannot read, blocks that are not a list."""
    if not isinstance(attachments, list) or len(attachments) > ATTACHMENTS_LIMIT:
        return "attachments not a list of at most 100"
    for attachment in attachments:
        if not isinstance(attachment, dict):
            return "an attachment that is not an object"
        color = attachment.get("color")
        if color is not None and not (isinstance(color, str) and COLOR.fullmatch(color)):
            return f"attachment color {color!r} is not #RRGGBB, good, warning or danger"
        if not isinstance(attachment.get("blocks", []), list):
            return "attachment blocks not a list"
    return None


CONTEXT_ACTIONS_LIMIT = 5
FEEDBACK_LABEL_LIMIT = 75


def _block_problem(block: dict[str, Any]) -> str | None:
    kind = block.get("type")
    if kind == "section" and len(block.get("text", {}).get("text", "")) > SECTION_TEXT_LIMIT:
        return "section text over 3000 characters"
    if kind == "header":
        text = block.get("text", {})
        size = len(text.get("text", ""))
        if text.get("type") != "plain_text" or not 0 < size <= HEADER_TEXT_LIMIT:
            return "header text not plain_text of 1 to 150 characters"
    if kind == "context" and not 0 < len(block.get("elements", [])) <= CONTEXT_ELEMENTS_LIMIT:
        return "a context block takes 1 to 10 elements"
    if len(block.get("block_id", "")) > ID_LIMIT:
        return "block_id over 255 characters"
    elements = block.get("elements", [])
    if kind == "actions" and len(elements) > ACTIONS_ELEMENTS_LIMIT:
        return "more than 25 elements in an actions block"
    if kind == "context_actions":
        if not elements or len(elements) > CONTEXT_ACTIONS_LIMIT:
            return "a context_actions block takes 1 to 5 elements"
        for element in elements:
            if element.get("type") not in ("feedback_buttons", "icon_button"):
                return "context_actions takes feedback_buttons and icon_button only"
            for side in ("positive_button", "negative_button"):
                half = element.get(side) if element["type"] == "feedback_buttons" else {}
                if half is not None and element["type"] == "feedback_buttons":
                    if not half.get("value") or half.get("text", {}).get("type") != "plain_text":
                        return f"a feedback button's {side} needs plain_text and a value"
                    if len(half.get("accessibility_label", "")) > FEEDBACK_LABEL_LIMIT:
                        return "a feedback button's accessibility_label is over 75 characters"
    action_ids = [e["action_id"] for e in elements if "action_id" in e]
    if len(set(action_ids)) != len(action_ids):
        return "the same action_id twice in a block"
    for element in elements:
        if element.get("type") == "button" and len(element["text"]["text"]) > BUTTON_TEXT_LIMIT:
            return "button text over 75 characters"
        if len(element.get("action_id", "")) > ID_LIMIT:
            return "action_id over 255 characters"
        if len(element.get("value", "")) > BUTTON_VALUE_LIMIT:
            return "button value over 2000 characters"
        confirm = element.get("confirm")
        if confirm and len(confirm.get("text", {}).get("text", "")) > CONFIRM_TEXT_LIMIT:
            return "confirm text over 300 characters"
    return None


def _chunk_problem(chunk: dict[str, Any]) -> str | None:
    """A streaming chunk Slack would refuse."""
    kind = chunk.get("type")
    if kind not in CHUNK_TYPES:
        return f"unknown chunk type {kind!r}"
    if kind == "markdown_text":
        text = chunk.get("text")
        if not isinstance(text, str):
            return "markdown_text chunk without text"
    if kind == "task_update":
        if not chunk.get("id") or not chunk.get("title"):
            return "task_update without id or title"
        if chunk.get("status") not in TASK_STATUSES:
            return f"task_update status {chunk.get('status')!r}"
        for key in ("details", "output"):
            value = chunk.get(key)
            if value is not None and (not isinstance(value, str) or len(value) > TASK_FIELD_LIMIT):
                return f"task_update {key} not a string of at most 256 characters"
    return None


def _view_problem(view: dict[str, Any]) -> str | None:
    for key in ("title", "submit", "close"):
        if len(view.get(key, {}).get("text", "")) > MODAL_TITLE_LIMIT:
            return f"modal {key} over 24 characters"
    blocks = view.get("blocks", [])
    if len(blocks) > MODAL_BLOCKS_LIMIT:
        return "more than 100 blocks in a modal"
    for block in blocks:
        problem = _block_problem(block) or _input_problem(block)
        if problem:
            return problem
    return None


def _home_problem(view: dict[str, Any]) -> str | None:
    """A Home view Slack would refuse: no blocks, too many, a block over its limits."""
    blocks = view.get("blocks")
    if not isinstance(blocks, list) or not blocks:
        return "a Home view without blocks"
    if len(blocks) > HOME_BLOCKS_LIMIT:
        return "more than 100 blocks in a Home view"
    for block in blocks:
        problem = _block_problem(block) or _input_problem(block)
        if problem:
            return problem
    return None


def _input_problem(block: dict[str, Any]) -> str | None:
    if block.get("type") != "input":
        return None
    label = block.get("label", {}).get("text", "")
    if not label or len(label) > LABEL_LIMIT:
        return "input label empty or over 2000 characters"
    if len(block.get("hint", {}).get("text", "")) > LABEL_LIMIT:
        return "input hint over 2000 characters"
    element = block.get("element", {})
    if len(element.get("placeholder", {}).get("text", "")) > PLACEHOLDER_LIMIT:
        return "placeholder over 150 characters"
    if element.get("type") == "number_input":
        if "is_decimal_allowed" not in element:
            return "number_input without is_decimal_allowed"
        initial = element.get("initial_value")
        number = NUMBER if element["is_decimal_allowed"] else WHOLE_NUMBER
        if initial is not None and not (isinstance(initial, str) and number.fullmatch(initial)):
            return "number_input initial_value not a number string it allows"
    if element.get("type") == "plain_text_input":
        initial = element.get("initial_value")
        if initial is not None and not (isinstance(initial, str) and len(initial) <= TEXT_LIMIT):
            return "plain_text_input initial_value not a string of at most 3000 characters"
    if "initial_option" in element and element["initial_option"] not in element.get("options", []):
        return "initial_option not one of the options"
    if element.get("type") == "static_select":
        options = element.get("options", [])
        values = [o.get("value", "") for o in options]
        if not options or len(options) > OPTIONS_LIMIT or len(set(values)) != len(values):
            return "static_select options empty, repeated or over 100"
        for option in options:
            text = option.get("text", {}).get("text", "")
            if not text or len(text) > OPTION_TEXT_LIMIT:
                return "option text empty or over 75 characters"
            if not option.get("value") or len(option["value"]) > OPTION_VALUE_LIMIT:
                return "option value empty or over 150 characters"
    return None


def permalink(channel: str, ts: str) -> str:
    """The link the fake gives for a message."""
    return f"https://fake.slack.com/archives/{channel}/p{ts.replace('.', '')}"


def _history_message(message: Posted, *, metadata: bool) -> dict[str, Any]:
    """A message as ``conversations.history``/``replies`` give it (posted by the bot)."""
    shown: dict[str, Any] = {
        "type": "message",
        "ts": message.ts,
        "text": message.text,
        "bot_id": message.bot_id,
        "blocks": message.blocks,
    }
    if message.thread_ts is not None:
        shown["thread_ts"] = message.thread_ts
    if metadata and message.metadata is not None:
        shown["metadata"] = message.metadata
    return shown


def _flag(value: Any) -> bool:
    return str(value).lower() in ("1", "true")


def _basic(auth: str) -> tuple[str, str] | None:
    """The id and secret of HTTP basic auth, if that is what ``auth`` is."""
    if not auth.startswith("Basic "):
        return None
    try:
        decoded = base64.b64decode(auth.removeprefix("Basic ")).decode()
    except ValueError:
        return None
    client_id, _, secret = decoded.partition(":")
    return client_id, secret


async def _args(request: web.Request) -> dict[str, Any]:
    if request.content_type == "application/json":
        data = await request.json()
        return dict(data) if isinstance(data, dict) else {}
    form = await request.post()
    args: dict[str, Any] = {k: v for k, v in form.items() if isinstance(v, str)}
    for key in ("blocks", "view", "attachments", "metadata"):
        if isinstance(args.get(key), str):
            args[key] = json.loads(args[key])
    return args


def _installed_in(workspace: str, *, org: bool) -> dict[str, Any]:
    """Where ``oauth.v2.access`` says an install was made: a team, or (``org``) an
    Enterprise Grid organization as a whole."""
    if org:
        return {
            "team": None,
            "enterprise": {"id": workspace, "name": f"Org {workspace}"},
            "is_enterprise_install": True,
        }
    return {
        "team": {"id": workspace, "name": f"Team {workspace}"},
        "enterprise": None,
        "is_enterprise_install": False,
    }


def _ok(**fields: Any) -> web.Response:
    return web.json_response({"ok": True, **fields})


def _fail(error: str) -> web.Response:
    return web.json_response({"ok": False, "error": error})
