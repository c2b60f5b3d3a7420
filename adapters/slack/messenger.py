"""The core's ``Messenger`` for Slack: post, update, tell one person, show a status,
stream an answer (``live``); post a card in another channel or a direct message;
keep Home tabs current; say which channels and user groups exist."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any, Final

import aiohttp
from cachetools import LRUCache, TTLCache
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot import (
    ApprovalCard,
    CardPointer,
    Destination,
    Live,
    MessageRef,
    Person,
    Posted,
    PostMark,
    Text,
    ThreadKey,
    Undeliverable,
    View,
    begins,
)

from . import texts
from ._reach import reaching as _reaching
from .blocks import SlackMessage, render
from .convert import is_home, message_ref, thread_key
from .home import HomeTab
from .installations import Tokens
from .limits import Pacer
from .live import SlackLive
from .mrkdwn import is_group_id, text_mrkdwn
from .wire import mark_of, post_metadata

log = logging.getLogger(__name__)

_REFUSED_STATUS_CACHE = 10_000
_STATUS_NOT_ALLOWED = frozenset(
    {"not_allowed", "missing_scope", "not_allowed_token_type", "unknown_method", "no_permission"}
)
"""Refusals that mean "never in this channel", as opposed to a passing error."""
_REFUSED_STREAM_CACHE = 10_000
_PERMALINK_CACHE = 10_000
NO_PERMALINK_TTL = 60.0
"""How long (seconds) a message Slack gave no permalink for (deleted, in a channel the
bot left, or Slack unreachable) is shown without one before Slack is asked again: a
card is rendered again on every vote and update, and each would otherwise retry."""
_DIRECT_CHANNEL_CACHE = 10_000
CHANNEL_ID: Final = re.compile(r"[CGD][A-Z0-9]{2,}")
"""The shape of a Slack conversation id (a channel, a private channel, a DM)."""
_NO_CHANNEL = frozenset({"channel_not_found", "invalid_channel", "invalid_arguments"})
"""``conversations.info`` answers that mean "no such channel" (for this bot)."""
_NO_GROUP = frozenset({"no_such_subteam", "invalid_usergroup", "plan_upgrade_required"})
"""``usergroups.*`` answers that mean "no such group" (a workspace without groups has none)."""
FIND_LIMIT = 200
"""Messages asked for per page when looking for a post (``find_post``): Slack's advice.
Apps distributed outside the Marketplace get at most 15 a page, one page a minute."""
FIND_PAGES = 5
"""The most pages read looking for one post: it was made since its run or call began,
so it is near the start of what is read; past this, it is posted again."""
FIND_MARGIN = 600.0
"""Seconds looked back before a post could have been made: Slack's clock and ours differ."""


class _TooLong(LookupError):
    """More of a conversation was left than ``FIND_PAGES`` pages read (``_own_messages``)."""


