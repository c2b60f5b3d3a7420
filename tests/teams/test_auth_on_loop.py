"""A token whose signing key is cached is checked on the event loop; a fetch never is.

The SDK's check is a signature check once its OpenID metadata and keys are
cached: it runs right where the request is, not in a thread. Only a check that
would fetch (the first, a stale cache) goes to the auth threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from adapters.teams.auth import CheckPool

from . import test_auth
from .conftest import TeamsBot
from .fake_connector import FakeConnector
from .signing import OpenIdServer, make_token
from .test_auth import unknown_click

# The same signed bot and key server as the rest of the auth tests.
openid = test_auth.openid
teams = test_auth.teams


@pytest.fixture
def pool_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The signing keys of the checks that went to the auth threads."""
    keys: list[str] = []
    run = CheckPool.run

    async def counted(self: CheckPool, key: str, fn: Callable[[], Any], *, within: float) -> Any:
        keys.append(key)
        return await run(self, key, fn, within=within)

    monkeypatch.setattr(CheckPool, "run", counted)
    return keys


async def test_once_the_keys_are_cached_tokens_are_checked_without_a_thread(
    teams: TeamsBot, openid: OpenIdServer, connector: FakeConnector, pool_checks: list[str]
) -> None:
    headers = {"Authorization": f"Bearer {make_token(openid.key, connector.url)}"}
    first = await teams.post(unknown_click(connector.url), headers=headers)
    assert first.status == 200
    assert len(pool_checks) == 1  # the first fetched the metadata, in a thread
    answers = await asyncio.gather(
        *(teams.post(unknown_click(connector.url), headers=headers) for _ in range(10))
    )
    assert [a.status for a in answers] == [200] * 10
    assert len(pool_checks) == 1
    assert openid.requests == ["/.well-known/openidconfiguration", "/keys"]


async def test_a_token_for_another_service_url_is_refused_on_the_loop_too(
    teams: TeamsBot, openid: OpenIdServer, connector: FakeConnector, pool_checks: list[str]
) -> None:
    good = {"Authorization": f"Bearer {make_token(openid.key, connector.url)}"}
    assert (await teams.post(unknown_click(connector.url), headers=good)).status == 200
    elsewhere = make_token(openid.key, "https://smba.trafficmanager.net/elsewhere/")
    answer = await teams.post(
        unknown_click(connector.url), headers={"Authorization": f"Bearer {elsewhere}"}
    )
    assert answer.status == 401
    assert len(pool_checks) == 1
    assert connector.calls == []


async def test_a_forged_signature_is_refused_on_the_loop(
    teams: TeamsBot, openid: OpenIdServer, connector: FakeConnector, pool_checks: list[str]
) -> None:
    good = {"Authorization": f"Bearer {make_token(openid.key, connector.url)}"}
    assert (await teams.post(unknown_click(connector.url), headers=good)).status == 200
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = make_token(forger, connector.url)  # the same key id, another key
    answer = await teams.post(
        unknown_click(connector.url), headers={"Authorization": f"Bearer {forged}"}
    )
    assert answer.status == 401
    assert len(pool_checks) == 1
