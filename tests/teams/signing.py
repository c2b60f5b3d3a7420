"""Real Bot Framework JWTs for the Teams tests: a local OpenID endpoint and RS256 tokens.

``serve_openid`` serves the OpenID metadata and the signing key from the test's
own event loop (the SDK fetches them with a blocking ``requests.get`` in a
worker thread, so serving them here also proves the fetch does not block the
loop) and points the SDK's channel validation at it.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import jwt
import pytest
from aiohttp import web
from botframework.connector.auth import ChannelValidation
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

APP_ID = "5f0c6a9e-1111-4222-8333-944445555666"
ISSUER = "https://api.botframework.com"
KEY_ID = "test-key-1"


@dataclass
class OpenIdServer:
    """OpenID metadata + JWKS for one signing key; counts how often it is asked."""

    key: rsa.RSAPrivateKey
    url: str = ""
    requests: list[str] = field(default_factory=list)
    """The paths asked for, below ``url``."""


@asynccontextmanager
async def serve_openid(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[OpenIdServer]:
    """A local OpenID endpoint the SDK checks channel tokens against, while it runs."""
    server = OpenIdServer(key=rsa.generate_private_key(public_exponent=65537, key_size=2048))
    jwk = json.loads(RSAAlgorithm.to_jwk(server.key.public_key()))
    jwk.update(kid=KEY_ID, use="sig", endorsements=["msteams"])

    # The SDK caches metadata and keys by URL for the whole process: a path of its
    # own keeps a server on a port an earlier test used from finding that one's key.
    prefix = f"/{secrets.token_hex(8)}"

    async def metadata(request: web.Request) -> web.Response:
        server.requests.append(request.path.removeprefix(prefix))
        return web.json_response({"issuer": ISSUER, "jwks_uri": f"{server.url}/keys"})

    async def keys(request: web.Request) -> web.Response:
        server.requests.append(request.path.removeprefix(prefix))
        return web.json_response({"keys": [jwk]})

    app = web.Application()
    app.router.add_get(f"{prefix}/.well-known/openidconfiguration", metadata)
    app.router.add_get(f"{prefix}/keys", keys)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server.url = f"http://127.0.0.1:{runner.addresses[0][1]}{prefix}"
    # The SDK's setting for where channel tokens' OpenID metadata lives.
    monkeypatch.setattr(
        ChannelValidation,
        "open_id_metadata_endpoint",
        f"{server.url}/.well-known/openidconfiguration",
    )
    try:
        yield server
    finally:
        await runner.cleanup()


def make_token(
    key: rsa.RSAPrivateKey,
    service_url: str | None,
    *,
    audience: str = APP_ID,
    issuer: str = ISSUER,
    expires_in: float = 3600,
    kid: str | None = KEY_ID,
    **extra: Any,
) -> str:
    """A channel token as the Bot Framework signs it (``serviceurl`` claim when given)."""
    now = time.time()
    claims = {
        "iss": issuer,
        "aud": audience,
        "exp": int(now + expires_in),
        "nbf": int(now - 60),
        **extra,
    }
    if service_url is not None:
        claims["serviceurl"] = service_url
    headers = {"kid": kid} if kid else {}
    return jwt.encode(claims, key, algorithm="RS256", headers=headers)
