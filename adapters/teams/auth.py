"""Who may post to /api/messages: Bot Framework JWTs, checked locally first.

The SDK's check fetches OpenID metadata with a blocking ``requests.get`` before
it looks at expiry or audience, so a token that is plainly unacceptable
(missing, not a JWT, expired, for another bot or another service URL) is
rejected here without any network. The SDK check then runs on the event loop
while it needs no network (the metadata and keys are cached: a check is then a
signature check, a fraction of a millisecond), and a fetch it would make there
is refused (``MetadataNeeded``): the check then runs off the loop, on a few
threads of its own (``CheckPool``), so a metadata endpoint that hangs can tie up
only those, never the loop or the default executor the rest of the bot uses
(database tools, token prefetch). The pool refuses work when it is full rather
than queueing it, runs one check per signing key at a time (the first one
fetches the metadata, the others then find it cached), and the SDK's metadata
fetch itself gets a timeout (``METADATA_HTTP``).

Outbound, the SDK builds new credentials (a new MSAL app with an empty token
cache) for every connector, i.e. a blocking token request per message sent.
``ReusedCredentials`` keeps them per app id and scope, and ``prefetch_token``
refreshes the token in a worker thread before a send. The connectors themselves
come out of the SDK's authentication too: tuned for the adapter's limits
(``limits.TunedConnectors``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, TypeVar

import jwt
import requests
from botbuilder.integration.aiohttp import (
    ConfigurationBotFrameworkAuthentication,
    ConfigurationServiceClientCredentialFactory,
)
from botbuilder.schema import Activity
from botframework.connector.auth import (
    AuthenticateRequestResult,
    AuthenticationConstants,
    ChannelValidation,
    ClaimsIdentity,
    ConnectorFactory,
    EmulatorValidation,
    ServiceClientCredentialsFactory,
    SkillValidation,
)
from botframework.connector.auth import jwt_token_extractor as _sdk_extractor

from bot import Undeliverable, is_loopback_url

from .limits import Limits, TunedConnectors
from .settings import TeamsSettings

log = logging.getLogger(__name__)

ALGORITHMS: Final = ("RS256",)
"""What the SDK verifies signatures with; any other ``alg`` cannot pass."""

CLOCK_SKEW: Final = 300.0
"""The SDK's clock tolerance (s): a token it would accept is never refused here."""

SDK_AUTH_TIMEOUT: Final = 15.0
"""Upper bound (s) on the SDK's check, which may fetch OpenID metadata and keys."""

AUTH_WORKERS: Final = 3
TOKEN_TIMEOUT: Final = 20.0
"""Seconds an outbound token request may take before the send reports a failure."""
_TOKEN_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="teams-token")
"""Threads for the SDK's checks; when all are busy, further tokens are refused (401)."""

METADATA_FETCH_TIMEOUT: Final = (5.0, 10.0)
"""(connect, read) timeouts (s) given to the SDK's OpenID metadata and key requests."""

T = TypeVar("T")


class Unauthorized(Exception):
    """The request does not carry an acceptable Bot Framework token."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PoolSaturated(Exception):
    """Every check thread is busy: the work is refused, not queued."""


class MetadataNeeded(Exception):
    """The SDK's check would fetch OpenID metadata or keys, which the event loop never does."""


_ON_LOOP: ContextVar[bool] = ContextVar("teams_auth_on_loop", default=False)
"""Set while the SDK's check runs on the event loop, where a metadata fetch is refused."""


@dataclass(frozen=True)
class _SdkConfiguration:
    """The attribute names ``ConfigurationBotFrameworkAuthentication`` reads."""

    APP_ID: str
    APP_PASSWORD: str
    APP_TYPE: str
    APP_TENANTID: str


@dataclass(frozen=True)
class LocalToken:
    """What the local check read from a token (unverified: nothing here is trusted)."""

    header: dict[str, Any]
    claims: dict[str, Any]
    auth_header: str = ""
    """The ``Authorization`` header it was read from."""

    @property
    def signing_key(self) -> str:
        """Issuer and key id: tokens that need the same OpenID metadata and key."""
        return f"{self.claims.get('iss')}#{self.header.get('kid')}"


