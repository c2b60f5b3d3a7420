"""The approval service's HTTP API, driven by an ``aiohttp`` client, decided in Slack.

A client (``[clients.ci]``) asks over ``/v1``; the card is posted in its channel by
the real Slack adapter against the fake Web API; people decide it with signed clicks;
the client reads the decision (a long poll) or gets it POSTed to its callback.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from adapters.slack.wire import APPROVE_ACTION, DECLINE_ACTION, RESPOND_ACTION
from agents import Store
from bot import ApprovalPolicy
from bot.callbacks import SIGNATURE, signature
from bot.clients import Client, Clients

from .conftest import StartBot
from .fake_slack import FakeSlack, Posted
from .harness import ALICE, BOB, BotServer, block_actions, view_submission
from .scripted import Ran, build_agent
from .test_approvals import card_text, has_buttons
from .test_questions import submission

CI_CHANNEL = "C0DEPLOYS"
TOKEN = "ci-token-0123456789abcdef"
OTHER_TOKEN = "other-token-0123456789abcd"
CLIENTS = Clients(
    [
        Client(name="ci", token=TOKEN, tools=frozenset({"deploy", "Bash"}), channel=CI_CHANNEL),
        Client(name="other", token=OTHER_TOKEN, channel=CI_CHANNEL),
    ]
)
DEPLOY = {"tool": "deploy", "args": {"service": "api", "version": "v2"}, "summary": "Ship v2"}


class Api:
    """A client of the bot's ``/v1`` API."""

    def __init__(self, bot: BotServer, token: str | None = TOKEN) -> None:
        self.bot = bot
        self.session = bot.session
        self.token = token

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        auth = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return {**auth, **(extra or {})}

    async def ask(
        self, body: Any = None, *, key: str | None = "k1", raw: bytes | None = None
    ) -> tuple[int, dict[str, Any]]:
        headers = self._headers({"Idempotency-Key": key} if key else None)
        data = raw if raw is not None else json.dumps(DEPLOY if body is None else body).encode()
        url = self.bot.server.make_url("/v1/approvals")
        async with self.session.post(url, data=data, headers=headers) as response:
            return response.status, await response.json()

    async def get(self, approval: str, wait: float | str | None = None) -> tuple[int, Any]:
        query = f"?wait={wait}" if wait is not None else ""
        url = self.bot.server.make_url(f"/v1/approvals/{approval}{query}")
        async with self.session.get(url, headers=self._headers()) as response:
            return response.status, await response.json()

    async def cancel(self, approval: str) -> tuple[int, Any]:
        url = self.bot.server.make_url(f"/v1/approvals/{approval}/cancel")
        async with self.session.post(url, headers=self._headers()) as response:
            return response.status, await response.json()


@pytest.fixture
async def ci(serve: StartBot, store: Store, ran: Ran, slack: FakeSlack) -> Api:
    slack.add_channel(CI_CHANNEL, name="deploys")
    policy = ApprovalPolicy.from_toml('[tools.ci__Bash]\napprovers = ["U0BOB0001"]\n')
    return Api(await serve(build_agent(store, ran), policy=policy, clients=CLIENTS))


async def the_card(slack: FakeSlack) -> Posted:
    """The one approval card posted (once it is)."""
    await slack.wait_for(
        lambda: any(has_buttons(m) for m in slack.messages.values()), what="a card"
    )
    (card,) = [m for m in slack.messages.values() if has_buttons(m)]
    return card


async def test_a_client_asks_a_person_approves_and_the_long_poll_answers(
    ci: Api, slack: FakeSlack
) -> None:
    status, asked = await ci.ask()
    assert status == 201
    assert asked["status"] == "pending"
    assert asked["tool"] == "deploy"
    assert asked["url"] == f"/v1/approvals/{asked['id']}"

    card = await the_card(slack)
    (header,) = slack.top_level(CI_CHANNEL)
    assert header.text.startswith("ci asks for approval to run deploy: Ship v2")
    assert card.thread_ts == header.ts
    shown = card_text(card)
    assert "deploy (run by ci)" in shown
    assert "version" in shown
    assert "v2" in shown

    waiting = asyncio.create_task(ci.get(asked["id"], wait=20))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    assert await ci.bot.press(card, APPROVE_ACTION, user=ALICE) == 200
    status, decided = await asyncio.wait_for(waiting, 10)
    assert status == 200
    assert decided["status"] == "approved"
    assert decided["decided_by"] == ALICE
    assert decided["args"] == DEPLOY["args"]
    await ci.bot.idle()
    assert f"Approved by <@{ALICE}>" in card_text(card)
    # The bot never runs a client's tool: nothing of the bot's own ran.
    assert [m.text for m in slack.in_thread(CI_CHANNEL, header.ts) if "failed" in m.text] == []


