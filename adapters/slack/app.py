"""The Slack adapter: Bolt app, HTTP route, Socket Mode, and the hand-off to the core.

A message or click is acknowledged once the core has it in its durable inbox
(``ChatCore.on_message``/``accept_click``, a store write or two), so an ack is a
promise kept even if this process dies; everything else (the agent, decisions,
modals) runs behind. When the store is down and the core cannot keep more, the
request is left unacked (503) and Slack sends it again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.authorization.async_authorize import AsyncInstallationStoreAuthorize
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.oauth.async_callback_options import AsyncCallbackOptions, AsyncFailureArgs
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.request.payload_utils import is_block_actions
from slack_bolt.request.payload_utils import is_event as is_event_payload
from slack_bolt.response import BoltResponse
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncRateLimitErrorRetryHandler,
    async_default_handlers,
)
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from bot import (
    ChatCore,
    Click,
    ClickResult,
    Overloaded,
    Prompt,
    TaskTracker,
    Text,
    ThreadKey,
    has_lone_surrogate,
)

from . import texts
from .assistant import AssistantThreads
from .commands import Approvals
from .convert import (
    PLATFORM,
    ActionIn,
    AssistantStartedIn,
    CommandIn,
    FeedbackIn,
    ForeignActionIn,
    FormIn,
    HomeOpenedIn,
    Ignored,
    Inbound,
    MessageIn,
    MessagesOpenedIn,
    Passthrough,
    StopIn,
    ViewIn,
    ViewingIn,
    command_thread,
    is_event,
    is_home,
    may_hold_lone_surrogate,
    modal_metadata,
    parse,
    thread_key,
    to_click,
    to_decline_click,
    to_form_click,
    to_incoming,
    without_lone_surrogates,
)
from .home import HomeTab
from .installations import (
    ROTATION_MARGIN_MINUTES,
    BotRotator,
    SlackInstallations,
    SlackOAuthStates,
    Tokens,
    workspace_of,
)
from .messenger import SlackMessenger
from .modals import answer_modal, decline_modal, edit_modal, form_error, respond_modal
from .settings import SlackSettings
from .viewing import Viewing
from .wire import (
    ANSWER_ACTION,
    ANSWER_VIEW,
    APPROVALS_COMMAND,
    APPROVE_ACTION,
    APPROVE_ALL_ACTION,
    ASSISTANT_CONTEXT_EVENT,
    ASSISTANT_STARTED_EVENT,
    CONTEXT_CHANGED_EVENT,
    DECLINE_ACTION,
    DECLINE_ALL_ACTION,
    DECLINE_VIEW,
    EDIT_ACTION,
    EDIT_VIEW,
    FEEDBACK_ACTION,
    GRANT_ACTION_ID,
    HOME_OPENED_EVENT,
    NEVER_ACTION_ID,
    QUESTION_CANCEL_ACTION,
    QUESTION_DECLINE_ACTION,
    RESPOND_ACTION,
    RESPOND_VIEW,
    REVOKE_ACTION,
    STOP_ACTION,
    ModalMetadata,
    PayloadError,
    field_block,
)

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"
BOT_SCOPES = (
    "app_mentions:read",
    "channels:history",
    "groups:history",
    "im:history",
    "mpim:history",
    "chat:write",
    "assistant:write",
    "commands",
    "im:write",
    "channels:read",
    "groups:read",
    "usergroups:read",
)
"""The bot scopes an installation asks for: the manifests' ``oauth_config.scopes.bot``."""
REVOCATION_EVENTS = ("app_uninstalled", "tokens_revoked")
"""Events Bolt's own listeners answer when the app is installed in many workspaces:
they delete the installation, or its bot token."""
MESSAGE_EVENTS = ("app_mention", "message")
LISTENED_EVENTS = (*MESSAGE_EVENTS, HOME_OPENED_EVENT, CONTEXT_CHANGED_EVENT)
"""Event types the adapter acts on; the manifest subscribes to exactly these."""
ASSISTANT_VIEW_EVENTS = (ASSISTANT_STARTED_EVENT, ASSISTANT_CONTEXT_EVENT)
"""Event types the adapter also acts on for an app still on Slack's assistant view
(``features.assistant_view``), whose manifest subscribes to them; agent messaging sends
none of them."""
RATE_LIMIT_RETRIES = 2
_INBOUND = "approval_bot_inbound"
_OVERLOADED = "approval_bot_overloaded"
RETRY_AFTER = "5"
"""Seconds Slack is asked to wait before resending a request the bot could not keep."""


