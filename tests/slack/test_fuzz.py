"""Fuzzing the Slack edge (hypothesis): random and mutated bodies, headers and values.

Every answer is 2xx or 4xx, the server stays up, and nothing is posted for a
request that is not signed with the signing secret.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents import MemoryStore
from tests.background import BackgroundLoop, background_loop
from tests.fuzzing import FUZZ, HEADER_TEXT, JSON, mutate, post

from .fake_slack import FakeSlack
from .harness import BotServer, event_body, mention_event, signed_headers, start_bot
from .scripted import Ran, build_agent

# Timestamps that look like numbers are the interesting ones: Latin-1 has digits
# besides 0-9 (superscripts), and the number may be stale, negative or huge.
TIMESTAMP = st.one_of(
    HEADER_TEXT,
    st.text(alphabet="0123456789\u00b2\u00b3\u00b9\u2460\u0661", min_size=1, max_size=12),
    st.integers().map(str),
)


@dataclass
class Served:
    loop: BackgroundLoop
    slack: FakeSlack
    bot: BotServer

    def post(self, body: bytes, headers: dict[str, str]) -> int:
        return post(self.bot.url, body, headers)

    def posted(self) -> int:
        """Messages posted so far, once the bot has finished what it was doing."""
        self.loop.run(self.bot.adapter.drain())
        return len(self.slack.of("chat.postMessage"))


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with background_loop() as loop:
        slack = FakeSlack()
        loop.run(slack.start())
        bot = loop.run(start_bot(slack, build_agent(MemoryStore(), Ran())))
        try:
            yield Served(loop, slack, bot)
        finally:
            loop.run(bot.adapter.drain())
            loop.run(bot.close())
            loop.run(slack.stop())


@FUZZ
@given(
    body=st.binary(max_size=300) | JSON.map(lambda v: json.dumps(v).encode()),
    timestamp=TIMESTAMP,
    signature=HEADER_TEXT,
    content_type=st.sampled_from(["application/json", "application/x-www-form-urlencoded"]),
)
def test_unsigned_requests_never_5xx_and_never_post(
    served: Served, body: bytes, timestamp: str, signature: str, content_type: str
) -> None:
    before = served.posted()
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature,
    }
    status = served.post(body, headers)
    assert status < 500
    assert status == 401
    assert served.posted() == before


# A fresh mention per example (new event id and ts): a repeated one would be a duplicate.
MENTIONS = st.builds(lambda: event_body(mention_event("deploy api")))
PATHS = [
    ["type"],
    ["event"],
    ["event", "type"],
    ["event", "user"],
    ["event", "text"],
    ["event", "ts"],
    ["event", "channel"],
    ["event", "thread_ts"],
    ["team_id"],
    ["authorizations"],
]


@FUZZ
@given(
    body=st.one_of(
        JSON,
        st.tuples(MENTIONS, st.sampled_from(PATHS), JSON).map(lambda m: mutate(*m)),
    )
)
def test_signed_random_and_mutated_bodies_never_5xx(served: Served, body: Any) -> None:
    text = json.dumps(body)
    headers = {"Content-Type": "application/json", **signed_headers(text)}
    assert served.post(text.encode(), headers) < 500


def test_the_server_still_answers_after_the_fuzzing(served: Served) -> None:
    before = served.posted()
    body = json.dumps(event_body(mention_event("deploy api")))
    headers = {"Content-Type": "application/json", **signed_headers(body)}
    assert served.post(body.encode(), headers) == 200
    assert served.posted() > before