async def test_one_approval_per_idempotency_key(ci: Api, slack: FakeSlack) -> None:
    first, second = await asyncio.gather(ci.ask(key="same"), ci.ask(key="same"))
    assert sorted([first[0], second[0]]) == [200, 201]
    assert first[1]["id"] == second[1]["id"]
    again_status, again = await ci.ask(key="same")
    assert (again_status, again["id"]) == (200, first[1]["id"])
    await the_card(slack)
    await ci.bot.idle()
    assert len([m for m in slack.messages.values() if has_buttons(m)]) == 1
    # Another key is another approval.
    other_status, other = await ci.ask(key="another")
    assert other_status == 201
    assert other["id"] != first[1]["id"]


async def test_a_decline_says_who_and_why(ci: Api, slack: FakeSlack) -> None:
    _, asked = await ci.ask()
    card = await the_card(slack)
    assert await ci.bot.press(card, DECLINE_ACTION, user=BOB) == 200
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    opened = slack.of("views.open")[0].args
    status, _ = await ci.bot.interact(view_submission(opened["view"], user=BOB, reason="freeze"))
    assert status == 200
    status, decided = await ci.get(asked["id"], wait=10)
    assert (decided["status"], decided["decided_by"], decided["reason"]) == (
        "declined",
        BOB,
        "freeze",
    )


async def test_the_policy_names_a_clients_tool(ci: Api, slack: FakeSlack) -> None:
    _, asked = await ci.ask({"tool": "Bash", "args": {"command": "rm -rf build"}})
    card = await the_card(slack)
    assert await ci.bot.press(card, APPROVE_ACTION, user=ALICE) == 200
    await ci.bot.idle()
    assert (await ci.get(asked["id"]))[1]["status"] == "pending"  # Alice may not
    assert await ci.bot.press(card, APPROVE_ACTION, user=BOB) == 200
    assert (await ci.get(asked["id"], wait=10))[1]["status"] == "approved"


async def test_cancel_withdraws_it_and_the_card_says_so(ci: Api, slack: FakeSlack) -> None:
    _, asked = await ci.ask()
    card = await the_card(slack)
    late = block_actions(card, APPROVE_ACTION, user=BOB)  # the card as it was
    status, cancelled = await ci.cancel(asked["id"])
    assert (status, cancelled["status"], cancelled["decided_by"]) == (200, "cancelled", "client:ci")
    await ci.bot.idle()
    assert not has_buttons(card)
    said = " ".join(m.text for m in slack.in_thread(CI_CHANNEL, card.thread_ts or ""))
    assert "ci withdrew its request to run deploy" in said
    # A click on the withdrawn card decides nothing.
    assert (await ci.bot.interact(late))[0] == 200
    await ci.bot.idle()
    assert (await ci.get(asked["id"]))[1]["status"] == "cancelled"
    # Cancelling what is decided changes nothing.
    assert (await ci.cancel(asked["id"]))[1]["status"] == "cancelled"