_DECIDING_ACTIONS = frozenset(
    (
        APPROVE_ACTION,
        APPROVE_ALL_ACTION,
        DECLINE_ALL_ACTION,
        QUESTION_DECLINE_ACTION,
        QUESTION_CANCEL_ACTION,
        REVOKE_ACTION,
    )
)
"""The buttons that decide at once (``_on_click``), besides "Approve for this thread"
(``GRANT_ACTION_ID``) and "Decline, don't ask again here" (``NEVER_ACTION_ID``)."""


class SlackAdapter:
    """Slack for the chat core: ``POST /slack/events``, Socket Mode, and a ``Messenger``.

    Args:
        bot: The chat core (the composition root registers ``messenger`` with it).
        settings: ``SLACK_BOT_TOKEN``, ``SLACK_SIGNING_SECRET``, optional
            ``SLACK_APP_TOKEN`` (Socket Mode) and ``SLACK_API_URL``.
    """

    platform = PLATFORM

    def __init__(self, bot: ChatCore, settings: SlackSettings) -> None:
        token, secret = settings.slack_bot_token, settings.slack_signing_secret
        if not settings.enabled or not secret:
            raise ValueError(
                "Slack needs SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN, or "
                "SLACK_CLIENT_ID and SLACK_CLIENT_SECRET"
            )
        self.bot = bot
        self.distributed = settings.distributed
        installations = SlackInstallations(bot.chat) if self.distributed else None
        authorize = _authorize(settings, installations)
        self.app = AsyncApp(
            name="approval-bot",
            # The token, not a client of our own: given a client, Bolt still reads
            # SLACK_BOT_TOKEN from the environment and warns that it goes unused.
            token=None if self.distributed else token,
            signing_secret=secret,
            # Listeners only ack and spawn, so answering after them is as fast as
            # Bolt's default, without Bolt's untracked listener tasks and ack polling.
            process_before_response=True,
            before_authorize=_ParsePayload(revocations=self.distributed),
            # An AsyncAuthorize is taken as it is; the annotation names only functions.
            authorize=authorize,  # type: ignore[arg-type]
            installation_store=installations,
            installation_store_bot_only=True if self.distributed else None,
            oauth_settings=_oauth_settings(settings, bot, installations),
        )
        if self.distributed:
            self.app.enable_token_revocation_listeners()
        # One client for Bolt and the adapter; Bolt copies its address, session and
        # retry handlers into the client of every request.
        self.client: AsyncWebClient = self.app.client
        self.client.base_url = _api_base(settings.slack_api_url)
        self.client.retry_handlers = [
            *async_default_handlers(),
            AsyncRateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
        ]
        rotator = _rotator(settings, installations, self.client)
        if authorize is not None:
            # Requests and calls without one refresh a workspace's token through one
            # rotator: once at a time, never with a refresh token already used up.
            authorize.token_rotator = rotator
        self.tokens = Tokens(self.client, installations, rotator=rotator)
        self.messenger = SlackMessenger(self.client, tokens=self.tokens)
        self.approvals = Approvals(bot, self.messenger, self.client)
        self.tasks = TaskTracker()
        self.home = HomeTab(bot, self.tokens, permalink=self.messenger.permalink, tasks=self.tasks)
        self.messenger.home = self.home
        self.assistant = AssistantThreads(bot, self.tokens, tasks=self.tasks)
        self.viewing = Viewing(bot, tasks=self.tasks)
        self._app_token = settings.slack_app_token
        self._verifier = SignatureVerifier(secret)
        self._socket: AsyncSocketModeHandler | None = None
        self._session: aiohttp.ClientSession | None = None
        # Messages and the clicks that decide at once, the bulk of requests, reach
        # their listeners from the last global middleware (``_HandOff``), the rest
        # through Bolt's. Approve, "Approve for this thread", a question's Decline
        # and Cancel, and a grant's End grant decide at once; a card's Decline asks
        # for a reason first; Answer… opens the question's form, and a card's Edit the
        # form of its arguments, which approves them as edited.
        self.app.use(_HandOff(on_message=self._on_message, on_click=self._on_click))
        self.app.event(HOME_OPENED_EVENT)(self._on_home_opened)
        self.app.event(CONTEXT_CHANGED_EVENT)(self._on_viewing)
        # Listeners of our own, not Bolt's ``app.assistant``: that one would claim
        # every threaded DM message before the message listeners see it.
        self.app.event(ASSISTANT_STARTED_EVENT)(self._on_assistant_started)
        self.app.event(ASSISTANT_CONTEXT_EVENT)(self._on_viewing)
        self.app.action(DECLINE_ACTION)(self._on_decline)
        for action in (ANSWER_ACTION, EDIT_ACTION, RESPOND_ACTION):
            self.app.action(action)(self._on_form_button)
        self.app.view(DECLINE_VIEW)(self._on_decline_submitted)
        for view in (ANSWER_VIEW, EDIT_VIEW, RESPOND_VIEW):
            self.app.view(view)(self._on_form_submitted)
        self.app.command(APPROVALS_COMMAND)(self._on_command)
        self.app.action(FEEDBACK_ACTION)(self._on_feedback)
        self.app.action(STOP_ACTION)(self._on_stop)

    # -- composition-root contract ------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        """``POST /slack/events``: Events API and interactivity; with many workspaces,
        ``GET /slack/install`` and ``GET /slack/oauth_redirect`` too (Bolt's OAuth flow)."""
        routes = [web.post(EVENTS_PATH, self.handle)]
        if self.distributed:
            routes += [
                web.get(INSTALL_PATH, self._install),
                web.get(REDIRECT_PATH, self._installed),
            ]
        return routes

    async def _install(self, request: web.Request) -> web.Response:
        """Off to Slack's consent page, with a new OAuth state (Bolt's flow)."""
        flow = self.app.oauth_flow
        assert flow is not None  # routed only with many workspaces
        try:
            return await to_aiohttp_response(
                await flow.handle_installation(await to_bolt_request(request))
            )
        except Exception as exc:  # the state could not be kept: the store is down
            log.warning("could not start a Slack installation: %r", exc)
            return _unavailable()

    async def _installed(self, request: web.Request) -> web.Response:
        """Back from Slack: the state checked and consumed, the code exchanged, the
        installation kept (Bolt's flow); a store or Slack that fails meanwhile is one
        log line and a page saying to try again, never a traceback."""
        flow = self.app.oauth_flow
        assert flow is not None  # routed only with many workspaces
        try:
            return await to_aiohttp_response(
                await flow.handle_callback(await to_bolt_request(request))
            )
        except Exception as exc:
            log.warning("could not finish a Slack installation: %r", exc)
            return _unavailable()

    async def start(self) -> None:
        """Share one HTTP session for Web API calls; connect Socket Mode if configured."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
            self.client.session = self._session
        if self._app_token and self._socket is None:
            self._socket = AsyncSocketModeHandler(self.app, self._app_token)
            await self._socket.connect_async()  # type: ignore[no-untyped-call]
            log.info("Slack Socket Mode connected")

    async def stop(self) -> None:
        """Disconnect Socket Mode, finish the adapter's tasks, close the HTTP session."""
        if self._socket is not None:
            await self._socket.close_async()  # type: ignore[no-untyped-call]
            self._socket = None
        await self.tasks.aclose()
        if self._session is not None:
            self.client.session = None
            await self._session.close()
            self._session = None

    async def drain(self) -> None:
        """Wait until the adapter and the core are idle (tests, benchmarks)."""
        while self.tasks.running or self.bot.busy:
            await self.tasks.drain()
            await self.bot.drain()

    # -- HTTP ---------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.Response:
        """One Slack request: Bolt verifies the signature, acks, and the listeners hand off."""
        timestamp = request.headers.get("X-Slack-Request-Timestamp", "0")
        # A few ASCII digits only: "²" is a digit to str.isdigit, and int() fails with
        # a 500 on it, as on a number past Python's 4,300-digit conversion limit.
        if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 15):
            return web.Response(status=401, text=texts.BAD_SIGNATURE)
        try:
            bolt_request = await to_bolt_request(request)
        except Exception:
            # Bolt parses the body while building the request, before checking the
            # signature: only a signed body earns the "malformed" answer.
            if not self._signed(await request.read(), timestamp, request.headers):
                return web.Response(status=401, text=texts.BAD_SIGNATURE)
            return web.Response(status=400, text=texts.BAD_PAYLOAD)
        response = await self.app.async_dispatch(bolt_request)
        if bolt_request.context.get(_OVERLOADED):
            headers = {"Retry-After": RETRY_AFTER}
            return web.Response(status=503, headers=headers, text=texts.OVERLOADED)
        return await to_aiohttp_response(response)

    def _signed(self, body: bytes, timestamp: str, headers: Mapping[str, str]) -> bool:
        try:
            return self._verifier.is_valid(body, timestamp, headers.get("X-Slack-Signature"))
        except UnicodeDecodeError:  # Slack signs UTF-8 bodies only
            return False

    # -- listeners (ack first, then hand off) -------------------------------------

    async def _on_message(self, ack: AsyncAck, context: AsyncBoltContext) -> None:
        inbound = context.get(_INBOUND)
        if isinstance(inbound, MessageIn):
            incoming = to_incoming(
                inbound, workspace=self._workspace(context), bot_user_id=context.bot_user_id
            )
            if incoming is not None:
                direct = inbound.kind == "direct"  # agent and assistant threads are DMs
                if direct and incoming.context is None:
                    viewing = await self.viewing.now(incoming.thread.workspace, inbound.user)
                    incoming = replace(incoming, context=viewing)
                if not await _kept(context, self.bot.on_message(incoming)):
                    return
                if direct:
                    self.assistant.requested(
                        incoming.thread, incoming.text, new=inbound.thread_ts is None
                    )
        await ack()

    async def _on_assistant_started(self, ack: AsyncAck, context: AsyncBoltContext) -> None:
        """The assistant view opened: acked at once, the prompts offered behind."""
        await ack()
        inbound = context.get(_INBOUND)
        if isinstance(inbound, AssistantStartedIn):
            workspace = self._workspace(context) or inbound.team
            self.assistant.started(inbound, workspace=workspace)
            self.viewing.seen(workspace, inbound.user, inbound.context)

    async def _on_viewing(self, ack: AsyncAck, context: AsyncBoltContext) -> None:
        """What a person looks at changed: acked at once, kept behind for their next
        request."""
        await ack()
        inbound = context.get(_INBOUND)
        if isinstance(inbound, ViewingIn):
            self.viewing.seen(
                self._workspace(context) or inbound.team, inbound.user, inbound.context
            )

    async def _on_home_opened(self, ack: AsyncAck, context: AsyncBoltContext) -> None:
        """The Home tab opened: acked at once (it only reads), published behind; or the
        direct message (agent messaging's conversations): the prompts offered behind."""
        await ack()
        inbound = context.get(_INBOUND)
        if isinstance(inbound, HomeOpenedIn):
            self.home.opened(self._workspace(context) or inbound.team, inbound.user)
        elif isinstance(inbound, MessagesOpenedIn):
            workspace = self._workspace(context) or inbound.team
            self.assistant.opened(inbound.channel, workspace=workspace)
            if inbound.context is not None:
                self.viewing.seen(workspace, inbound.user, inbound.context)

    async def _on_click(self, ack: AsyncAck, context: AsyncBoltContext) -> None:
        inbound = context.get(_INBOUND)
        if isinstance(inbound, ForeignActionIn):
            self._spawn(self._not_our_card(inbound, context), "slack-foreign-click")
        if isinstance(inbound, ActionIn):
            click = to_click(inbound, workspace=self._workspace(context))
            await self._hand_over(
                ack,
                context,
                click,
                home=inbound.home,
                response_url=inbound.response_url,
                name="slack-inbox-click",
            )
            return
        await ack()

    async def _on_feedback(self, ack: AsyncAck, context: AsyncBoltContext) -> None:
        """👍 / 👎 under an answer: acked at once, kept behind, the presser thanked."""
        await ack()
        inbound = context.get(_INBOUND)
        if isinstance(inbound, FeedbackIn):
            thread = thread_key(
                self._workspace(context) or inbound.team, inbound.channel, inbound.root
            )
            self._spawn(self._feedback(thread, inbound), f"slack-feedback:{inbound.run_id}")

    async def _feedback(self, thread: ThreadKey, feedback: FeedbackIn) -> None:
        said = await self.bot.on_feedback(
            thread, feedback.user, feedback.run_id, helpful=feedback.helpful
        )
        await self.messenger.tell(thread, feedback.user, said)

    async def _on_stop(self, ack: AsyncAck, context: AsyncBoltContext) -> None:
        """Stop under the text before a card: acked at once, the run stopped behind; the
        presser is told privately when nothing was."""
        await ack()
        inbound = context.get(_INBOUND)
        if isinstance(inbound, StopIn):
            thread = thread_key(
                self._workspace(context) or inbound.team, inbound.channel, inbound.root
            )
            self._spawn(self._stop(thread, inbound), f"slack-stop:{inbound.run_id}")

    async def _stop(self, thread: ThreadKey, stop: StopIn) -> None:
        said = await self.bot.on_stop(thread, stop.user, stop.run_id)
        if said:
            await self.messenger.tell(thread, stop.user, said)

    async def _on_command(self, ack: AsyncAck, context: AsyncBoltContext) -> None:
        """``/approvals``: acked at once (it only reads), answered privately behind."""
        await ack()
        inbound = context.get(_INBOUND)
        if isinstance(inbound, CommandIn):
            place = command_thread(inbound, workspace=self._workspace(context))
            self._spawn(self.approvals.answer(inbound, place), f"slack-approvals:{inbound.user}")

    async def _on_decline(self, ack: AsyncAck, context: AsyncBoltContext) -> None:
        await ack()
        inbound = context.get(_INBOUND)
        if isinstance(inbound, ForeignActionIn):
            self._spawn(self._not_our_card(inbound, context), "slack-foreign-click")
        if isinstance(inbound, ActionIn):
            metadata = modal_metadata(inbound, workspace=self._workspace(context))
            click = to_click(inbound, workspace=self._workspace(context))
            self._spawn(
                self._ask_reason(click, metadata, inbound.trigger_id),
                f"slack-decline:{metadata.run}",
            )

    async def _on_form_button(self, ack: AsyncAck, context: AsyncBoltContext) -> None:
        await ack()
        inbound = context.get(_INBOUND)
        if isinstance(inbound, ForeignActionIn):
            self._spawn(self._not_our_card(inbound, context), "slack-foreign-click")
        if isinstance(inbound, ActionIn):
            metadata = modal_metadata(inbound, workspace=self._workspace(context))
            name = f"slack-{inbound.action}:{metadata.run}"
            self._spawn(self._open_form(inbound, metadata), name)

    async def _not_our_card(self, inbound: ForeignActionIn, context: AsyncBoltContext) -> None:
        if inbound.response_url is not None:
            await self.approvals.tell(inbound.response_url, (texts.NOT_OUR_CARD,))
            return
        thread = thread_key(self._workspace(context) or inbound.team, inbound.channel, inbound.root)
        await self.messenger.tell(thread, inbound.user, (texts.NOT_OUR_CARD,))

    async def _ask_reason(self, click: Click, metadata: ModalMetadata, trigger_id: str) -> None:
        """Open the reason dialog, unless the decline would be refused anyway."""
        refusal = await self.bot.check_click(click, made=True)
        if refusal is not None:
            await self._tell(click, refusal, metadata.response_url)
            return
        # trigger_id is valid for 3 s: the check above reads the store only.
        client = await self.tokens.client_for(click.thread.workspace)
        await client.views_open(trigger_id=trigger_id, view=decline_modal(metadata))

    async def _open_form(self, action: ActionIn, metadata: ModalMetadata) -> None:
        """Open a question's form (its fields as they are now), a card's edit form
        (its arguments as the card shows them) or its Respond form, unless the click
        would be refused anyway."""
        click = to_click(action, workspace=metadata.team)
        asked, drawn = {
            "edit": (self.bot.edit_form, edit_modal),
            "respond": (self.bot.respond_form, respond_modal),
        }.get(click.action, (self.bot.question_form, answer_modal))
        form = await asked(click)
        if not isinstance(form, Prompt):
            await self._tell(click, form, metadata.response_url)
            return
        view = drawn(metadata, form)
        if view is None:  # arguments a Slack form cannot hold whole
            await self._tell(click, (texts.EDIT_TOO_BIG,), metadata.response_url)
            return
        # trigger_id is valid for 3 s: the lookup above reads the store only.
        client = await self.tokens.client_for(click.thread.workspace)
        await client.views_open(trigger_id=action.trigger_id, view=view)

    async def _on_decline_submitted(self, ack: AsyncAck, context: AsyncBoltContext) -> None:
        inbound = context.get(_INBOUND)
        if isinstance(inbound, ViewIn):  # the ack closes the modal
            click = to_decline_click(inbound)
            await self._hand_over(
                ack,
                context,
                click,
                home=is_home(click.thread),
                response_url=inbound.metadata.response_url,
                name="slack-inbox-decline",
            )
            return
        await ack()  # closes the modal

    async def _hand_over(
        self,
        ack: AsyncAck,
        context: AsyncBoltContext,
        click: Click,
        *,
        home: bool,
        response_url: str | None,
        name: str,
    ) -> None:
        """Give a click (a button, a decline's reason) to the core, then ack it; left
        unacked (a 503) when the core cannot keep it.

        From the Home tab (``home``), which shows what the click did at its top, or an
        inbox (``response_url``), whose message only its reader sees and which shows it
        there (in a task named ``name``), it is decided while Slack waits, as a form
        is; from a card in its thread it is only recorded, and decided behind.
        """
        if home:
            result = await _decided(context, self.bot.on_click(click))
            if result is None:
                return
            await ack()
            self.home.after_click(click, result)
        elif response_url is not None:
            result = await _decided(context, self.bot.on_click(click))
            if result is None:
                return
            await ack()
            self._spawn(
                self.approvals.after_click(click, result, response_url),
                f"{name}:{click.run_id}",
            )
        elif await _kept(context, self.bot.accept_click(click)):
            await ack()

    async def _on_form_submitted(self, ack: AsyncAck, context: AsyncBoltContext) -> None:
        """A form (a question's answer, a card's edited arguments) is decided while
        Slack waits: values that do not fit are shown in the form, to be corrected
        there."""
        inbound = context.get(_INBOUND)
        if isinstance(inbound, FormIn):
            click = to_form_click(inbound)
            result = await _decided(context, self.bot.on_click(click))
            if result is None:
                return
            if result.retry:  # the values did not fit: corrected in the form itself
                errors = {field_block(0): form_error(result.message or "")}
                await ack(response_action="errors", errors=errors)
                return
            # Decided, refused for good, or kept but not decided yet: the form closes,
            # the words (if any) go to the clicker, and the card's message follows;
            # an inbox the form was opened from shows what it did.
            response_url = inbound.metadata.response_url
            name = f"slack-{click.action}:{click.run_id}"
            if is_home(click.thread):
                self.home.after_click(click, result)
            elif response_url is not None:
                self._spawn(self.approvals.after_click(click, result, response_url), name)
            elif result.said:
                self._spawn(self._tell(click, result.said), name)
        await ack()  # closes the modal

    async def _tell(self, click: Click, text: Text, response_url: str | None = None) -> None:
        """Tell the clicker privately: in the inbox they clicked in, else the thread."""
        if response_url is not None:
            await self.approvals.tell(response_url, text)
        else:
            await self.messenger.tell(click.thread, click.user_id, text)

    def _workspace(self, context: AsyncBoltContext) -> str | None:
        """The workspace of a request's thread keys, the same for its events and clicks:
        with one token, the bot's own (from ``auth.test``); with many, that of the
        installation Bolt found for it (``workspace_of``: a team, or an org-wide
        install's enterprise, whichever of its workspaces the request comes from)."""
        if self.distributed:
            return workspace_of(
                context.enterprise_id,
                context.team_id,
                org_wide=bool(context.is_enterprise_install),
            )
        result = context.authorize_result
        team = result.team_id if result is not None else None
        return team if isinstance(team, str) and team else None

    def _spawn(self, work: Awaitable[Any], name: str) -> None:
        async def run() -> None:
            await work

        self.tasks.spawn(run(), name=name)


