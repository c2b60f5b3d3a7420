"""Who may post to /api/messages: Bot Framework JWTs, checked locally first.

The SDK's check fetches OpenID metadata with a blocking ``requests.get`` before
it looks at expiry or audience, so a token that is plainly unacceptable
(missing, not a JWT, expired, for another bot) is rejected here without any
network; the SDK check then runs in a worker thread, off the event loop.

Outbound, the SDK builds new credentials (a new MSAL app with an empty token
cache) for every connector, i.e. a blocking token request per message sent.
``ReusedCredentials`` keeps them per app id and scope, and ``prefetch_token``
refreshes the token in a worker thread before a send.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Final

import jwt
from botbuilder.integration.aiohttp import (
    ConfigurationBotFrameworkAuthentication,
    ConfigurationServiceClientCredentialFactory,
)
from botbuilder.schema import Activity
from botframework.connector.auth import (
    AuthenticateRequestResult,
    AuthenticationConstants,
    ServiceClientCredentialsFactory,
)

from bot.settings import Settings

log = logging.getLogger(__name__)

ALGORITHMS: Final = ("RS256",)
"""What the SDK verifies signatures with; any other ``alg`` cannot pass."""

CLOCK_SKEW: Final = 300.0
"""The SDK's clock tolerance (s): a token it would accept is never refused here."""

SDK_AUTH_TIMEOUT: Final = 15.0
"""Upper bound (s) on the SDK's check, which may fetch OpenID metadata and keys."""


class Unauthorized(Exception):
    """The request does not carry an acceptable Bot Framework token."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class _SdkConfiguration:
    """The attribute names ``ConfigurationBotFrameworkAuthentication`` reads."""

    APP_ID: str
    APP_PASSWORD: str
    APP_TYPE: str
    APP_TENANTID: str


class TeamsAuth:
    """Authentication for one bot registration (or none, for local testing)."""

    def __init__(self, settings: Settings) -> None:
        self.app_id = settings.microsoft_app_id or ""
        self.enabled = bool(self.app_id)
        configuration = _SdkConfiguration(
            APP_ID=self.app_id,
            APP_PASSWORD=settings.microsoft_app_password or "",
            APP_TYPE=settings.microsoft_app_type if self.enabled else "MultiTenant",
            APP_TENANTID=settings.microsoft_app_tenant_id or "",
        )
        self.credentials = ReusedCredentials(
            ConfigurationServiceClientCredentialFactory(configuration)
        )
        self.framework = ConfigurationBotFrameworkAuthentication(
            configuration, credentials_factory=self.credentials
        )

    async def prefetch_token(self) -> None:
        """Make sure the bot's outbound token is fresh, fetching it off the event loop.

        A failure is logged, not raised: the send that follows reports it.
        """
        if not self.enabled:
            return
        try:
            await self.credentials.prefetch(self.app_id)
        except Exception as exc:
            log.warning("could not get a Bot Framework token for app %s: %r", self.app_id, exc)

    def precheck(self, auth_header: str) -> None:
        """Reject what can be rejected without the network.

        Raises:
            Unauthorized: The header is missing or malformed, or the token is
                expired, not yet valid, or for another audience.
        """
        if self.enabled:
            check_token_locally(auth_header, self.app_id)

    async def authenticate(self, activity: Activity, auth_header: str) -> AuthenticateRequestResult:
        """The SDK's verdict on the request (signature, issuer, endorsements, service URL).

        Without an app id every request is anonymous and the header is ignored.

        Raises:
            Unauthorized: The SDK refused the token or could not check it.
        """
        if not self.enabled:
            return await self.framework.authenticate_request(activity, "")

        def check() -> AuthenticateRequestResult:
            # Its own event loop in a worker thread: the blocking fetch stalls only this.
            verdict: AuthenticateRequestResult = asyncio.run(
                self.framework.authenticate_request(activity, auth_header)
            )
            return verdict

        try:
            result = await asyncio.wait_for(asyncio.to_thread(check), SDK_AUTH_TIMEOUT)
        except PermissionError as exc:
            raise Unauthorized(f"refused by the Bot Framework check: {exc}") from exc
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"invalid token: {exc}") from exc
        except TimeoutError as exc:
            log.error("verifying a Teams token took over %.0f s; refusing it", SDK_AUTH_TIMEOUT)
            raise Unauthorized("token check timed out") from exc
        except Exception as exc:
            # An unknown key id, unreachable OpenID metadata, a malformed claim...
            log.error("could not verify a Teams token: %r", exc)
            raise Unauthorized(f"token check failed: {exc!r}") from exc
        return result


def check_token_locally(auth_header: str, app_id: str, *, now: float | None = None) -> None:
    """Check the parts of a Bot Framework token that need no keys.

    Raises:
        Unauthorized: Why the token cannot be accepted.
    """
    scheme, _, token = auth_header.partition(" ")
    if scheme != "Bearer" or not token or " " in token:
        raise Unauthorized("missing or malformed Authorization header")
    try:
        header = jwt.get_unverified_header(token)
        claims: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise Unauthorized(f"not a JWT: {exc}") from exc
    if header.get("alg") not in ALGORITHMS:
        raise Unauthorized(f"signing algorithm {header.get('alg')!r} is not accepted")
    if not header.get("kid"):
        raise Unauthorized("token names no signing key")
    now = time.time() if now is None else now
    expires = claims.get("exp")
    if not isinstance(expires, int | float) or isinstance(expires, bool):
        raise Unauthorized("token has no expiry")
    if expires + CLOCK_SKEW < now:
        raise Unauthorized("token expired")
    not_before = claims.get("nbf")
    if isinstance(not_before, int | float) and not_before - CLOCK_SKEW > now:
        raise Unauthorized("token is not valid yet")
    if claims.get("aud") != app_id:
        raise Unauthorized("token is for another audience")


class ReusedCredentials(ServiceClientCredentialsFactory):  # type: ignore[misc]
    """Hands out one credentials object per app id and scope, so its token cache lives on."""

    def __init__(self, inner: ServiceClientCredentialsFactory) -> None:
        self._inner = inner
        self._made: dict[tuple[str, str, str, bool], Any] = {}

    async def is_valid_app_id(self, app_id: str) -> bool:
        return bool(await self._inner.is_valid_app_id(app_id))

    async def is_authentication_disabled(self) -> bool:
        return bool(await self._inner.is_authentication_disabled())

    async def create_credentials(
        self, app_id: str, oauth_scope: str, login_endpoint: str, validate_authority: bool
    ) -> Any:
        key = (app_id, oauth_scope, login_endpoint, validate_authority)
        if key not in self._made:
            self._made[key] = await self._inner.create_credentials(
                app_id, oauth_scope, login_endpoint, validate_authority
            )
        return self._made[key]

    def keys(self) -> list[tuple[str, str, str, bool]]:
        """(app id, scope, login endpoint, validate authority) of every credentials made."""
        return list(self._made)

    async def prefetch(self, app_id: str) -> None:
        """Fetch (or find cached) the token for sending to channels, in a worker thread."""
        credentials = await self.create_credentials(
            app_id,
            AuthenticationConstants.TO_CHANNEL_FROM_BOT_OAUTH_SCOPE,
            AuthenticationConstants.TO_CHANNEL_FROM_BOT_LOGIN_URL_PREFIX,
            True,
        )
        await asyncio.to_thread(credentials.get_access_token)
