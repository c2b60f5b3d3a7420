"""Bot Framework authentication at /api/messages: real RS256 tokens, local OpenID metadata.

The metadata and keys are served from this test's own event loop: the adapter
runs the SDK's blocking metadata fetch in a worker thread, so serving them here
also proves the fetch does not block the loop.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import jwt
import pytest
from aiohttp import web
from botframework.connector.auth import ChannelValidation
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from adapters.teams.auth import ReusedCredentials, TeamsAuth
from bot import messages as core_messages
from bot.settings import load_settings

from . import activities as act
from .conftest import MakeBot, TeamsBot
from .fake_connector import FakeConnector

APP_ID = "5f0c6a9e-1111-4222-8333-944445555666"
ISSUER = "https://api.botframework.com"
KEY_ID = "test-key-1"


@dataclass
class OpenIdServer:
    """OpenID metadata + JWKS for one signing key; counts how often it is asked."""

    key: rsa.RSAPrivateKey
    url: str = ""
    requests: list[str] = field(default_factory=list)


@pytest.fixture
async def openid(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[OpenIdServer]:
    server = OpenIdServer(key=rsa.generate_private_key(public_exponent=65537, key_size=2048))
    jwk = json.loads(RSAAlgorithm.to_jwk(server.key.public_key()))
    jwk.update(kid=KEY_ID, use="sig", endorsements=["msteams"])

    async def metadata(request: web.Request) -> web.Response:
        server.requests.append(request.path)
        return web.json_response({"issuer": ISSUER, "jwks_uri": f"{server.url}/keys"})

    async def keys(request: web.Request) -> web.Response:
        server.requests.append(request.path)
        return web.json_response({"keys": [jwk]})

    app = web.Application()
    app.router.add_get("/.well-known/openidconfiguration", metadata)
    app.router.add_get("/keys", keys)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    # The SDK's setting for where channel tokens' OpenID metadata lives.
    monkeypatch.setattr(
        ChannelValidation,
        "open_id_metadata_endpoint",
        f"{server.url}/.well-known/openidconfiguration",
    )
    yield server
    await runner.cleanup()


@pytest.fixture
async def teams(make_bot: MakeBot) -> TeamsBot:
    return await make_bot(
        settings=load_settings(microsoft_app_id=APP_ID, microsoft_app_password="not-a-real-secret")
    )


def make_token(
    key: rsa.RSAPrivateKey,
    service_url: str,
    *,
    audience: str = APP_ID,
    issuer: str = ISSUER,
    expires_in: float = 3600,
    kid: str | None = KEY_ID,
) -> str:
    now = time.time()
    claims = {
        "iss": issuer,
        "aud": audience,
        "exp": int(now + expires_in),
        "nbf": int(now - 60),
        "serviceurl": service_url,
    }
    headers = {"kid": kid} if kid else {}
    return jwt.encode(claims, key, algorithm="RS256", headers=headers)


def unknown_click(service_url: str) -> dict[str, Any]:
    """A card click on a run that does not exist: answered in the HTTP body, no outgoing call."""
    data = {"kind": "approval", "action": "approve", "run_id": "run-x", "tool_call_id": "call-x"}
    return {
        "type": "invoke",
        "name": "adaptiveCard/action",
        "id": act.next_id(),
        "channelId": "msteams",
        "serviceUrl": service_url,
        "from": act.BOB,
        "recipient": act.BOT,
        "conversation": act.chat_conversation("personal"),
        "replyToId": "act-1",
        "value": {"action": {"type": "Action.Execute", "verb": "approve", "data": data}},
    }


async def test_a_signed_channel_token_is_accepted(
    teams: TeamsBot, openid: OpenIdServer, connector: FakeConnector
) -> None:
    token = make_token(openid.key, connector.url)
    answer = await teams.post(
        unknown_click(connector.url), headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status == 200
    assert answer.body == {
        "statusCode": 200,
        "type": "application/vnd.microsoft.activity.message",
        "value": core_messages.CLICK_UNKNOWN,
    }
    assert openid.requests == ["/.well-known/openidconfiguration", "/keys"]
    # The SDK asked for exactly the credentials the adapter prefetches tokens for.
    assert teams.adapter.auth.credentials.keys() == [
        (APP_ID, "https://api.botframework.com", "https://login.microsoftonline.com/", True)
    ]


@pytest.mark.parametrize(
    "header",
    [
        pytest.param(None, id="no-header"),
        pytest.param("Basic dXNlcjpwYXNz", id="not-bearer"),
        pytest.param("Bearer not-a-jwt", id="not-a-jwt"),
        pytest.param("expired", id="expired"),
        pytest.param("wrong-audience", id="wrong-audience"),
        pytest.param("no-key-id", id="no-key-id"),
    ],
)
async def test_tokens_that_cannot_pass_are_refused_without_fetching_keys(
    teams: TeamsBot, openid: OpenIdServer, connector: FakeConnector, header: str | None
) -> None:
    tokens = {
        "expired": make_token(openid.key, connector.url, expires_in=-3600),
        "wrong-audience": make_token(openid.key, connector.url, audience="another-bot"),
        "no-key-id": make_token(openid.key, connector.url, kid=None),
    }
    if header in tokens:
        header = f"Bearer {tokens[header]}"
    headers = {} if header is None else {"Authorization": header}
    answer = await teams.post(unknown_click(connector.url), headers=headers)
    assert answer.status == 401
    assert openid.requests == []
    assert connector.calls == []


async def test_a_token_signed_by_another_key_is_refused(
    teams: TeamsBot, openid: OpenIdServer, connector: FakeConnector
) -> None:
    impostor = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = make_token(impostor, connector.url)
    answer = await teams.post(
        unknown_click(connector.url), headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status == 401


async def test_a_token_for_another_service_url_is_refused(
    teams: TeamsBot, openid: OpenIdServer, connector: FakeConnector
) -> None:
    token = make_token(openid.key, "https://smba.example.invalid/")
    answer = await teams.post(
        unknown_click(connector.url), headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status == 401


async def test_a_token_from_another_issuer_is_refused(
    teams: TeamsBot, openid: OpenIdServer, connector: FakeConnector
) -> None:
    token = make_token(openid.key, connector.url, issuer="https://evil.example.invalid")
    answer = await teams.post(
        unknown_click(connector.url), headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status == 401


async def test_unreachable_openid_metadata_is_a_401_not_a_5xx(
    teams: TeamsBot,
    openid: OpenIdServer,
    connector: FakeConnector,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    monkeypatch.setattr(
        ChannelValidation, "open_id_metadata_endpoint", f"http://127.0.0.1:{closed_port}/meta"
    )
    token = make_token(openid.key, connector.url)
    answer = await teams.post(
        unknown_click(connector.url), headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status == 401


async def test_allow_unauthenticated_does_not_switch_off_auth_when_an_app_id_is_set(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot(
        settings=load_settings(
            microsoft_app_id=APP_ID,
            microsoft_app_password="not-a-real-secret",
            teams_allow_unauthenticated=True,
        )
    )
    answer = await teams.post(unknown_click(connector.url))
    assert answer.status == 401


async def test_without_an_app_id_the_header_is_ignored(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    answer = await teams.post(
        unknown_click(connector.url), headers={"Authorization": "Bearer whatever"}
    )
    assert answer.status == 200


class CountingCredentials:
    """Stands in for MicrosoftAppCredentials: records where tokens are fetched."""

    def __init__(self) -> None:
        self.fetched_in: list[int] = []

    def get_access_token(self, force_refresh: bool = False) -> str:
        self.fetched_in.append(threading.get_ident())
        return "token"


class CountingFactory:
    def __init__(self) -> None:
        self.made: list[CountingCredentials] = []

    async def create_credentials(
        self, app_id: str, oauth_scope: str, login_endpoint: str, validate_authority: bool
    ) -> CountingCredentials:
        self.made.append(CountingCredentials())
        return self.made[-1]


async def test_outbound_credentials_are_reused_and_tokens_fetched_off_the_loop() -> None:
    inner = CountingFactory()
    reused = ReusedCredentials(inner)
    args = (APP_ID, "https://api.botframework.com", "https://login.microsoftonline.com/", True)
    first = await reused.create_credentials(*args)
    assert await reused.create_credentials(*args) is first
    await reused.prefetch(APP_ID)
    assert len(inner.made) == 1
    assert first.fetched_in
    assert threading.get_ident() not in first.fetched_in


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"microsoft_app_type": "MultiTenant"}, id="multi-tenant"),
        pytest.param(
            {"microsoft_app_type": "SingleTenant", "microsoft_app_tenant_id": "tenant-1"},
            id="single-tenant",
        ),
        pytest.param(
            {
                "microsoft_app_type": "UserAssignedMSI",
                "microsoft_app_tenant_id": "tenant-1",
                "microsoft_app_password": None,
            },
            id="user-assigned-msi",
        ),
    ],
)
def test_every_app_type_configures_authentication_without_the_network(
    overrides: dict[str, Any],
) -> None:
    settings = load_settings(
        **{"microsoft_app_id": APP_ID, "microsoft_app_password": "secret", **overrides}
    )
    auth = TeamsAuth(settings)
    assert auth.enabled
    assert auth.app_id == APP_ID
