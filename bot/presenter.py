"""How the core speaks: agent streams into views, posting and updating them, and people.

The presenter owns the platforms' messengers, the in-process directory of
people's names, and where cards were posted (in the chat state). The core's
other parts (messages, decisions, housekeeping) speak only through it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

from cachetools import TTLCache

from agents import (
    AuditEntry,
    LockTimeout,
    PendingInfo,
)

from . import texts
from .batches import Batches
from .chat_state import CardCopy, CardPlace, ShownState, ask_of, batch_key
from .following import Following
from .links import LinkFor, Links
from .metrics import Metrics
from .people import MAX_DIRECT, People, scope_of
from .policy import ApprovalPolicy, PolicyError
from .records import SHOWN, call_entry
from .segments import Segments
from .timers import deliver_later, post_later, set_timers, update_key
from .traces import TracedMessenger
from .types import (
    ApprovalCard,
    BatchCard,
    CardPointer,
    CardStatus,
    Destination,
    MessageRef,
    Messenger,
    Notice,
    Posted,
    PostMark,
    Prompt,
    PromptStatus,
    Reply,
    Text,
    ThreadKey,
    Undeliverable,
    View,
)
from .views import approval_card, card_mark, post_mark, prompt, question_mark

log = logging.getLogger(__name__)

CHANNEL_TTL = 300.0
"""How long (seconds) a platform's answer on whether it knows a channel is kept."""
CHANNELS_KEPT = 1_000


