"""Fuzzing /api/messages (hypothesis): random and mutated activities and headers.

Every answer is 2xx or 4xx, the server stays up, and the bot posts only to the
local connector, only for activities it may answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.background import BackgroundLoop, background_loop
from tests.fuzzing import FUZZ, HEADER_TEXT, JSON, mutate, post

from . import activities as act
from .conftest import TeamsBot, start_teams_bot
from .fake_connector import FakeConnector


@dataclass
class Served:
    loop: BackgroundLoop
    connector: FakeConnector
    teams: TeamsBot

    def post(self, body: bytes, headers: dict[str, str] | None = None) -> int:
        wire = {"Content-Type": "application/json", **(headers or {})}
        return post(f"{self.teams.url}/api/messages", body, wire)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with background_loop() as loop:
        connector = loop.run(FakeConnector().start())
        teams = loop.run(start_teams_bot())
        try:
            yield Served(loop, connector, teams)
        finally:
            loop.run(teams.bot.drain())
            loop.run(teams.close())
            loop.run(connector.close())


PATHS = [
    ["type"],
    ["text"],
    ["from"],
    ["from", "id"],
    ["recipient"],
    ["conversation"],
    ["conversation", "id"],
    ["conversation", "conversationType"],
    ["channelData"],
    ["entities"],
    ["value"],
    ["name"],
    ["timestamp"],
    ["id"],
]


@FUZZ
@given(
    body=st.binary(max_size=300) | JSON.map(lambda v: json.dumps(v).encode()),
    auth=st.none() | HEADER_TEXT.map(lambda s: f"Bearer {s}"),
)
def test_random_bodies_never_5xx(served: Served, body: bytes, auth: str | None) -> None:
    headers = {"Authorization": auth} if auth is not None else None
    assert served.post(body, headers) < 500


@FUZZ
@given(path=st.sampled_from(PATHS), value=JSON, invoke=st.booleans())
def test_mutated_activities_never_5xx_and_post_only_locally(
    served: Served, path: list[Any], value: Any, invoke: bool
) -> None:
    base = act.message(
        served.connector.url, "deploy api", conversation=act.chat_conversation(), mention=True
    )
    if invoke:
        base.update(type="invoke", name="adaptiveCard/action", value={"action": {}})
    body = json.dumps(mutate(base, path, value)).encode()
    assert served.post(body) < 500


@FUZZ
@given(service_url=st.text(max_size=40) | st.sampled_from(["http://10.0.0.1/", "ftp://x"]))
def test_a_foreign_service_url_is_never_answered(served: Served, service_url: str) -> None:
    activity = act.message(
        served.connector.url, "deploy api", conversation=act.chat_conversation(), mention=True
    )
    activity["serviceUrl"] = service_url
    status = served.post(json.dumps(activity).encode())
    assert status < 500
    if "127.0.0.1" not in service_url and "localhost" not in service_url:
        assert status in (400, 401)


def test_the_server_still_answers_after_the_fuzzing(served: Served) -> None:
    served.loop.run(served.teams.bot.drain())
    before = len(served.connector.calls)
    activity = act.message(
        served.connector.url, "deploy api", conversation=act.chat_conversation(), mention=True
    )
    assert served.post(json.dumps(activity).encode()) == 200
    served.loop.run(served.teams.bot.drain())
    assert len(served.connector.calls) > before
