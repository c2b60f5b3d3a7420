"""The decision page, in a real headless Chromium with JavaScript off.

A client asks over ``/v1``; its answer links each approver's page; the approver opens
it, sees the card as the chat shows it, and decides there (Approve, Decline with a
reason, Edit): the claim is the chat's, so the Slack card, the waiting client and the
link itself all say so once. Used, expired, decided-elsewhere and forged links say
what they are and decide nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from html import escape
from typing import Any

import pytest
from playwright.async_api import Browser, Page

from adapters.slack.wire import APPROVE_ACTION
from agents import Store
from bot import ApprovalPolicy
from bot import texts as core_texts

from ..browser import chromium
from .conftest import StartBot
from .fake_slack import FakeSlack
from .harness import ALICE, BOB, BotServer
from .scripted import Ran, build_agent
from .test_approvals import card_text, has_buttons
from .test_client_api import CI_CHANNEL, CLIENTS, DEPLOY, Api, the_card

CAROL = "U0CAROL01"


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as started:
        yield started


async def client(serve: StartBot, store: Store, ran: Ran, slack: FakeSlack, policy: str) -> Api:
    slack.add_channel(CI_CHANNEL, name="deploys")
    return Api(
        await serve(
            build_agent(store, ran), policy=ApprovalPolicy.from_toml(policy), clients=CLIENTS
        )
    )


@pytest.fixture
async def ci(serve: StartBot, store: Store, ran: Ran, slack: FakeSlack) -> Api:
    return await client(serve, store, ran, slack, f'[tools.ci__deploy]\napprovers = ["{BOB}"]\n')


async def opened(browser: Browser, url: str) -> tuple[Page, int, list[str]]:
    """A page with JavaScript off, at ``url``: its status, and every request it made."""
    context = await browser.new_context(java_script_enabled=False)
    page = await context.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    response = await page.goto(url)
    assert response is not None
    return page, response.status, requests


async def asked(ci: Api, slack: FakeSlack, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """A request of the client, once its card is posted, as its long poll reads it."""
    status, found = await ci.ask(body)
    assert status == 201
    await the_card(slack)
    status, found = await ci.get(found["id"])
    assert status == 200
    assert isinstance(found, dict)
    return found


async def test_an_approver_approves_on_the_page_and_everyone_is_told_once(
    ci: Api, slack: FakeSlack, browser: Browser
) -> None:
    found = await asked(ci, slack)
    assert list(found["links"]) == [BOB]
    link = found["links"][BOB]
    assert link.startswith(str(ci.bot.server.make_url("/approve/")))

    page, status, requests = await opened(browser, link)
    assert status == 200
    assert requests == [link], "the page loads nothing from elsewhere"
    assert await page.locator("script").count() == 0
    heading = await page.inner_text("h1")
    assert "Approval needed" in heading
    assert "deploy (run by ci)" in heading
    shown = await page.inner_text("article")
    assert "service" in shown
    assert "v2" in shown
    assert BOB in await page.inner_text(".said")

    waiting = asyncio.create_task(ci.get(found["id"], wait=20))
    await page.get_by_role("button", name="Approve", exact=True).click()
    assert core_texts.PAGE_DONE in await page.inner_text(".said")
    assert f"Approved by {BOB}" in await page.inner_text("h1, article")
    assert await page.get_by_role("button").count() == 0

    status, decided = await asyncio.wait_for(waiting, 10)
    assert (decided["status"], decided["decided_by"]) == ("approved", BOB)
    assert decided["args"] == DEPLOY["args"]
    assert decided["links"] == {}
    await ci.bot.idle()
    card = the_card_again(slack)
    assert f"Approved by <@{BOB}>" in card_text(card)

    again, status, _ = await opened(browser, link)
    assert status == 410
    assert core_texts.PAGE_USED in await again.inner_text(".said")
    assert await again.get_by_role("button").count() == 0


def the_card_again(slack: FakeSlack) -> Any:
    (card,) = [m for m in slack.messages.values() if "deploy (run by ci)" in card_text(m)]
    return card


async def test_a_decline_on_the_page_carries_its_reason(
    ci: Api, slack: FakeSlack, browser: Browser
) -> None:
    found = await asked(ci, slack)
    page, _, _ = await opened(browser, found["links"][BOB])
    await page.get_by_label(core_texts.REASON_LABEL).fill("not during the freeze")
    await page.get_by_role("button", name="Decline").click()
    assert f"Declined by {BOB}" in await page.inner_text("article")

    _, decided = await ci.get(found["id"], wait=10)
    assert decided["status"] == "declined"
    assert decided["reason"] == "not during the freeze"
    await ci.bot.idle()
    assert "not during the freeze" in card_text(the_card_again(slack))


async def test_an_edit_on_the_page_is_what_the_client_may_run(
    ci: Api, slack: FakeSlack, browser: Browser
) -> None:
    found = await asked(ci, slack)
    page, _, _ = await opened(browser, found["links"][BOB])
    await page.get_by_text(core_texts.EDIT, exact=True).click()  # the disclosure, no script
    await page.get_by_label("version").fill("v3")
    await page.get_by_role("button", name=core_texts.APPROVE_EDITED).click()
    assert "v3" in await page.inner_text("article")

    _, decided = await ci.get(found["id"], wait=10)
    assert decided["status"] == "approved"
    assert decided["args"] == {"service": "api", "version": "v3"}
    assert decided["requested_args"] == DEPLOY["args"]


async def test_a_link_decided_in_the_chat_first_says_so_and_decides_nothing(
    serve: StartBot, store: Store, ran: Ran, slack: FakeSlack, browser: Browser
) -> None:
    ci = await client(
        serve, store, ran, slack, f'[tools.ci__deploy]\napprovers = ["{BOB}", "{ALICE}"]\n'
    )
    found = await asked(ci, slack)
    assert sorted(found["links"]) == sorted([ALICE, BOB])
    page, _, _ = await opened(browser, found["links"][BOB])  # open, not yet pressed

    assert await ci.bot.press(await the_card(slack), APPROVE_ACTION, user=ALICE) == 200
    await ci.bot.idle()
    await page.get_by_role("button", name="Decline").click()
    said = await page.inner_text(".said")
    assert core_texts.PAGE_DECIDED in said
    assert f"Approved by {ALICE}" in await page.inner_text("article")
    _, decided = await ci.get(found["id"])
    assert (decided["status"], decided["decided_by"]) == ("approved", ALICE)

    again, status, _ = await opened(browser, found["links"][BOB])
    assert status == 410
    assert core_texts.PAGE_DECIDED in await again.inner_text(".said")


async def test_an_expired_link_says_so(ci: Api, slack: FakeSlack, browser: Browser) -> None:
    found = await asked(ci, slack, {**DEPLOY, "expires_in": "1s"})
    await asyncio.sleep(1.2)
    page, status, _ = await opened(browser, found["links"][BOB])
    assert status == 410
    assert core_texts.PAGE_EXPIRED in await page.inner_text(".said")
    assert await page.get_by_role("button").count() == 0


async def test_a_forged_or_cut_link_is_refused(ci: Api, slack: FakeSlack, browser: Browser) -> None:
    found = await asked(ci, slack)
    link = found["links"][BOB]
    # A changed character inside the signature (the last one holds padding bits too, so
    # changing it may decode to the same bytes).
    flipped = link[:-10] + ("A" if link[-10] != "A" else "B") + link[-9:]
    for bad in (link[:-3], flipped, f"{link}x"):
        page, status, _ = await opened(browser, bad)
        assert status == 401
        assert core_texts.PAGE_FORGED in await page.inner_text(".said")
    # A token signed by another key (another bot's) decides nothing either.
    url = ci.bot.server.make_url("/approve/WyJhcHByX3giLCJjYWxsIiwiVTAiXQ.bm90LWEtc2lnbmF0dXJl")
    async with ci.session.post(url, data={"action": "approve", "ask": ""}) as response:
        assert response.status == 401
    _, still = await ci.get(found["id"])
    assert still["status"] == "pending"


async def test_a_post_that_is_not_the_pages_form_is_a_400_and_decides_nothing(
    ci: Api, slack: FakeSlack
) -> None:
    found = await asked(ci, slack)
    url = found["links"][BOB]
    session = ci.session
    async with session.post(url, json={"action": "approve"}) as response:
        assert response.status == 400
    async with session.post(url, data={"action": "approve"}) as response:  # no ask
        assert response.status == 400
    async with session.post(url, data={"action": "launch", "ask": "x"}) as response:
        assert response.status == 400
        assert escape(core_texts.PAGE_UNKNOWN_ACTION) in await response.text()
    big = {"action": "decline", "ask": "", "reason": "x" * 100_000}
    async with session.post(url, data=big) as response:
        assert response.status == 400
    _, still = await ci.get(found["id"])
    assert still["status"] == "pending"


async def test_a_card_sent_to_each_approver_links_their_own_page(
    serve: StartBot, store: Store, ran: Ran, slack: FakeSlack, browser: Browser
) -> None:
    policy = f'[tools.ci__deploy]\napprovers = ["{BOB}", "{CAROL}"]\nnotify = "dm"\n'
    ci = await client(serve, store, ran, slack, policy)
    status, found = await ci.ask()
    assert status == 201
    await slack.wait_for(
        lambda: all(_dm_card(slack, user) for user in (BOB, CAROL)), what="the DM'd cards"
    )
    carols = _dm_card(slack, CAROL)
    assert carols is not None
    (link,) = [part for part in _links(card_text(carols)) if "/approve/" in part]
    bobs = _dm_card(slack, BOB)
    assert bobs is not None
    assert link not in card_text(bobs), "each approver's card links their own page"

    page, status, _ = await opened(browser, link)
    assert status == 200
    assert CAROL in await page.inner_text(".said")
    await page.get_by_role("button", name="Approve", exact=True).click()
    _, decided = await ci.get(found["id"], wait=10)
    assert (decided["status"], decided["decided_by"]) == ("approved", CAROL)
    await ci.bot.idle()
    for user in (BOB, CAROL):
        card = _dm_card(slack, user)
        assert card is not None
        assert not has_buttons(card)
        assert "/approve/" not in card_text(card), "a decided card links no page"


def _dm_card(slack: FakeSlack, user: str) -> Any:
    found = [m for m in slack.top_level(slack.dm_of(user)) if "deploy" in card_text(m)]
    return found[0] if found else None


def _links(text: str) -> list[str]:
    """The addresses of Slack's ``<url|words>`` links in ``text``."""
    return [part.split("|", 1)[0] for part in text.split("<")[1:] if "|" in part]


async def test_the_server_serves_pages_without_clients(bot: BotServer) -> None:
    url = bot.server.make_url("/approve/nothing")
    async with bot.session.get(url) as response:
        assert response.status == 401
        assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")
        assert escape(core_texts.PAGE_FORGED) in await response.text()
