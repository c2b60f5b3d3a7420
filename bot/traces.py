"""The chat core's spans: one trace per request, from the message that asked to the
final answer, across the wait for a person (``approval.wait``) and the click that
ends it, hours later, on any replica: the run keeps the trace it started in
(``agents.tracing``), and a decision continues it. Each call to a platform is a span
of whatever request it serves (``TracedMessenger``).

Spans go nowhere until the composition root installs an exporter (``bot.tracing``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Final

from opentelemetry.trace import Span, SpanKind

from agents import PendingInfo
from agents.tracing import TRACER, context_of

from .types import (
    Click,
    Destination,
    IncomingMessage,
    Live,
    MessageRef,
    Messenger,
    Person,
    Posted,
    PostMark,
    Text,
    ThreadKey,
    View,
)

WAIT: Final = "approval.wait"
"""The span of one call's wait for a person, from its card to its decision."""


@contextmanager
def message_span(message: IncomingMessage) -> Iterator[Span]:
    """A person's message as the current span: a new trace, the request's root."""
    thread = message.thread
    with TRACER.start_as_current_span(
        "chat.message",
        kind=SpanKind.SERVER,
        attributes={
            "chat.platform": thread.platform,
            "chat.thread": thread.id,
            "enduser.id": message.user_id,
        },
    ) as span:
        yield span


@contextmanager
def click_span(click: Click, call: PendingInfo) -> Iterator[Span]:
    """A click on ``call``'s card as the current span, in the trace its run started in
    (a new one when the run kept none)."""
    with TRACER.start_as_current_span(
        "chat.click",
        context=context_of(call.trace),
        kind=SpanKind.SERVER,
        attributes={
            "chat.platform": click.thread.platform,
            "chat.thread": click.thread.id,
            "chat.action": click.action,
            "enduser.id": click.user_id,
            "gen_ai.tool.name": call.tool_name,
            "gen_ai.tool.call.id": call.tool_call_id,
        },
    ) as span:
        yield span


@contextmanager
def run_span(name: str, run_id: str, trace: Mapping[str, str] | None) -> Iterator[Span]:
    """Work on a run that no one's message or click brings now (``chat.expire``: its
    call ran out of time; ``chat.recover``: a process that died left it) as the
    current span, in the trace its run started in (a new one when it kept none)."""
    with TRACER.start_as_current_span(
        name, context=context_of(trace), kind=SpanKind.INTERNAL, attributes={"run.id": run_id}
    ) as span:
        yield span


def waited(
    call: PendingInfo,
    *,
    tier: str | None,
    outcome: str,
    decided_by: str | None,
    now: datetime | None = None,
) -> None:
    """Put ``call``'s wait for a person on its run's trace, now that it ended
    (``outcome``: how; ``tier``: the policy's tier it was asked in)."""
    end = now or datetime.now(UTC)
    attributes: dict[str, str | float] = {
        "approval.tool": call.tool_name,
        "approval.outcome": outcome,
        "approval.wait_seconds": max(0.0, (end - call.created_at).total_seconds()),
        "gen_ai.tool.call.id": call.tool_call_id,
    }
    if tier is not None:
        attributes["approval.tier"] = tier
    if decided_by is not None:
        attributes["approval.decided_by"] = decided_by
    span = TRACER.start_span(
        WAIT,
        context=context_of(call.trace),
        start_time=_nanoseconds(call.created_at),
        attributes=attributes,
    )
    span.end(end_time=_nanoseconds(end))


def _nanoseconds(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000_000)


class TracedMessenger:
    """A platform's messenger whose every call is a span (``platform.<call>``) of the
    request it serves.

    Args:
        platform: The platform's name, on each span.
        inner: The adapter's messenger, which does the work.
    """

    def __init__(self, platform: str, inner: Messenger) -> None:
        self.platform = platform
        self.inner = inner

    @contextmanager
    def _span(self, call: str, thread: ThreadKey | None = None) -> Iterator[None]:
        attributes = {"chat.platform": self.platform}
        if thread is not None:
            attributes["chat.thread"] = thread.id
        with TRACER.start_as_current_span(
            f"{self.platform}.{call}", kind=SpanKind.CLIENT, attributes=attributes
        ):
            yield

    async def post(
        self, thread: ThreadKey, view: View, *, mark: PostMark | None = None
    ) -> MessageRef:
        with self._span("post", thread):
            return await self.inner.post(thread, view, mark=mark)

    async def find_post(
        self,
        near: ThreadKey,
        mark: PostMark,
        *,
        since: datetime,
        to: Destination | None = None,
    ) -> Posted | None:
        with self._span("find_post", near):
            return await self.inner.find_post(near, mark, since=since, to=to)

    async def find_cut_live(self, near: ThreadKey, *, since: datetime, words: str) -> Posted | None:
        with self._span("find_cut_live", near):
            return await self.inner.find_cut_live(near, since=since, words=words)

    async def update(
        self, thread: ThreadKey, ref: MessageRef, view: View, *, mark: PostMark | None = None
    ) -> None:
        with self._span("update", thread):
            await self.inner.update(thread, ref, view, mark=mark)

    async def tell(self, thread: ThreadKey, user_id: str, text: Text) -> None:
        with self._span("tell", thread):
            await self.inner.tell(thread, user_id, text)

    async def set_status(self, thread: ThreadKey, status: str | None) -> None:
        with self._span("set_status", thread):
            await self.inner.set_status(thread, status)

    async def start_live(self, thread: ThreadKey, to: Person | None) -> Live | None:
        with self._span("start_live", thread):
            return await self.inner.start_live(thread, to)

    async def post_elsewhere(
        self, near: ThreadKey, to: Destination, view: View, *, mark: PostMark | None = None
    ) -> Posted | None:
        with self._span("post_elsewhere", near):
            return await self.inner.post_elsewhere(near, to, view, mark=mark)

    async def inboxes_changed(self, thread: ThreadKey, people: frozenset[str]) -> None:
        with self._span("inboxes_changed", thread):
            await self.inner.inboxes_changed(thread, people)

    async def channel_place(self, channel: str, workspace: str | None = None) -> ThreadKey | None:
        with self._span("channel_place"):
            return await self.inner.channel_place(channel, workspace)

    async def knows_channel(self, channel: str) -> bool:
        with self._span("knows_channel"):
            return await self.inner.knows_channel(channel)

    async def group_members(self, name: str) -> frozenset[str] | None:
        with self._span("group_members"):
            return await self.inner.group_members(name)