async def test_bad_requests_get_a_clear_answer_and_post_nothing(ci: Api, slack: FakeSlack) -> None:
    anonymous, wrong = Api(ci.bot, token=None), Api(ci.bot, token="nope-" + TOKEN)
    assert (await anonymous.ask())[0] == 401
    assert (await wrong.ask())[0] == 401
    assert (await wrong.get("appr_x"))[0] == 401
    status, body = await ci.ask({"tool": "drop_database", "args": {}})
    assert (status, body["field"]) == (403, "tool")
    cases: list[tuple[Any, str | None]] = [
        ({"args": {}}, "tool"),
        ({"tool": "deploy", "args": []}, "args"),
        ({"tool": "deploy", "colour": "red"}, "colour"),
        ({"tool": "deploy", "expires_in": "soon"}, "expires_in"),
        ({"tool": "deploy", "callback_url": "ftp://x"}, "callback_url"),
        ({"tool": "deploy", "channel": "C0NOWHERE"}, "channel"),
        ([1, 2], None),
    ]
    for body_sent, field in cases:
        status, body = await ci.ask(body_sent, key=None)
        assert status == 400, body_sent
        assert body.get("field") == field, (body_sent, body)
    assert (await ci.ask(raw=b"{not json", key=None))[0] == 400
    lone = b'{"tool": "deploy", "summary": "\\ud800"}'  # a lone surrogate, spelled in JSON
    assert (await ci.ask(raw=lone, key=None))[0] == 400
    assert (await ci.ask(raw=b"x" * 300_000, key=None))[0] == 400
    assert (await ci.ask(key="k" * 201))[0] == 400
    assert (await ci.get("appr_unknown"))[0] == 404
    assert (await ci.get("appr_unknown", wait="soon"))[0] == 400
    assert (await ci.get("appr_unknown", wait=61))[0] == 400
    assert [m for m in slack.messages.values() if m.channel == CI_CHANNEL] == []


async def test_a_client_sees_only_its_own_approvals(ci: Api, slack: FakeSlack) -> None:
    _, asked = await ci.ask()
    other = Api(ci.bot, token=OTHER_TOKEN)
    assert (await other.get(asked["id"]))[0] == 404
    assert (await other.cancel(asked["id"]))[0] == 404
    # The same key from another client is another approval.
    status, theirs = await other.ask(key="k1")
    assert status == 201
    assert theirs["id"] != asked["id"]


# -- callbacks ----------------------------------------------------------------------


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    found = Receiver()
    app = web.Application()
    app.router.add_post("/hook", found.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    found.url = str(server.make_url("/hook"))
    yield found
    await server.close()


class Receiver:
    """A callback receiver that fails ``failing`` times first."""

    def __init__(self) -> None:
        self.url = ""
        self.failing = 2
        self.got: list[tuple[bytes, dict[str, str]]] = []
        self.taken = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.got.append((body, dict(request.headers)))
        if self.failing:
            self.failing -= 1
            return web.Response(status=500)
        self.taken.set()
        return web.Response(status=204)


async def test_the_decision_is_posted_signed_to_the_callback_until_taken(
    ci: Api, slack: FakeSlack, receiver: Receiver
) -> None:
    ci.bot.bot.service.callbacks.first = 0.05
    _, asked = await ci.ask({**DEPLOY, "callback_url": receiver.url})
    card = await the_card(slack)
    assert await ci.bot.press(card, APPROVE_ACTION, user=ALICE) == 200
    await asyncio.wait_for(receiver.taken.wait(), 10)
    assert len(receiver.got) == 3
    body, headers = receiver.got[-1]
    assert headers[SIGNATURE] == signature(TOKEN, body)
    assert headers["X-Approval-Id"] == asked["id"]
    sent = json.loads(body)
    assert (sent["id"], sent["status"], sent["decided_by"]) == (asked["id"], "approved", ALICE)
    # Taken: nothing more is owed, whatever the timers say.
    await ci.bot.bot.send_reminders()
    assert len(receiver.got) == 3
    assert await ci.bot.bot.chat.record(f"callback:{asked['id']}") is None


async def test_a_response_in_the_tools_place_is_a_decline_with_the_persons_words(
    serve: StartBot, store: Store, ran: Ran, slack: FakeSlack
) -> None:
    slack.add_channel(CI_CHANNEL, name="deploys")
    policy = ApprovalPolicy.from_toml("[default]\nrespond = true\n")
    api = Api(await serve(build_agent(store, ran), policy=policy, clients=CLIENTS))
    _, asked = await api.ask()
    card = await the_card(slack)
    assert await api.bot.press(card, RESPOND_ACTION, user=BOB) == 200
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    view = slack.of("views.open")[0].args["view"]
    sent = submission(view, {"response": "Shipped v2 by hand."}, user=BOB)
    assert await api.bot.interact(sent) == (200, "")
    status, decided = await api.get(asked["id"], wait=10)
    assert status == 200
    assert (decided["status"], decided["decided_by"], decided["reason"]) == (
        "declined",
        BOB,
        "Shipped v2 by hand.",
    )