class _ParsePayload(AsyncMiddleware):
    """Right after the signature check: a malformed event -> 200 (logged), another
    malformed request -> 400, not ours -> 200, else parsed. With ``revocations``, an
    uninstall or a revocation goes on to Bolt's listeners."""

    def __init__(self, *, revocations: bool = False) -> None:
        self.revocations = revocations

    async def async_process(
        self,
        *,
        req: AsyncBoltRequest,
        resp: BoltResponse,
        next: Callable[[], Awaitable[BoltResponse]],
    ) -> BoltResponse | None:
        if self.revocations and _event_type(req.body) in REVOCATION_EVENTS:
            return await next()
        repaired = may_hold_lone_surrogate(req.raw_body) and has_lone_surrogate(req.body)
        if repaired:
            # Slack sends UTF-8; a lone surrogate (JSON "\ud800") can be stored or
            # sent nowhere. In an event it is replaced (a word of a message may then
            # read "\ufffd"; an id that has one names nobody, and the event is
            # ignored); any other request is refused whole, and its sender sees it.
            if not is_event(req.body):
                return BoltResponse(status=400, body=texts.BAD_PAYLOAD)
            req.body = without_lone_surrogates(req.body)
        try:
            inbound: Inbound = parse(req.body)
        except PayloadError as exc:
            return BoltResponse(status=400, body=exc.text)
        if isinstance(inbound, Ignored):
            if inbound.malformed:
                log.warning("acknowledged and ignored a %s", inbound.why)
            else:
                log.debug("acknowledged and ignored: %s", inbound.why)
            return BoltResponse(status=200, body="")
        if repaired:
            log.warning("kept an event whose text had lone surrogates, replaced")
        if not isinstance(inbound, Passthrough):
            req.context[_INBOUND] = inbound
        return await next()