class Presenter:
    """Streams into views, posting and updating them, statuses, and naming people.

    Args:
        agent_id: The top agent: only its own words are the answer.
        chat: Where each card's place is kept.
        following: Threads the bot posts in become followed.
        policy: For how many approvals a card asks.
        metrics: Runs finished and failed are counted here.
        links: Decision links, for cards sent to people.
        schema_of: A pending call's input schema, for the card's Edit form.
        record: Puts an event on the audit log (``Agent.record``): where each card went.
    """

    def __init__(
        self,
        *,
        agent_id: str,
        chat: ShownState,
        following: Following,
        policy: ApprovalPolicy,
        metrics: Metrics,
        links: Links,
        schema_of: Callable[[PendingInfo], dict[str, Any] | None] = lambda _: None,
        record: Callable[[AuditEntry], Awaitable[None]] | None = None,
    ) -> None:
        self._top = (agent_id,)
        self._record = record
        self._links = links
        self.batches = Batches(chat)
        """Cards of several calls: how each of their calls reads now."""
        self._schema_of = schema_of
        self._chat = chat
        self._kept_updates: set[str] = set()
        """Messages whose update this process kept for later (``update``)."""
        self._following = following
        self._policy = policy
        self._metrics = metrics
        self._messengers: dict[str, Messenger] = {}
        self.on_settle: list[Callable[[str], None]] = []
        """Called with a top run's id when a decision on it is claimed here, or a
        segment of it ends it (not a pause): the client service wakes whoever waits
        for its decision (``settle``)."""
        self.people = People(policy, self.messenger_of)
        """Who people are, and who may decide what."""
        self.consume = Segments(self, agent_id=agent_id, policy=policy, metrics=metrics).consume
        """Drive a run segment to its end, posting what it brings (``Segments.consume``)."""
        self._channels: TTLCache[tuple[str, str], bool] = TTLCache(
            maxsize=CHANNELS_KEPT, ttl=CHANNEL_TTL
        )
        """Whether a platform knows a channel (asked at start, then again now and then:
        the bot may be invited to it, or it may be archived)."""

    # -- platforms --------------------------------------------------------------

    def register(self, platform: str, messenger: Messenger) -> None:
        """Answer threads of ``platform`` through ``messenger`` (each call a span)."""
        self._messengers[platform] = TracedMessenger(platform, messenger)

    def messenger(self, platform: str) -> Messenger:
        """The messenger registered for a platform.

        Raises:
            LookupError: No adapter registered one (a wiring bug).
        """
        try:
            return self._messengers[platform]
        except KeyError:
            raise LookupError(f"no messenger registered for platform {platform!r}") from None

    def settle(self, run_id: str) -> None:
        """Tell ``on_settle`` that ``run_id`` was decided or ended here."""
        for settled in self.on_settle:
            settled(run_id)

    def messengers(self) -> list[Messenger]:
        """Every platform's messenger, in the order registered."""
        return list(self._messengers.values())

    def messenger_of(self, thread: ThreadKey | None) -> Messenger | None:
        """The messenger of a thread's platform, if this process serves it."""
        return self._messengers.get(thread.platform) if thread is not None else None

    async def check_places(self) -> None:
        """Fail closed on a policy naming a channel or a user group no platform here has.

        Every channel must be one some platform can post in; every ``@handle`` a group
        some platform has; a name a platform takes for a group (``S0GROUP``) must be one.

        Raises:
            PolicyError: One problem per unknown name.
        """
        people, channels = self._policy.names()
        problems: list[tuple[str | None, str]] = [
            p for c in sorted(channels) if (p := await self._check_channel(c))
        ]
        problems += [
            p for n in sorted(people) if (p := await self.people.check_name(n, self._messengers))
        ]
        if problems:
            raise PolicyError(self._policy.source or "<policy>", problems)

    async def _check_channel(self, channel: str) -> tuple[str, str] | None:
        """Why no platform here can post in ``channel``, or ``None``."""
        for platform, messenger in self._messengers.items():
            try:
                known = await messenger.knows_channel(channel)
            except Exception as exc:  # an outage, a refusal (a scope the app lacks)
                return ("channel", f"{platform} could not be asked about {channel!r}: {exc}")
            self._channels[platform, channel] = known
            if known:
                return None
        platforms = ", ".join(sorted(self._messengers)) or "none"
        return ("channel", f"{channel!r} is no channel the bot can post in ({platforms})")

    async def show_pending(
        self,
        messenger: Messenger,
        thread: ThreadKey,
        info: PendingInfo,
        error: str | None = None,
        *,
        attempt: int = 0,
        look_first: bool = False,
        cause: str | None = None,
    ) -> None:
        """Post a waiting call's card (or question) and remember where it is; when the
        post fails, it is posted again later (``attempt``: the posts failed before).

        ``error``: why the last answer to the question did not fit (it is asked again),
        in the work of the intake entry whose run id is ``cause`` (``PostMark.cause``).
        ``look_first``: this work may have been done before by a process that died
        before recording where (a retaken message): the card (its copies and pointer)
        or question is looked for first, and posted only where it is missing.
        """
        place: CardPlace | None = None
        if info.kind == "approval":
            place = await self._route(messenger, thread, info, look_first=look_first)
        if place is None:
            view: View
            if info.kind == "approval":
                view = self.card(thread, info)
                mark = card_mark(view)
            else:
                view = prompt(info, error=error)
                mark = question_mark(info, cause=cause)
            since = info.created_at if look_first else None
            found = await self.find(messenger, thread, mark, since=since)
            if found is not None:
                ref: MessageRef | None = found.ref
                await self._following.follow(thread)  # as its post would have
            else:
                ref = await self.say(messenger, thread, view, keep=False, mark=mark)
            if ref is None:
                await post_later(self._chat, info, attempt)
                return
            # The thread goes along so the expiry sweep knows where to say so.
            place = CardPlace(thread=thread, ref=ref)
        await self._remember(messenger, thread, info, place)

    async def show_batch(
        self, messenger: Messenger, thread: ThreadKey, infos: list[PendingInfo]
    ) -> None:
        """Post calls one model turn asked for together on one card (the policy's
        ``batch``) and remember where each is; when that post fails, each is posted on
        its own card instead (and, failing that, later, as any card is)."""
        cards = tuple(self.card(thread, info) for info in infos)
        view = BatchCard(cards=cards)
        ref = await self.say(messenger, thread, view, keep=False)
        if ref is None:
            for info in infos:
                await self.show_pending(messenger, thread, info)
            return
        key = batch_key(infos[0])
        place = CardPlace(thread=thread, ref=ref, batch=key)
        try:
            await self.batches.keep(key, view)
        except Exception:  # its calls are still decided one by one; only the redraw suffers
            log.exception("could not keep the card of %s calls of %s", len(infos), key)
        for info in infos:
            await self._remember(messenger, thread, info, place)

    async def _remember(
        self, messenger: Messenger, thread: ThreadKey, info: PendingInfo, place: CardPlace
    ) -> None:
        """Remember where a waiting call's card is, its timers, and whose lists it is on;
        and put where it went on record."""
        try:
            await self._chat.set_card(info.run_id, ask_of(info), place)
            if info.kind == "approval":
                await set_timers(self._chat, self._policy.rule(info.tool_name, info), info)
                await self._chat.index_waiting(
                    scope_of(thread), self.people.waiting_names(info), info.run_id
                )
                await self.inboxes_changed(messenger, thread, info.tool_name, info.requester)
        except Exception:
            log.exception("could not remember the card of %s/%s", info.run_id, info.tool_call_id)
        if self._record is not None:
            where = ", ".join(copy.thread.id for copy in place.copies) or thread.id
            try:
                await self._record(call_entry(SHOWN, info, thread.id, where=where))
            except Exception:  # the card is up: its place, not this line, decides
                log.exception("could not put the card of %s on record", info.tool_call_id)

    async def _route(
        self, messenger: Messenger, thread: ThreadKey, info: PendingInfo, *, look_first: bool
    ) -> CardPlace | None:
        """Send a card where the policy says (a channel, each approver's direct messages),
        with a pointer in ``thread``; ``None`` when it belongs in ``thread`` itself (the
        policy says so, the platform has no such places, or none of them took it).
        ``look_first`` as on ``show_pending``."""
        destinations = await self._destinations(thread, info)
        if not destinations:
            return None
        card = self.card(thread, info)
        since = info.created_at if look_first else None
        copies = await self.send_copies(messenger, thread, card, destinations, look_since=since)
        if not copies:
            return None
        place = CardPlace(thread=thread, ref={}, copies=copies)
        mark = card_mark(card, pointer=True)
        found = await self.find(messenger, thread, mark, since=since)
        if found is not None:
            return replace(place, ref=found.ref)
        ref = await self.say(messenger, thread, self.pointer(place, card), mark=mark)
        return replace(place, ref=ref or {})

    async def send_copies(
        self,
        messenger: Messenger,
        thread: ThreadKey,
        card: ApprovalCard,
        destinations: list[Destination],
        *,
        look_since: datetime | None = None,
    ) -> tuple[CardCopy, ...]:
        """Post ``card`` (asked in ``thread``) at each destination that takes it.

        ``look_since``: a copy may have been posted there since then by a process that
        died before recording it: each is looked for first, and posted only if missing.
        """
        copies: list[CardCopy] = []
        mark = card_mark(card)
        for to in destinations:
            shown = await self._copy(card, thread, to)
            found = await self.find(messenger, thread, mark, since=look_since, to=to)
            if found is not None:
                copies.append(CardCopy(to=to, thread=found.thread, ref=found.ref))
                continue
            try:
                posted = await messenger.post_elsewhere(thread, to, shown, mark=mark)
            except Undeliverable as exc:
                log.warning("sending a card to %s failed: %s", to, exc)
                continue
            except Exception:
                log.exception("sending a card to %s failed", to)
                continue
            if posted is None:
                return ()  # this platform has no other places: the card stays in the thread
            copies.append(CardCopy(to=to, thread=posted.thread, ref=posted.ref))
        return tuple(copies)

    async def _destinations(self, thread: ThreadKey, info: PendingInfo) -> list[Destination]:
        """Where the policy sends a call's card instead of its thread (nowhere: empty)."""
        rule = self._policy.rule(info.tool_name, info)
        if rule.notify == "dm":
            return self.direct(info, await self.people.deciders(thread, info))
        for channel in rule.channels:
            if await self._knows(thread.platform, channel):
                return [Destination(channel=channel)]
        if rule.channels:
            log.warning(
                "%s: no channel of %s the bot can post in (%s); the card stays in the thread",
                info.tool_name,
                thread.platform,
                ", ".join(rule.channels),
            )
        return []

    def direct(self, info: PendingInfo, people: frozenset[str]) -> list[Destination]:
        """Direct messages to ``people`` about ``info`` (``People.approvers``)."""
        chosen = self.people.approvers(info, people)
        if len(chosen) > MAX_DIRECT:
            log.warning(
                "%s: %d approvers, only %d get a DM", info.tool_name, len(chosen), MAX_DIRECT
            )
        return [Destination(user_id=user) for user in chosen[:MAX_DIRECT]]

    async def _copy(self, card: ApprovalCard, thread: ThreadKey, to: Destination) -> ApprovalCard:
        """``card`` (asked in ``thread``) as its copy at ``to`` shows it: with a link to
        the thread, and, sent to one approver while it waits, their decision page (when
        the bot knows its public address)."""
        page = None
        links = self._links
        if to.user_id is not None and card.status == "pending" and links.public_url:
            link = LinkFor(run_id=card.run_id, tool_call_id=card.tool_call_id, user_id=to.user_id)
            page = await links.url(link)
        return replace(card, requested_in=thread, page=page)

    async def _knows(self, platform: str, channel: str) -> bool:
        messenger = self._messengers.get(platform)
        if messenger is None:
            return False
        if (platform, channel) not in self._channels:
            try:
                self._channels[platform, channel] = await messenger.knows_channel(channel)
            except Exception:
                log.warning("could not ask %s about channel %s", platform, channel, exc_info=True)
                return False
        return self._channels[platform, channel]

    def pointer(self, place: CardPlace, card: ApprovalCard) -> CardPointer:
        """The line in the requester's thread for a card sent elsewhere."""
        channel = next((c for c in place.copies if c.to.channel is not None), None)
        people = tuple(
            self.people.who(place.thread, c.to.user_id)
            for c in place.copies
            if c.to.user_id is not None
        )
        return CardPointer(
            card=card,
            channel=channel.to.channel if channel else None,
            at=channel.posted if channel else None,
            people=people,
        )

    async def show_card(
        self,
        messenger: Messenger,
        place: CardPlace,
        view: ApprovalCard | Prompt,
    ) -> View:
        """Show a card's (or question's) new state everywhere it is: in its thread (the
        pointer, when it was sent elsewhere; its line, on a card of several calls) and
        each copy. What its message now shows (a card of several calls, on one)."""
        shown: View = view
        if isinstance(view, ApprovalCard) and place.batch is not None:

            async def show(drawn: View) -> None:
                await self.update(messenger, place.thread, place.ref, drawn)

            shown = await self.batches.redraw(place, view, show)
        elif isinstance(view, ApprovalCard) and place.copies:
            for copy in place.copies:
                shown = await self._copy(view, place.thread, copy.to)
                await self.update(messenger, copy.thread, copy.ref, shown)
            if place.ref:
                await self.update(messenger, place.thread, place.ref, self.pointer(place, view))
        else:
            await self.update(messenger, place.thread, place.ref, view)
        if isinstance(view, ApprovalCard):
            requester = view.requester.id if view.requester else None
            await self.inboxes_changed(messenger, place.thread, view.tool_name, requester)
        return shown

    async def inboxes_changed(
        self, messenger: Messenger, thread: ThreadKey, tool_name: str, requester: str | None
    ) -> None:
        """Tell the platform whose inboxes a call's change touches: who may decide it
        (groups as members; nobody listed: nobody in particular) and who asked."""
        names = self._policy.anyone_of(tool_name)  # whichever tier the call is in
        people = await self.people.groups.expand(thread.platform, messenger, names)
        if requester:
            people |= {requester}
        if not people:
            return
        try:
            await messenger.inboxes_changed(thread, people)
        except Exception:
            log.warning("showing inboxes again in %s failed", thread.id, exc_info=True)

    # -- cards ------------------------------------------------------------------

    def card(
        self,
        thread: ThreadKey,
        info: PendingInfo,
        *,
        status: CardStatus = "pending",
        decided_by: tuple[str, ...] = (),
        reason: str | None = None,
        approvals: tuple[str, ...] = (),
        previous_args: dict[str, Any] | None = None,
        edited_by: str | None = None,
        granted_for: str | None = None,
        declined_for: str | None = None,
    ) -> ApprovalCard:
        """The card of a waiting (or decided) call, people named as far as known.

        ``previous_args``: on a call approved as edited, what it asked to run with
        (``info`` holds the edited arguments); ``edited_by`` who edited them.
        """
        rule = self._policy.rule(info.tool_name, info)
        # Ids stay in the snapshot, the audit log and the policy.
        return approval_card(
            info,
            expires_at=info.expires_at,
            status=status,
            requester=self.people.who(thread, info.requester) if info.requester else None,
            decided_by=tuple(self.people.who(thread, user) for user in decided_by),
            reason=reason,
            approvals=tuple(self.people.who(thread, user) for user in approvals),
            quorum=rule.quorum,
            schema=self._schema_of(info) if status == "pending" else None,
            previous_args=previous_args,
            edited_by=self.people.who(thread, edited_by) if edited_by else None,
            grant_for=rule.grant_for if status == "pending" else (),
            granted_for=granted_for,
            respond=rule.respond,
            never_for=rule.never_for,
            declined_for=declined_for,
            ask=ask_of(info),
            deciders=tuple(sorted(self._policy.deciders_of(info))) if status == "pending" else (),
        )

    def settled(
        self, thread: ThreadKey, info: PendingInfo, status: PromptStatus, user_id: str
    ) -> Prompt:
        """A question as it reads once ``user_id`` answered, declined or cancelled it."""
        return prompt(info, status=status, decided_by=self.people.who(thread, user_id))

    async def show_settled(
        self,
        messenger: Messenger,
        thread: ThreadKey,
        info: PendingInfo,
        status: PromptStatus,
        user_id: str,
    ) -> None:
        """Replace a question's message with its settled form (its buttons go)."""
        place = await self.card_place(info)
        if place is not None:
            await self.show_card(messenger, place, self.settled(thread, info, status, user_id))

    async def close_card(
        self,
        messenger: Messenger,
        thread: ThreadKey,
        call: PendingInfo,
        status: Literal["expired", "stopped"],
        by: str | None = None,
    ) -> CardPlace | None:
        """Show the card (or question) of a call that left its run undecided without its
        buttons: expired (its run was interrupted), or stopped by ``by``; where it was."""
        place = await self.card_place(call)
        if place is None:
            return None
        if call.kind != "approval":
            ended = (
                self.settled(thread, call, "cancelled", by)
                if status == "stopped" and by
                else prompt(call, status="expired")
            )
            await self.show_card(messenger, place, ended)
            return place
        card = self.card(thread, call, status=status, decided_by=(by,) if by else ())
        # A quorum card's votes update it under this lock: take it too, so a vote
        # counted just before cannot show up after the card closed.
        try:
            async with self._chat.card_lock(call.run_id, ask_of(call)):
                await self.show_card(messenger, place, card)
        except LockTimeout:
            await self.show_card(messenger, place, card)
        return place

    async def card_place(self, call: PendingInfo) -> CardPlace | None:
        """Where a call's card was posted, if it was (a failing lookup is logged)."""
        try:
            return await self._chat.card_of(call.run_id, ask_of(call))
        except Exception:
            log.exception("could not find the card of %s/%s", call.run_id, call.tool_call_id)
            return None

    # -- speaking ---------------------------------------------------------------

    async def say(
        self,
        messenger: Messenger,
        thread: ThreadKey,
        view: View,
        *,
        follow: bool = True,
        keep: bool = True,
        mark: PostMark | None = None,
    ) -> MessageRef | None:
        """Post a view; a platform hiccup is logged and must not stop the run. A post the
        platform could not take (``Undeliverable``) is kept and made later (``keep``;
        a card or question is posted again its own way, ``show_pending``).

        ``follow``: replies in ``thread`` are for the bot from now on (not under a card
        sent to an approvers' channel: people talk there among themselves). ``mark``:
        which post this is (``Messenger.post``); by default what the view says of
        itself (``post_mark``: a finished run's answer, a card, a pointer).
        """
        try:
            ref = await messenger.post(thread, view, mark=mark or post_mark(view))
        except Undeliverable as exc:
            log.warning("posting a %s to %s failed: %s", type(view).__name__, thread.id, exc)
            if keep:
                await deliver_later(self._chat, thread, view)
            return None
        except Exception:
            log.exception("posting a %s to %s failed", type(view).__name__, thread.id)
            return None
        if follow:
            await self._following.follow(thread)
        return ref

    async def find(
        self,
        messenger: Messenger,
        near: ThreadKey,
        mark: PostMark,
        *,
        since: datetime | None,
        to: Destination | None = None,
    ) -> Posted | None:
        """A post made before a restart, looked for before it is made again
        (``Messenger.find_post``); ``None`` when ``since`` is (nothing to look for: the
        work was not done before). A lookup that fails is logged and found nothing: the
        post is made again (it may show twice, never not at all)."""
        if since is None:
            return None
        try:
            found = await messenger.find_post(near, mark, since=since, to=to)
        except Exception as exc:
            log.warning("could not look for the %s of %s: %s", mark.post, mark.run_id, exc)
            log.debug("the failed lookup", exc_info=True)
            return None
        if found is None:
            log.info("found no %s of %s from before the restart: posting it", *_what(mark))
        else:
            log.info("found the %s of %s from before the restart: not posting it", *_what(mark))
        return found

    async def finish_cut(
        self, messenger: Messenger, thread: ThreadKey, answer: Reply, *, since: datetime
    ) -> bool:
        """Whether ``answer`` was shown by completing the live message a process that
        died cut short (``Messenger.find_cut_live``): found, it is updated to read the
        whole answer. ``False`` when none is found, or the lookup fails (logged): the
        core posts the answer (it may show twice, never not at all)."""
        try:
            cut = await messenger.find_cut_live(thread, since=since, words=answer.text)
        except Exception as exc:
            log.warning("could not look for an answer cut short in %s: %s", thread.id, exc)
            log.debug("the failed lookup", exc_info=True)
            return False
        if cut is None:
            return False
        log.info("found an answer cut short before the restart in %s: completing it", thread.id)
        # Marked as a posted answer is, so a later retake finds it by its mark.
        return await self.update(messenger, cut.thread, cut.ref, answer, mark=post_mark(answer))

    async def tell(self, thread: ThreadKey, user_id: str, text: Text) -> None:
        """Say something to one person only, in ``thread`` (a failure is logged)."""
        try:
            await self.messenger(thread.platform).tell(thread, user_id, text)
        except Undeliverable as exc:
            log.warning("telling %s in %s failed: %s", user_id, thread.id, exc)
        except Exception:
            log.exception("telling %s in %s failed", user_id, thread.id)

    async def update(
        self,
        messenger: Messenger,
        thread: ThreadKey,
        ref: MessageRef,
        view: View,
        *,
        mark: PostMark | None = None,
    ) -> bool:
        """Replace a posted view (``mark``: as ``Messenger.update``); whether it is shown
        or will be. A failure is logged; one the platform could not take is kept and
        made later, the latest view of the message winning: a later update made here
        replaces the kept one, so an older view never comes back. ``False``: the
        platform refused it for good (the message is gone, say)."""
        key = update_key(thread, ref)
        try:
            await messenger.update(thread, ref, view, mark=mark)
        except Undeliverable as exc:
            log.warning("updating a %s in %s failed: %s", type(view).__name__, thread.id, exc)
            self._kept_updates.add(key)
            await deliver_later(self._chat, thread, view, ref=ref)
            return True
        except Exception:
            log.exception("updating a %s in %s failed", type(view).__name__, thread.id)
            return False
        if key in self._kept_updates:
            self._kept_updates.discard(key)
            await deliver_later(self._chat, thread, view, ref=ref, due=0.0)
        return True

    async def status(self, messenger: Messenger, thread: ThreadKey, status: str | None) -> None:
        """Show or clear "is thinking…" (a failure is logged)."""
        try:
            await messenger.set_status(thread, status)
        except Undeliverable as exc:
            log.warning("setting the status in %s failed: %s", thread.id, exc)
        except Exception:
            log.warning("setting the status in %s failed", thread.id, exc_info=True)

    def notice_for(self, thread: ThreadKey, requester: str | None, text: str) -> Notice:
        """A notice for whoever asked (named by each platform its way), or for everyone."""
        if requester is None:
            return Notice(text=texts.NO_REQUESTER.format(text=text))
        return Notice(text=text, to=self.people.who(thread, requester))


def _what(mark: PostMark) -> tuple[str, str]:
    """A mark as the log names it: what the post is, and whose (the run, or its call)."""
    return mark.post, f"{mark.run_id}/{mark.call}" if mark.call else mark.run_id