class TeamsAuth:
    """Authentication for one bot registration (or none, for local testing).

    Args:
        limits: What the connectors the SDK makes keep to (see ``limits``).
    """

    def __init__(self, settings: TeamsSettings, *, limits: Limits | None = None) -> None:
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
        self.framework = _Framework(
            configuration, credentials_factory=self.credentials, limits=limits or Limits()
        )
        self.check_timeout = SDK_AUTH_TIMEOUT
        """Seconds a request waits for the SDK's check before it is refused."""
        self.checks = CheckPool(AUTH_WORKERS)
        # On the loop only where a fetch there can be refused (our ``requests`` in the SDK).
        self._checks_on_loop = self.enabled and install_metadata_timeout()

    async def prefetch_token(self) -> None:
        """Make sure the bot's outbound token is fresh, fetching it off the event loop,
        before anything is sent with it.

        Raises:
            Undeliverable: Entra gave no token (a wrong app password or tenant, Entra
                out of reach): nothing can be sent.
        """
        if not self.enabled:
            return
        try:
            await self.credentials.prefetch(self.app_id)
        except Exception as exc:  # MSAL and the SDK raise many kinds: each is one line
            reason = str(exc) or type(exc).__name__
            raise Undeliverable(f"no Bot Framework token for app {self.app_id}: {reason}") from None

    def precheck(self, auth_header: str) -> LocalToken | None:
        """Reject what can be rejected without the network or the request body; what
        was read, for ``authenticate`` (``None`` without authentication).

        Raises:
            Unauthorized: The header is missing or malformed, or the token is
                expired, not yet valid, or for another audience.
        """
        if not self.enabled:
            return None
        return check_token_locally(auth_header, self.app_id)

    async def authenticate(
        self, activity: Activity, auth_header: str, *, prechecked: LocalToken | None = None
    ) -> AuthenticateRequestResult:
        """The SDK's verdict on the request (signature, issuer, endorsements, service URL).

        Without an app id every request is anonymous and the header is ignored.
        ``prechecked``: what ``precheck`` read from the same header (not read again).

        Raises:
            Unauthorized: The token fails a local check (the service URL
                included), the SDK refused it or could not check it in time, or
                every check thread is busy.
        """
        if not self.enabled:
            # Nothing vouches for the service URL: answering anywhere it says would
            # let anyone make the bot post to any host. Local testing is local.
            if not is_loopback_url(activity.service_url or ""):
                raise Unauthorized("without authentication only a local serviceUrl is answered")
            return await self.framework.authenticate_request(activity, "")
        token = prechecked
        if token is None or token.auth_header != auth_header:
            token = check_token_locally(auth_header, self.app_id)
        # Before the SDK's check (it checks a channel token's service URL too): a token
        # for another service URL is refused here, and never costs a fetch.
        check_service_url(token, activity.service_url)
        if self._checks_on_loop:
            try:
                return await self._check_on_loop(activity, auth_header)
            except MetadataNeeded:
                pass  # fetched in the pool, once per signing key at a time

        def check() -> AuthenticateRequestResult:
            # Its own event loop in a pool thread: the blocking fetch stalls only this.
            verdict: AuthenticateRequestResult = asyncio.run(
                self.framework.authenticate_request(activity, auth_header)
            )
            return verdict

        try:
            result = await self.checks.run(token.signing_key, check, within=self.check_timeout)
        except PoolSaturated as exc:
            log.warning("all %d Teams token check threads are busy; refusing", self.checks.workers)
            raise Unauthorized("token checks saturated") from exc
        except TimeoutError as exc:
            log.error("verifying a Teams token took over %.1f s; refusing it", self.check_timeout)
            raise Unauthorized("token check timed out") from exc
        except Exception as exc:
            raise _refusal(exc) from exc
        return result

    async def _check_on_loop(
        self, activity: Activity, auth_header: str
    ) -> AuthenticateRequestResult:
        """The SDK's check right here, unless it would fetch (``MetadataNeeded``).

        Raises:
            MetadataNeeded: The metadata or a key is not cached (or is stale).
            Unauthorized: The SDK refused the token.
        """
        on_loop = _ON_LOOP.set(True)
        try:
            verdict: AuthenticateRequestResult = await self.framework.authenticate_request(
                activity, auth_header
            )
        except MetadataNeeded:
            raise
        except Exception as exc:
            raise _refusal(exc) from exc
        finally:
            _ON_LOOP.reset(on_loop)
        return verdict

    def close(self) -> None:
        """Stop taking checks; a thread still hanging ends with its fetch's timeout."""
        self.checks.close()


