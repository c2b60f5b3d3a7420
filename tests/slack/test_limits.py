"""Slack's limits lose nothing: a fake Web API that answers 429 with ``Retry-After``,
or fails once, and the real ``AsyncWebClient`` the adapter uses."""

from __future__ import annotations

import asyncio

from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncRateLimitErrorRetryHandler,
    async_default_handlers,
)
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.app import RATE_LIMIT_RETRIES
from adapters.slack.messenger import SlackMessenger
from bot import Metrics, Reply, ThreadKey

from .fake_slack import TEAM_ID, TOKEN, FakeSlack, Scripted
from .harness import CHANNEL

THREAD = ThreadKey(platform="slack", workspace=TEAM_ID, channel=CHANNEL, root="1700000000.000100")


def messenger(slack: FakeSlack) -> SlackMessenger:
    """The adapter's messenger over a client set up as the adapter sets up its own."""
    client = AsyncWebClient(token=TOKEN, base_url=slack.url)
    client.retry_handlers = [
        *async_default_handlers(),
        AsyncRateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
    ]
    return SlackMessenger(client)


def posts(slack: FakeSlack) -> list[float]:
    return [call.at for call in slack.calls if call.method == "chat.postMessage"]


async def test_a_burst_over_the_channels_limit_is_posted_whole_and_in_order(
    slack: FakeSlack,
) -> None:
    # More 429s than the client retries on its own: the rest is waited out here.
    slack.script("chat.postMessage", Scripted(status=429, retry_after=1, times=4))
    slack_messenger = messenger(slack)
    refs = await asyncio.gather(
        *(slack_messenger.post(THREAD, Reply(text=f"answer {n}")) for n in range(12))
    )
    shown = [m.text for m in slack.messages.values() if m.channel == CHANNEL]
    assert shown == [f"answer {n}" for n in range(12)]
    assert len({ref["ts"] for ref in refs}) == 12
    # Nothing was sent again before the Retry-After of the 429 before it.
    times = posts(slack)
    refused = times[:4]
    for before, after in zip(refused, times[1:5], strict=True):
        assert after - before >= 0.95
    assert slack_messenger.pacer.waiting == 0


async def test_a_passing_server_error_is_tried_again_and_the_card_still_posted(
    slack: FakeSlack,
) -> None:
    slack.script("chat.postMessage", Scripted(status=503, times=1))
    ref = await messenger(slack).post(THREAD, Reply(text="the card"))
    assert slack.messages[(CHANNEL, ref["ts"])].text == "the card"
    assert len(posts(slack)) == 2


async def test_an_update_over_the_workspace_limit_still_lands(slack: FakeSlack) -> None:
    slack_messenger = messenger(slack)
    ref = await slack_messenger.post(THREAD, Reply(text="before"))
    slack.script("chat.update", Scripted(status=429, retry_after=1, times=3))
    await slack_messenger.update(THREAD, ref, Reply(text="after"))
    assert slack.messages[(CHANNEL, ref["ts"])].text == "after"


async def test_the_metrics_show_calls_waiting_on_the_limit(slack: FakeSlack) -> None:
    slack.script("chat.postMessage", Scripted(status=429, retry_after=1, times=4))
    slack_messenger = messenger(slack)
    metrics = Metrics()
    metrics.watch_platform("slack", slack_messenger)
    posting = asyncio.ensure_future(slack_messenger.post(THREAD, Reply(text="later")))
    seen = 0.0
    while not posting.done():
        seen = max(seen, metrics.value("approval_bot_platform_calls_waiting", platform="slack"))
        await asyncio.sleep(0.05)
    await posting
    assert seen == 1
    assert metrics.value("approval_bot_platform_calls_waiting", platform="slack") == 0