_Listener = Callable[[AsyncAck, AsyncBoltContext], Awaitable[None]]


class _HandOff(AsyncMiddleware):
    """The last global middleware: a message event, or a block action whose (first)
    ``action_id`` is one that decides at once, goes to its listener here, with the
    request's ``ack``, as Bolt would route it; anything else goes on to Bolt's
    listeners.

    Bolt tries its listeners in turn and, for each one it tries and the one it runs,
    builds every argument a listener could ask for: in an app whose listeners only
    ack, that is some 40% of the time a request takes (``bench/slack_bench.py``).
    """

    def __init__(self, *, on_message: _Listener, on_click: _Listener) -> None:
        self.on_message = on_message
        self.on_click = on_click

    async def async_process(
        self,
        *,
        req: AsyncBoltRequest,
        resp: BoltResponse,
        next: Callable[[], Awaitable[BoltResponse]],
    ) -> BoltResponse | None:
        listener = self._listener(req.body)
        if listener is None:
            return await next()
        ack = req.context.ack
        await listener(ack, req.context)
        if ack.response is None:  # the core could not keep it: ``handle`` answers 503
            return BoltResponse(status=200, body="")
        return ack.response

    def _listener(self, body: dict[str, Any]) -> _Listener | None:
        if is_event_payload(body):
            return self.on_message if body["event"]["type"] in MESSAGE_EVENTS else None
        if is_block_actions(body):
            action = body["actions"][0]["action_id"]
            deciding = (
                action in _DECIDING_ACTIONS
                or GRANT_ACTION_ID.search(action)
                or NEVER_ACTION_ID.search(action)
            )
            return self.on_click if deciding else None
        return None


