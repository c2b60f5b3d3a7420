"""A local fake of the Slack Web API, for the real ``AsyncWebClient`` to talk to.

It records every call, keeps the channel messages (so tests see what people
would see after ``chat.update``), checks the Block Kit limits Slack enforces,
and answers like Slack: ``{"ok": true, ...}`` or ``{"ok": false, "error": ...}``.
Errors (and 429s) can be scripted per method.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"
TEAM_ID = "T0TEAM001"
BOT_USER_ID = "U0BOT0001"
BOT_ID = "B0BOT0001"

SECTION_TEXT_LIMIT = 3000
BUTTON_VALUE_LIMIT = 2000
ID_LIMIT = 255
BLOCKS_LIMIT = 50
ACTIONS_ELEMENTS_LIMIT = 25
BUTTON_TEXT_LIMIT = 75
CONFIRM_TEXT_LIMIT = 300
MODAL_TITLE_LIMIT = 24
MODAL_BLOCKS_LIMIT = 100
LABEL_LIMIT = 2000
PLACEHOLDER_LIMIT = 150
OPTIONS_LIMIT = 100
OPTION_TEXT_LIMIT = 75
OPTION_VALUE_LIMIT = 150
TEXT_LIMIT = 3000
NUMBER = re.compile(r"-?\d+(\.\d+)?")
WHOLE_NUMBER = re.compile(r"-?\d+")


@dataclass
class ApiCall:
    """One Web API request as the fake received it."""

    method: str
    args: dict[str, Any]


@dataclass
class Posted:
    """A message in a channel, as it looks now."""

    channel: str
    ts: str
    thread_ts: str | None
    text: str
    blocks: list[dict[str, Any]]
    updates: int = 0
    updated_at: float | None = None
    """``time.perf_counter()`` of the last ``chat.update`` (for benchmarks)."""


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
    url: str = ""
    _ts: Any = field(default_factory=lambda: itertools.count(1))
    _runner: web.AppRunner | None = None

    async def start(self) -> str:
        """Listen on 127.0.0.1 at a free port; return the API base URL."""
        app = web.Application()
        app.router.add_post("/api/{method}", self._handle)
        app.router.add_get("/socket", self._socket)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/api/"
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

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await _args(request)
        auth = request.headers.get("Authorization", "")
        self.calls.append(ApiCall(method, args))
        expected = APP_TOKEN if method == "apps.connections.open" else TOKEN
        if auth != f"Bearer {expected}":
            return _fail("invalid_auth")
        pending = self.scripted.get(method)
        if pending:
            answer = pending[0]
            answer.times -= 1
            if answer.times <= 0:
                pending.pop(0)
            if answer.status == 429:
                headers = {"Retry-After": str(answer.retry_after)}
                return web.json_response(
                    {"ok": False, "error": "ratelimited"}, status=429, headers=headers
                )
            if answer.error:
                return _fail(answer.error)
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return _fail("unknown_method")
        result: web.Response = handler(args)
        return result

    def _auth_test(self, args: dict[str, Any]) -> web.Response:
        return _ok(
            url="https://fake.slack.com/",
            team="Fake Team",
            user="approval-bot",
            team_id=TEAM_ID,
            user_id=BOT_USER_ID,
            bot_id=BOT_ID,
        )

    def _chat_postMessage(self, args: dict[str, Any]) -> web.Response:
        problem = self._check_message(args)
        if problem:
            return _fail(problem)
        ts = f"{1_700_000_000 + next(self._ts)}.000100"
        channel = args["channel"]
        blocks = args.get("blocks") or []
        message = Posted(channel, ts, args.get("thread_ts"), args.get("text", ""), blocks)
        self.messages[(channel, ts)] = message
        return _ok(channel=channel, ts=ts, message={"text": message.text, "ts": ts})

    def _chat_update(self, args: dict[str, Any]) -> web.Response:
        problem = self._check_message(args)
        if problem:
            return _fail(problem)
        message = self.messages.get((args.get("channel", ""), args.get("ts", "")))
        if message is None:
            return _fail("message_not_found")
        message.text = args.get("text", "")
        message.blocks = args.get("blocks") or []
        message.updates += 1
        message.updated_at = time.perf_counter()
        return _ok(channel=message.channel, ts=message.ts, text=message.text)

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

    def _assistant_threads_setStatus(self, args: dict[str, Any]) -> web.Response:
        if not args.get("channel_id") or not args.get("thread_ts") or "status" not in args:
            return _fail("invalid_arguments")
        return _ok()

    def _apps_connections_open(self, args: dict[str, Any]) -> web.Response:
        return _ok(url=self.ws_url)

    # -- Slack's checks --------------------------------------------------------------

    def _check_message(self, args: dict[str, Any]) -> str | None:
        if not args.get("channel"):
            return "channel_not_found"
        blocks = args.get("blocks")
        if blocks is None:
            return None if args.get("text") else "no_text"
        if not args.get("text"):
            self.problems.append("blocks without a top-level text")
        if not isinstance(blocks, list) or len(blocks) > BLOCKS_LIMIT:
            return self._problem_error("too many blocks")
        for block in blocks:
            problem = _block_problem(block)
            if problem:
                return self._problem_error(problem)
        return None

    def _problem(self, problem: str) -> web.Response:
        self.problems.append(problem)
        return _fail("invalid_arguments")

    def _problem_error(self, problem: str) -> str:
        self.problems.append(problem)
        return "invalid_blocks"


def _block_problem(block: dict[str, Any]) -> str | None:
    kind = block.get("type")
    if kind == "section" and len(block.get("text", {}).get("text", "")) > SECTION_TEXT_LIMIT:
        return "section text over 3000 characters"
    if len(block.get("block_id", "")) > ID_LIMIT:
        return "block_id over 255 characters"
    elements = block.get("elements", [])
    if kind == "actions" and len(elements) > ACTIONS_ELEMENTS_LIMIT:
        return "more than 25 elements in an actions block"
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


async def _args(request: web.Request) -> dict[str, Any]:
    if request.content_type == "application/json":
        data = await request.json()
        return dict(data) if isinstance(data, dict) else {}
    form = await request.post()
    args: dict[str, Any] = {k: v for k, v in form.items() if isinstance(v, str)}
    for key in ("blocks", "view", "attachments"):
        if isinstance(args.get(key), str):
            args[key] = json.loads(args[key])
    return args


def _ok(**fields: Any) -> web.Response:
    return web.json_response({"ok": True, **fields})


def _fail(error: str) -> web.Response:
    return web.json_response({"ok": False, "error": error})