class SlackMessenger:
    """Posts views in Slack threads through the Web API.

    Every post goes into the thread (``thread_ts`` = the thread's root); the core
    follows the thread, so that replies there reach the bot. A card the policy sends
    elsewhere starts a thread of its own (``post_elsewhere``). An answer streams into
    the thread where Slack allows it (``start_live``), else it is posted whole.

    Posts and updates go through one ``Pacer`` (``limits``): in order per channel,
    within Slack's rate limits, passing failures tried again. What still cannot be
    sent raises ``Undeliverable``; Slack's lasting refusals (``SlackApiError``) are
    the core's to log.

    ``home`` (set by the adapter) shows people's Home tabs: what changes in them, and
    what a person is told about a click made there. ``clock`` (monotonic seconds;
    tests may pass their own) times how long a missing permalink is believed.
    ``tokens`` gives each workspace's client when the app is installed in many (OAuth);
    else every call goes through ``client``. Asked by channel or group alone
    (``knows_channel``, ``group_members``, ``permalink`` without a workspace), a bot of
    many workspaces cannot tell whose it is: it refuses the channel or group (a policy
    naming one stops the bot at start), and shows no link.
    """

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        clock: Callable[[], float] = time.monotonic,
        pacer: Pacer | None = None,
        tokens: Tokens | None = None,
    ) -> None:
        self.client = client
        self.tokens = tokens or Tokens(client)
        self.pacer = pacer or Pacer()
        self.home: HomeTab | None = None
        # Channels where Slack refused a status (not an assistant thread, no
        # scope): asking again per message would only cost a round trip.
        self._no_status: LRUCache[str, bool] = LRUCache(maxsize=_REFUSED_STATUS_CACHE)
        # Channels where Slack refused to stream (``live.NOT_HERE``): their answers
        # are posted whole, without a refused ``chat.startStream`` first each time.
        self._no_stream: LRUCache[str, bool] = LRUCache(maxsize=_REFUSED_STREAM_CACHE)
        # A message's permalink never changes, and a card is rendered again on
        # every update: asked once per message.
        self._permalinks: LRUCache[tuple[str, str], str] = LRUCache(maxsize=_PERMALINK_CACHE)
        self._no_permalink: TTLCache[tuple[str, str], bool] = TTLCache(
            maxsize=_PERMALINK_CACHE, ttl=NO_PERMALINK_TTL, timer=clock
        )
        self._direct: LRUCache[str, str] = LRUCache(maxsize=_DIRECT_CHANNEL_CACHE)
        self._bot_ids: LRUCache[str, str] = LRUCache(maxsize=_DIRECT_CHANNEL_CACHE)
        """The bot's own id in each workspace (``find_post`` trusts only its messages)."""

    @property
    def waiting(self) -> int:
        """Calls waiting now on Slack's limits or a retry (a metric)."""
        return self.pacer.waiting

    async def post(
        self, thread: ThreadKey, view: View, *, mark: PostMark | None = None
    ) -> MessageRef:
        """Post a view (several messages for a long answer); return where the first lives.
        ``mark`` goes into the last message's ``metadata`` (``find_post``): found, the
        whole view was posted."""
        first: MessageRef | None = None
        messages = render(view, link=await self._link(view))
        for i, message in enumerate(messages, start=1):
            metadata = post_metadata(mark) if mark is not None and i == len(messages) else None
            ref = await self._post(thread, message, metadata=metadata)
            first = first or ref
        assert first is not None  # render() always returns at least one message
        return first

    async def update(
        self, thread: ThreadKey, ref: MessageRef, view: View, *, mark: PostMark | None = None
    ) -> None:
        """Replace a posted view for everyone (``chat.update``); ``mark`` goes into the
        ``metadata`` of its last message, as ``post`` puts it."""
        first, *rest = render(view, link=await self._link(view))
        channel = ref["channel"]
        client = await self._client(thread.workspace)
        metadata = post_metadata(mark) if mark is not None else None

        async def change() -> object:
            fields = first.fields(replacing=True)
            if metadata is not None and not rest:
                fields["metadata"] = metadata
            return await client.chat_update(channel=channel, ts=ref["ts"], **fields)

        await self.pacer.call(channel, f"update:{thread.workspace}", change)
        for i, message in enumerate(rest, start=1):
            await self._post(thread, message, metadata=metadata if i == len(rest) else None)

    async def tell(self, thread: ThreadKey, user_id: str, text: Text) -> None:
        """Say something only ``user_id`` sees, in the thread (``chat.postEphemeral``);
        in the channel itself for a place that is no thread (where ``/approvals`` ran);
        at the top of their Home tab for a click made there."""
        if is_home(thread):
            if self.home is not None:
                self.home.note(thread.workspace, user_id, text)
                return
            # No Home tab to show it in: the bot's direct message with them.
            async with _reaching():
                client = await self._client(thread.workspace)
                await client.chat_postMessage(channel=user_id, text=text_mrkdwn(text))
            return
        async with _reaching():
            client = await self._client(thread.workspace)
            await client.chat_postEphemeral(
                channel=thread.channel,
                user=user_id,
                thread_ts=thread.root or None,
                text=text_mrkdwn(text),
            )

    async def set_status(self, thread: ThreadKey, status: str | None) -> None:
        """Show or clear "is thinking…" (with loading messages the assistant view
        rotates through under it); silently nothing where Slack refuses it."""
        if thread.channel in self._no_status:
            return
        try:
            client = await self._client(thread.workspace)
            await client.assistant_threads_setStatus(
                channel_id=thread.channel,
                thread_ts=thread.root,
                status=status or "",
                # Clearing takes none: an empty status ends the rotation too.
                loading_messages=list(texts.LOADING_MESSAGES) if status else None,
            )
        except SlackApiError as exc:
            error = exc.response.get("error")
            log.debug("Slack refused a status in %s: %s", thread.channel, error)
            if error not in _STATUS_NOT_ALLOWED:
                return  # a passing refusal (rate limit, a bad thread): try again next time
            self._no_status[thread.channel] = True
        except (SlackClientError, aiohttp.ClientError, TimeoutError, LookupError) as exc:
            log.debug("no status in %s this time: %s", thread.channel, exc)

    async def start_live(self, thread: ThreadKey, to: Person | None) -> Live | None:
        """A streamed answer in the thread (``SlackLive``; nothing is sent before its
        first words or step), or ``None`` where Slack will not stream: outside a thread,
        in a channel that refused before, or outside a DM with nobody to address it to
        (Slack streams there to one recipient, who asked)."""
        if not thread.root or thread.channel in self._no_stream:
            return None
        if to is None and not thread.channel.startswith("D"):
            return None
        client = await self._client(thread.workspace)
        return SlackLive(client, thread, to, refused=self._refuse_streams)

    def _refuse_streams(self, channel: str) -> None:
        log.info("Slack does not stream in %s: answers there are posted whole", channel)
        self._no_stream[channel] = True

    async def post_elsewhere(
        self, near: ThreadKey, to: Destination, view: View, *, mark: PostMark | None = None
    ) -> Posted:
        """Post ``view`` as a new top-level message in ``to.channel``, or in the bot's
        direct message with ``to.user_id`` (``conversations.open``); its thread is
        the message's own, as clicks and replies there are keyed. ``mark`` goes into
        that message's ``metadata``."""
        channel = await self._channel_of(near, to)
        first, *rest = render(view, link=await self._link(view))
        metadata = post_metadata(mark) if mark is not None else None
        response = await self._send(near.workspace, channel, None, first, metadata=metadata)
        # Slack answers with the channel's id, which clicks there carry.
        posted_in, ts = str(response["channel"]), str(response["ts"])
        thread = thread_key(near.workspace, posted_in, ts)
        for message in rest:
            await self._post(thread, message)
        return Posted(thread=thread, ref=message_ref(posted_in, ts))

    async def find_post(
        self,
        near: ThreadKey,
        mark: PostMark,
        *,
        since: datetime,
        to: Destination | None = None,
    ) -> Posted | None:
        """The bot's message whose ``metadata`` holds ``mark``: a reply in ``near``'s thread
        (``conversations.replies``), or with ``to`` a top-level message there
        (``conversations.history``), posted since ``since`` (less ``FIND_MARGIN``, for
        clocks apart), among the first ``FIND_PAGES`` pages. ``None`` when none is
        (a refusal, such as a scope the app lacks, is logged: the core posts again).
        """
        try:
            channel = near.channel if to is None else await self._channel_of(near, to)
        except (SlackApiError, LookupError) as exc:
            log.info("cannot look for the %s of %s in Slack: %s", mark.post, mark.run_id, exc)
            return None
        try:
            async for message in self._own_messages(near, channel, since, top_level=to is not None):
                ts = message.get("ts")
                if isinstance(ts, str) and mark_of(message.get("metadata")) == mark:
                    thread = near if to is None else thread_key(near.workspace, channel, ts)
                    return Posted(thread=thread, ref=message_ref(channel, ts))
        except _TooLong:
            pass
        return None

    async def find_cut_live(self, near: ThreadKey, *, since: datetime, words: str) -> Posted | None:
        """The bot's newest reply in ``near``'s thread, read from ``since`` (less
        ``FIND_MARGIN``), when it carries no mark and what it shows begins ``words``
        (``begins``): a streamed answer whose process died before ending it. Its stream
        is stopped here (Slack may have stopped it already), so that it can be updated.
        ``None`` too when the thread is longer than ``FIND_PAGES`` pages from there:
        the newest message was not read."""
        last: dict[str, Any] | None = None
        try:
            async for message in self._own_messages(near, near.channel, since, top_level=False):
                last = message
        except _TooLong:
            return None
        ts = last.get("ts") if last is not None else None
        if last is None or not isinstance(ts, str) or mark_of(last.get("metadata")) is not None:
            return None
        if not begins(str(last.get("text") or ""), words):
            return None
        client = await self._client(near.workspace)
        try:
            async with _reaching():
                await client.chat_stopStream(channel=near.channel, ts=ts)
        except (SlackApiError, Undeliverable) as exc:
            log.debug("the cut answer %s in %s was stopped already: %s", ts, near.channel, exc)
        return Posted(thread=near, ref=message_ref(near.channel, ts))

    async def _own_messages(
        self, near: ThreadKey, channel: str, since: datetime, *, top_level: bool
    ) -> AsyncIterator[dict[str, Any]]:
        """The bot's own messages, oldest first, posted since ``since`` (less
        ``FIND_MARGIN``, for clocks apart): replies in ``near``'s thread
        (``conversations.replies``), or with ``top_level`` top-level messages in
        ``channel`` (``conversations.history``), among the first ``FIND_PAGES`` pages
        (only the bot's: another app may copy its metadata). None where Slack cannot
        be read (a refusal, such as a scope the app lacks, is logged).

        Raises:
            _TooLong: More pages were left after ``FIND_PAGES``.
        """
        if not top_level and not near.root:
            return  # no thread: nothing to read back (someone's Home tab)
        try:
            client = await self._client(near.workspace)
            own = await self._bot_id(near.workspace, client)
        except (SlackApiError, LookupError) as exc:
            log.info("cannot read back %s in Slack: %s", channel, exc)
            return
        oldest = f"{since.timestamp() - FIND_MARGIN:.6f}"
        cursor: str | None = None
        for _ in range(FIND_PAGES):

            async def read(cursor: str | None = cursor) -> AsyncSlackResponse:
                if not top_level:
                    return await client.conversations_replies(
                        channel=channel,
                        ts=near.root,
                        oldest=oldest,
                        limit=FIND_LIMIT,
                        cursor=cursor,
                        include_all_metadata=True,
                    )
                return await client.conversations_history(
                    channel=channel,
                    oldest=oldest,
                    limit=FIND_LIMIT,
                    cursor=cursor,
                    include_all_metadata=True,
                )

            try:
                response = await self.pacer.call(channel, f"read:{near.workspace}", read)
            except SlackApiError as exc:
                error = exc.response.get("error")
                log.warning("Slack refused to read back %s (%s): posting again", channel, error)
                return
            for message in response.get("messages") or []:
                if isinstance(message, dict) and message.get("bot_id") == own:
                    yield message
            metadata = response.get("response_metadata")
            cursor = metadata.get("next_cursor") if isinstance(metadata, dict) else None
            if not cursor:
                return
        log.warning("looked through %d pages of %s: posting again", FIND_PAGES, channel)
        raise _TooLong(channel)

    async def inboxes_changed(self, thread: ThreadKey, people: frozenset[str]) -> None:
        """Show again the Home tabs of those of ``people`` who opened theirs, on any
        replica (queued: this returns at once, and never raises)."""
        if self.home is not None:
            self.home.changed(thread.workspace, people)

    async def channel_place(self, channel: str, workspace: str | None = None) -> ThreadKey | None:
        """``channel`` of ``workspace`` (the only one, with one bot token), when the bot is
        in it and may post (``conversations.info``); its team is ``auth.test``'s.

        Raises:
            LookupError: The bot serves many workspaces and ``workspace`` is not given,
                or the app is not installed there.
        """
        if not CHANNEL_ID.fullmatch(channel):
            return None  # another platform's
        if self.tokens.many and not workspace:
            raise LookupError(
                f"a bot of many Slack workspaces cannot tell whose channel {channel} is; "
                "give its workspace"
            )
        client = await self._client(workspace)
        if not await _may_post_in(client, channel):
            return None
        async with _reaching():
            team = workspace or str((await client.auth_test()).get("team_id") or "")
        return thread_key(team, channel, "")

    async def knows_channel(self, channel: str) -> bool:
        """Whether ``channel`` (an id) is a channel the bot is in and may post to
        (``conversations.info``); not for an archived one, or one the bot is not in.

        Raises:
            LookupError: The bot serves many workspaces: a channel alone names none.
        """
        if self.tokens.many:
            raise LookupError(
                f"a bot of many Slack workspaces cannot tell whose channel {channel} is; "
                "name people instead"
            )
        return await _may_post_in(self.client, channel)

    async def group_members(self, name: str) -> frozenset[str] | None:
        """The members of the user group ``S0GROUP`` or ``@handle``; ``None`` for any
        other name (a user id), without asking Slack.

        Raises:
            LookupError: Slack has no such group (or no user groups at all).
            Undeliverable: Slack could not be reached.
        """
        if self.tokens.many and (name.startswith("@") or is_group_id(name)):
            raise LookupError(
                f"a bot of many Slack workspaces cannot tell whose group {name} is; "
                "name people instead"
            )
        if name.startswith("@"):
            group = await self._group_of_handle(name.removeprefix("@"))
        elif is_group_id(name):
            group = name
        else:
            return None
        try:
            async with _reaching():
                response = await self.client.usergroups_users_list(usergroup=group)
        except SlackApiError as exc:
            if exc.response.get("error") in _NO_GROUP:
                raise LookupError(f"Slack has no user group {name}") from None
            raise
        users = response.get("users") or []
        return frozenset(str(user) for user in users)

    async def permalink(self, channel: str, ts: str, workspace: str | None = None) -> str | None:
        """A link to the message ``ts`` in ``channel`` (``chat.getPermalink``), or ``None``
        when Slack gives none (the caller names the channel instead)."""
        key = (channel, ts)
        if key in self._no_permalink:
            return None
        if key not in self._permalinks:
            if self.tokens.many and workspace is None:
                return None
            try:
                async with _reaching():
                    client = await self._client(workspace)
                    response = await client.chat_getPermalink(channel=channel, message_ts=ts)
            except (SlackApiError, Undeliverable, LookupError) as exc:
                log.debug("no permalink for %s/%s: %s", channel, ts, exc)
                self._no_permalink[key] = True
                return None
            link = response.get("permalink")
            if not isinstance(link, str) or not link:
                self._no_permalink[key] = True
                return None
            self._permalinks[key] = link
        return self._permalinks[key]

    async def _link(self, view: View) -> str | None:
        """The permalink a view shows: a card's request, a pointer's card."""
        if isinstance(view, ApprovalCard) and view.requested_in is not None:
            at = view.requested_in
            return await self.permalink(at.channel, at.root, at.workspace)
        if isinstance(view, CardPointer) and view.at is not None:
            ref = view.at.ref
            channel, ts = ref.get("channel"), ref.get("ts")
            if isinstance(channel, str) and isinstance(ts, str):
                return await self.permalink(channel, ts, view.at.thread.workspace)
        return None

    async def _channel_of(self, near: ThreadKey, to: Destination) -> str:
        """The channel of a destination (a person's: the bot's direct message with them)."""
        if to.channel is not None:
            return to.channel
        if to.user_id is not None:
            return await self._direct_channel(near.workspace, to.user_id)
        raise ValueError("a destination names a channel or a person")

    async def _bot_id(self, workspace: str, client: AsyncWebClient) -> str:
        """The bot's own id in ``workspace`` (``auth.test``, asked once)."""
        if workspace not in self._bot_ids:
            async with _reaching():
                response = await client.auth_test()
            bot_id = response.get("bot_id")
            if not isinstance(bot_id, str) or not bot_id:
                raise LookupError(f"auth.test gave no bot id in {workspace}")
            self._bot_ids[workspace] = bot_id
        return self._bot_ids[workspace]

    async def _direct_channel(self, workspace: str, user_id: str) -> str:
        """The bot's direct message channel with ``user_id`` (opened if need be)."""
        key = f"{workspace}:{user_id}"  # the bot of each workspace has its own
        if key not in self._direct:
            async with _reaching():
                client = await self._client(workspace)
                response = await client.conversations_open(users=user_id)
            channel = response.get("channel")
            if not isinstance(channel, dict) or not isinstance(channel.get("id"), str):
                raise RuntimeError(f"conversations.open gave no channel for {user_id}")
            self._direct[key] = channel["id"]
        return self._direct[key]

    async def _group_of_handle(self, handle: str) -> str:
        """The id of the enabled user group whose handle is ``handle``."""
        try:
            async with _reaching():
                response = await self.client.usergroups_list(include_disabled=False)
        except SlackApiError as exc:
            if exc.response.get("error") in _NO_GROUP:
                raise LookupError(f"Slack has no user group @{handle}") from None
            raise
        for group in response.get("usergroups") or []:
            if not isinstance(group, dict):
                continue
            if str(group.get("handle", "")).casefold() == handle.casefold() and group.get("id"):
                return str(group["id"])
        raise LookupError(f"Slack has no user group @{handle}")

    async def _client(self, workspace: str | None) -> AsyncWebClient:
        """The client that speaks for the bot in ``workspace`` (``LookupError``: the app is
        not installed there)."""
        return await self.tokens.client_for(workspace)

    async def _post(
        self, thread: ThreadKey, message: SlackMessage, *, metadata: dict[str, Any] | None = None
    ) -> MessageRef:
        response = await self._send(
            thread.workspace, thread.channel, thread.root, message, metadata=metadata
        )
        return message_ref(str(response["channel"]), str(response["ts"]))

    async def _send(
        self,
        workspace: str,
        channel: str,
        thread_ts: str | None,
        message: SlackMessage,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> AsyncSlackResponse:
        """``chat.postMessage``, in the channel's turn and within its limit."""
        client = await self._client(workspace)

        async def post() -> AsyncSlackResponse:
            return await client.chat_postMessage(
                channel=channel,
                thread_ts=thread_ts,
                **message.fields(),
                metadata=metadata,
                unfurl_links=False,
                unfurl_media=False,
            )

        return await self.pacer.call(channel, f"post:{channel}", post)


async def _may_post_in(client: AsyncWebClient, channel: str) -> bool:
    """Whether the bot is in ``channel`` and may post there (``conversations.info``): not
    an unknown or archived one, nor one it is not a member of."""
    try:
        async with _reaching():
            response = await client.conversations_info(channel=channel)
    except SlackApiError as exc:
        if exc.response.get("error") in _NO_CHANNEL:
            return False
        raise
    info = response.get("channel")
    if not isinstance(info, dict):
        return False
    return not info.get("is_archived") and info.get("is_member") is not False