async def _kept(context: AsyncBoltContext, recording: Awaitable[None]) -> bool:
    """Hand a delivery to the core; ``False`` (and a 503, no ack) when it cannot keep it."""
    try:
        await recording
    except Overloaded:
        _overloaded(context)
        return False
    return True


async def _decided(
    context: AsyncBoltContext, deciding: Awaitable[ClickResult]
) -> ClickResult | None:
    """A click's result; ``None`` (and a 503, no ack) when the core cannot keep it."""
    try:
        return await deciding
    except Overloaded:
        _overloaded(context)
        return None


def _overloaded(context: AsyncBoltContext) -> None:
    log.warning("the bot cannot keep more requests while its store is down: answering 503")
    context[_OVERLOADED] = True


def _unavailable() -> web.Response:
    """The page of an installation that could not be made right now."""
    return web.Response(
        status=503,
        text=texts.INSTALL_UNAVAILABLE,
        content_type="text/plain",
        headers={"Retry-After": "60"},
    )


def _authorize(
    settings: SlackSettings, installations: SlackInstallations | None
) -> AsyncInstallationStoreAuthorize | None:
    """Bolt's authorization of each request by its workspace's bot (refreshing its token
    when it is about to expire), or ``None`` with one bot token."""
    if installations is None:
        return None
    return AsyncInstallationStoreAuthorize(
        logger=log,
        installation_store=installations,
        client_id=settings.slack_client_id,
        client_secret=settings.slack_client_secret,
        token_rotation_expiration_minutes=ROTATION_MARGIN_MINUTES,
        bot_only=True,
    )