def _refusal(exc: Exception) -> Unauthorized:
    """Why the SDK's check refused a token (or could not check it)."""
    if isinstance(exc, PermissionError):
        return Unauthorized(f"refused by the Bot Framework check: {exc}")
    if isinstance(exc, jwt.PyJWTError):
        return Unauthorized(f"invalid token: {exc}")
    # An unknown key id, unreachable OpenID metadata, a malformed claim...
    log.error("could not verify a Teams token: %r", exc)
    return Unauthorized(f"token check failed: {exc!r}")


class _Framework(ConfigurationBotFrameworkAuthentication):  # type: ignore[misc]
    """The SDK's authentication, whose connectors (for a turn's replies and for every
    proactive call) are made by ``TunedConnectors``."""

    def __init__(
        self,
        configuration: _SdkConfiguration,
        *,
        credentials_factory: ServiceClientCredentialsFactory,
        limits: Limits,
    ) -> None:
        super().__init__(configuration, credentials_factory=credentials_factory)
        self._limits = limits

    async def authenticate_request(
        self, activity: Activity, auth_header: str
    ) -> AuthenticateRequestResult:
        result: AuthenticateRequestResult = await super().authenticate_request(
            activity, auth_header
        )
        if result.connector_factory is not None:
            result.connector_factory = TunedConnectors(result.connector_factory, self._limits)
        return result

    def create_connector_factory(self, claims_identity: ClaimsIdentity) -> ConnectorFactory:
        return TunedConnectors(super().create_connector_factory(claims_identity), self._limits)


class CheckPool:
    """A few threads of its own for blocking checks, one check per key at a time.

    A caller that finds a check of its key running waits for it (its result is
    not shared: the caller then runs its own check, which finds the metadata
    the first one fetched). When every thread is busy the work is refused with
    ``PoolSaturated``: a hung endpoint costs at most ``workers`` threads and
    never a queue of requests behind them.
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="teams-auth")
        self._lock = threading.Lock()
        self._busy = 0
        self._running: dict[str, asyncio.Future[Any]] = {}

    @property
    def busy(self) -> int:
        """Threads running a check right now (a timed-out check counts until it ends)."""
        with self._lock:
            return self._busy

    async def run(self, key: str, fn: Callable[[], T], *, within: float) -> T:
        """``fn()`` on a pool thread, waiting ``within`` seconds in all.

        Raises:
            PoolSaturated: Every thread is busy.
            TimeoutError: The check of this key before it, or this one, took too long.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while (running := self._running.get(key)) is not None:
            await asyncio.wait({running}, timeout=max(0.0, deadline - loop.time()))
            if not running.done():
                raise TimeoutError(f"the check before this one for {key} is still running")
        with self._lock:
            if self._busy >= self.workers:
                raise PoolSaturated(f"all {self.workers} check threads are busy")
            self._busy += 1
        try:
            future: asyncio.Future[T] = asyncio.wrap_future(
                self._executor.submit(self._counted, fn), loop=loop
            )
        except BaseException:
            self._release()
            raise
        self._running[key] = future
        future.add_done_callback(partial(self._forget, key))
        await asyncio.wait({future}, timeout=max(0.0, deadline - loop.time()))
        if not future.done():
            raise TimeoutError(f"the check for {key} is still running")
        return future.result()

    def close(self) -> None:
        """Refuse new checks and drop queued ones; running ones finish on their own."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _counted(self, fn: Callable[[], T]) -> T:
        # Released in the thread itself: the slot is free exactly when the thread is.
        try:
            return fn()
        finally:
            self._release()

    def _release(self) -> None:
        with self._lock:
            self._busy -= 1

    def _forget(self, key: str, future: asyncio.Future[Any]) -> None:
        if self._running.get(key) is future:
            del self._running[key]
        if not future.cancelled():
            future.exception()  # retrieved: a timed-out caller may never look at it


class _TimedRequests:
    """Stands in for ``requests`` in the SDK's OpenID metadata code: ``get`` with a timeout.

    The SDK calls ``requests.get(url)`` without one, so a metadata endpoint that
    accepts and never answers would hold a check thread forever. On the event loop
    (``TeamsAuth`` checks there what needs no network) it refuses to fetch at all.
    """

    def __init__(self, timeout: float | tuple[float, float] | None) -> None:
        self.timeout = timeout

    def get(self, url: str, **kwargs: Any) -> requests.Response:
        if _ON_LOOP.get():
            raise MetadataNeeded(url)
        kwargs.setdefault("timeout", self.timeout)
        return requests.get(url, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(requests, name)


METADATA_HTTP: Final = _TimedRequests(METADATA_FETCH_TIMEOUT)
"""What the SDK's metadata code calls ``requests``; its ``timeout`` applies to every fetch."""


