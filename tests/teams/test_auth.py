"""Bot Framework authentication at /api/messages: real RS256 tokens, local OpenID metadata.

The metadata and keys are served from this test's own event loop (``signing``):
the adapter runs the SDK's blocking metadata fetch in a worker thread, so this
also proves the fetch does not block the loop. A metadata server that accepts
connections and never answers shows what a hung endpoint costs: the auth
check's own few threads, never the default executor the rest of the bot uses.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
from botframework.connector.auth import (
    ChannelValidation,
    EmulatorValidation,
    SkillValidation,
    jwt_token_extractor,
)
from cryptography.hazmat.primitives.asymmetric import rsa

from adapters.teams import auth as teams_auth
from adapters.teams import load_teams_settings
from adapters.teams.auth import (
    AUTH_WORKERS,
    ReusedCredentials,
    TeamsAuth,
    Unauthorized,
    check_token_locally,
)
from bot import texts as core_texts

from . import activities as act
from .conftest import MakeBot, TeamsBot
from .fake_connector import FakeConnector
from .signing import APP_ID, OpenIdServer, make_token, serve_openid

UNUSED_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
"""Signs tokens that only the local checks look at."""


@pytest.fixture
async def openid(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[OpenIdServer]:
    async with serve_openid(monkeypatch) as server:
        yield server


@pytest.fixture
async def teams(make_bot: MakeBot) -> TeamsBot:
    return await make_bot(
        settings=load_teams_settings(
            microsoft_app_id=APP_ID,
            microsoft_app_password="not-a-real-secret",
            microsoft_app_tenant_id=act.TENANT,
        )
    )


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
        "value": core_texts.CLICK_UNKNOWN,
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


@pytest.mark.parametrize(
    "service_url",
    [
        pytest.param("https://smba.example.invalid/", id="another-service-url"),
        pytest.param(None, id="no-service-url-claim"),
    ],
)
async def test_a_token_for_another_service_url_is_refused_without_fetching_keys(
    teams: TeamsBot, openid: OpenIdServer, connector: FakeConnector, service_url: str | None
) -> None:
    token = make_token(openid.key, service_url)
    answer = await teams.post(
        unknown_click(connector.url), headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status == 401
    assert openid.requests == []
    assert connector.calls == []


async def test_a_token_from_another_issuer_is_refused_without_fetching_keys(
    teams: TeamsBot, openid: OpenIdServer, connector: FakeConnector
) -> None:
    token = make_token(openid.key, connector.url, issuer="https://evil.example.invalid")
    answer = await teams.post(
        unknown_click(connector.url), headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status == 401
    assert openid.requests == []  # the SDK checks the issuer before it fetches anything
    assert connector.calls == []


def test_the_service_url_is_checked_locally_only_for_channel_tokens() -> None:
    """Emulator and skill tokens carry no ``serviceurl``; the SDK does not ask for one."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    service_url = "https://smba.trafficmanager.net/emea/"
    channel = make_token(key, service_url)
    assert check_token_locally(f"Bearer {channel}", APP_ID, service_url=service_url)
    with pytest.raises(Unauthorized, match="service URL"):
        check_token_locally(f"Bearer {channel}", APP_ID, service_url=service_url + "x")
    with pytest.raises(Unauthorized, match="service URL"):
        check_token_locally(f"Bearer {make_token(key, None)}", APP_ID, service_url=service_url)
    # Before the body is read, there is no service URL to compare with.
    check_token_locally(f"Bearer {make_token(key, None)}", APP_ID)

    emulator_issuer = EmulatorValidation.TO_BOT_FROM_EMULATOR_TOKEN_VALIDATION_PARAMETERS.issuer[0]
    emulator = f"Bearer {make_token(key, None, issuer=emulator_issuer, ver='1.0', appid=APP_ID)}"
    assert EmulatorValidation.is_token_from_emulator(emulator)
    check_token_locally(emulator, APP_ID, service_url=service_url)
    skill = f"Bearer {make_token(key, None, ver='2.0', azp='another-bot-app-id')}"
    assert SkillValidation.is_skill_token(skill)
    check_token_locally(skill, APP_ID, service_url=service_url)


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
        settings=load_teams_settings(
            microsoft_app_id=APP_ID,
            microsoft_app_password="not-a-real-secret",
            microsoft_app_tenant_id=act.TENANT,
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


@pytest.fixture
def network_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every attempt to open a connection or resolve a name, each refused."""
    calls: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        calls.append(repr(args[1:2] or args))
        raise ConnectionRefusedError("this test must not use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return calls


def test_the_network_guard_sees_a_request(network_calls: list[str]) -> None:
    with pytest.raises(requests.ConnectionError):
        requests.get(
            "https://login.microsoftonline.com/common/v2.0/.well-known/openid-configuration"
        )
    assert network_calls


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
    overrides: dict[str, Any], network_calls: list[str]
) -> None:
    settings = load_teams_settings(
        **{"microsoft_app_id": APP_ID, "microsoft_app_password": "secret", **overrides}
    )
    auth = TeamsAuth(settings)
    try:
        assert auth.enabled
        assert auth.app_id == APP_ID
        # The outbound credentials too: made now, their token fetched only before a send.
        credentials = asyncio.run(
            auth.credentials.create_credentials(
                APP_ID, "https://api.botframework.com", "https://login.microsoftonline.com/", True
            )
        )
        assert credentials is not None
        auth.precheck(f"Bearer {make_token(UNUSED_KEY, None)}")
    finally:
        auth.close()
    assert network_calls == []


# -- a metadata endpoint that hangs -------------------------------------------------


@dataclass
class HangingServer:
    """Accepts TCP connections and never answers, until ``release``."""

    url: str
    listener: socket.socket
    connections: list[socket.socket] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def accept_forever(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections.append(conn)

    def release(self) -> None:
        """Close every connection: the fetches hanging on them fail at once."""
        for conn in self.connections:
            conn.close()


@pytest.fixture
def hanging_metadata(monkeypatch: pytest.MonkeyPatch) -> Iterator[HangingServer]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    port = listener.getsockname()[1]
    server = HangingServer(url=f"http://127.0.0.1:{port}/.well-known/openid", listener=listener)
    accepting = threading.Thread(target=server.accept_forever, daemon=True)
    accepting.start()
    monkeypatch.setattr(ChannelValidation, "open_id_metadata_endpoint", server.url)
    yield server
    server.stopping.set()
    accepting.join()
    server.release()
    listener.close()


async def eventually(condition: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_a_hung_metadata_endpoint_ties_up_only_the_auth_threads(
    teams: TeamsBot,
    connector: FakeConnector,
    hanging_metadata: HangingServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The SDK's own behaviour, without our fetch timeout: requests.get waits forever.
    monkeypatch.setattr(teams_auth.METADATA_HTTP, "timeout", None)
    auth = teams.adapter.auth
    auth.check_timeout = 0.5
    # A small default executor, as on a small host: had the checks run there,
    # two hung fetches would leave no thread for the database or token prefetch.
    loop = asyncio.get_running_loop()
    default = ThreadPoolExecutor(max_workers=2)
    loop.set_default_executor(default)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    async def post(kid: str) -> int:
        token = make_token(key, connector.url, kid=kid)
        answer = await teams.post(
            unknown_click(connector.url), headers={"Authorization": f"Bearer {token}"}
        )
        return answer.status

    # Different signing keys, so no check waits for another: the pool fills up.
    statuses = await asyncio.gather(*(post(f"key-{i}") for i in range(2 * AUTH_WORKERS)))

    assert statuses == [401] * (2 * AUTH_WORKERS)
    # The rest of the bot still gets worker threads.
    ran = await asyncio.wait_for(asyncio.to_thread(lambda: "database call"), 2.0)
    assert ran == "database call"
    await eventually(lambda: len(hanging_metadata.connections) == AUTH_WORKERS)
    assert auth.checks.busy == AUTH_WORKERS  # still hanging, each in its own thread
    # A full pool refuses at once instead of queueing behind the hung fetches.
    started = time.monotonic()
    assert await post("key-late") == 401
    assert time.monotonic() - started < auth.check_timeout
    assert len(hanging_metadata.connections) == AUTH_WORKERS
    assert await asyncio.wait_for(asyncio.to_thread(lambda: "still"), 2.0) == "still"
    assert connector.calls == []

    hanging_metadata.release()
    await eventually(lambda: auth.checks.busy == 0)


async def test_one_check_per_signing_key_at_a_time(
    teams: TeamsBot,
    connector: FakeConnector,
    hanging_metadata: HangingServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(teams_auth.METADATA_HTTP, "timeout", None)
    auth = teams.adapter.auth
    auth.check_timeout = 0.5
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = make_token(key, connector.url)

    answers = await asyncio.gather(
        *(
            teams.post(unknown_click(connector.url), headers={"Authorization": f"Bearer {token}"})
            for _ in range(5)
        )
    )

    assert [a.status for a in answers] == [401] * 5
    await asyncio.sleep(0.1)
    assert len(hanging_metadata.connections) == 1  # the others waited for the first
    assert auth.checks.busy == 1
    hanging_metadata.release()
    await eventually(lambda: auth.checks.busy == 0)


async def test_the_metadata_fetch_itself_times_out(
    teams: TeamsBot,
    connector: FakeConnector,
    hanging_metadata: HangingServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert jwt_token_extractor.requests is teams_auth.METADATA_HTTP
    monkeypatch.setattr(teams_auth.METADATA_HTTP, "timeout", 0.2)
    auth = teams.adapter.auth
    assert auth.check_timeout >= 10  # the default: this 401 comes from the fetch's timeout
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = make_token(key, connector.url)

    started = time.monotonic()
    answer = await teams.post(
        unknown_click(connector.url), headers={"Authorization": f"Bearer {token}"}
    )

    assert answer.status == 401
    assert time.monotonic() - started < 5
    assert len(hanging_metadata.connections) == 1
    assert auth.checks.busy == 0  # the thread is free again, not left hanging