def _rotator(
    settings: SlackSettings, installations: SlackInstallations | None, client: AsyncWebClient
) -> BotRotator | None:
    """The one token rotator of Bolt and the adapter, or ``None`` with one bot token."""
    client_id, client_secret = settings.slack_client_id, settings.slack_client_secret
    if installations is None or not client_id or not client_secret:
        return None
    return BotRotator(
        installations,
        client_id=client_id,
        client_secret=client_secret,
        client=client,
        margin_minutes=ROTATION_MARGIN_MINUTES,
    )


def _oauth_settings(
    settings: SlackSettings, bot: ChatCore, installations: SlackInstallations | None
) -> AsyncOAuthSettings | None:
    """Bolt's OAuth flow on the bot's own state, or ``None`` with one bot token."""
    if installations is None:
        return None
    return AsyncOAuthSettings(
        client_id=settings.slack_client_id,
        client_secret=settings.slack_client_secret,
        scopes=list(BOT_SCOPES),
        install_path=INSTALL_PATH,
        redirect_uri_path=REDIRECT_PATH,
        # Straight to Slack's consent page: the bot serves no page of its own.
        install_page_rendering_enabled=False,
        installation_store=installations,
        installation_store_bot_only=True,
        state_store=SlackOAuthStates(bot.chat),
        # Bolt sets it on the authorization too: the same margin as the adapter's own calls.
        token_rotation_expiration_minutes=ROTATION_MARGIN_MINUTES,
        callback_options=AsyncCallbackOptions(success=_succeeded, failure=_failed),
    )


async def _succeeded(args: Any) -> BoltResponse:
    response: BoltResponse = await args.default.success(args)
    return response


async def _failed(args: AsyncFailureArgs) -> BoltResponse:
    """Bolt's page saying why an installation failed; a bad, lapsed or reused state or
    code is the browser's fault (400), never the bot's."""
    response: BoltResponse = await args.default.failure(args)
    if 400 <= response.status < 500:
        response.status = 400
    return response


def _event_type(body: Any) -> str | None:
    event = body.get("event") if isinstance(body, dict) else None
    kind = event.get("type") if isinstance(event, dict) else None
    return kind if isinstance(kind, str) else None


def _api_base(url: str) -> str:
    return url if url.endswith("/") else url + "/"