def install_metadata_timeout() -> bool:
    """Give the SDK's OpenID metadata fetches a timeout (idempotent); whether they have it
    (and so can be refused on the event loop)."""
    current = getattr(_sdk_extractor, "requests", None)
    if current is METADATA_HTTP:
        return True
    if current is not requests:
        log.warning(
            "botframework's OpenID metadata code no longer uses requests.get: its fetches "
            "have no timeout of ours (the check pool still bounds them)"
        )
        return False
    _sdk_extractor.requests = METADATA_HTTP
    return True


def check_token_locally(
    auth_header: str,
    app_id: str,
    *,
    service_url: str | None = None,
    now: float | None = None,
) -> LocalToken:
    """Check the parts of a Bot Framework token that need no keys.

    Args:
        auth_header: The request's ``Authorization`` header.
        app_id: The bot's app id, the audience every token must name.
        service_url: The activity's ``serviceUrl``, which a channel token's
            ``serviceurl`` claim must equal (as the SDK requires); ``None``
            before the body is read.
        now: The time to check expiry against (default: now).

    Raises:
        Unauthorized: Why the token cannot be accepted.
    """
    scheme, _, token = auth_header.partition(" ")
    if scheme != "Bearer" or not token or " " in token:
        raise Unauthorized("missing or malformed Authorization header")
    try:
        decoded = jwt.decode_complete(token, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise Unauthorized(f"not a JWT: {exc}") from exc
    header: dict[str, Any] = decoded["header"]
    claims: dict[str, Any] = decoded["payload"]
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
    read = LocalToken(header=header, claims=claims, auth_header=auth_header)
    return check_service_url(read, service_url)


def check_service_url(token: LocalToken, service_url: str | None) -> LocalToken:
    """A channel token must name the activity's ``serviceUrl`` (as the SDK requires);
    ``None``: not known yet (the body is not read), not checked.

    Raises:
        Unauthorized: It names another.
    """
    if (
        service_url is not None
        and _is_channel_token(token.auth_header)
        and token.claims.get(ChannelValidation.SERVICE_URL_CLAIM) != service_url
    ):
        raise Unauthorized("token is for another service URL")
    return token


def _is_channel_token(auth_header: str) -> bool:
    """Whether the SDK checks this token as a channel's, i.e. with its ``serviceurl`` claim.

    Skill and Emulator tokens carry no service URL; the SDK tells them apart
    by their claims, and so does this (with the SDK's own tests).
    """
    try:
        return not (
            SkillValidation.is_skill_token(auth_header)
            or EmulatorValidation.is_token_from_emulator(auth_header)
        )
    except Exception:
        return True  # the SDK fails on such a token too


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
        # MSAL's token request has no timeout of its own: a pool of its own keeps a
        # hung login from starving the default executor, and the wait is bounded.
        loop = asyncio.get_running_loop()
        fetch = loop.run_in_executor(_TOKEN_POOL, credentials.get_access_token)
        await asyncio.wait_for(fetch, TOKEN_TIMEOUT)
