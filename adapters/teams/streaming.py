"""A live answer in a Teams 1:1 chat: Bot Framework streaming ("Stream bot messages").

One stream is one message. Its first request, sent when the live answer starts,
is an informative update ("Working…", a ``typing`` activity with a ``streaminfo``
entity, ``streamSequence`` 1, no ``streamId``); Teams answers with the id that
every later request carries as ``streamId``. While no text has been written, tool
steps are informative updates too ("Running deploy…"). Then each ``streaming``
update carries the whole text so far (Teams requires each to extend the last),
with a ``streamSequence`` one higher than the last. The ``final`` request is a
``message`` with the whole text (and a short list of the steps), ``streamType``
final, and no ``streamSequence``.

Teams' rules this keeps (its documentation, "Stream bot messages"): one request at a
time, the next only after the last succeeded; at most one request a second
(``StreamPace``: text is buffered for ``every`` seconds, no two requests closer
than ``gap``); informative text within 1000 characters; the whole stream within
two minutes (``STREAM_TIME_LIMIT``); a message within Teams' size limit (a longer
answer ends the streamed message at the limit and goes on in plain messages);
one stream per chat at a time (the messenger starts no second one).

Throttling (429) and Teams' bad moments are waited out where every call to Teams
is (``limits``, through the channel). When Teams refuses on the way all the same
(the stream is given up, the text keeps being collected), ``finish`` shows the
whole text anyway: in the streamed message replaced in place (``PUT``, as a plain
message) when some text was streamed, else (or when Teams keeps the message as it
is) in plain messages below it; only when those fail too does it raise
``StreamBroken``, and the core posts the text whole. What was streamed may show
twice; nothing is lost.

Except when the user pressed Teams' Stop on it (403 ``ContentStreamNotAllowed``
"Content stream was cancelled by user."): they asked for no more, so nothing more
is shown (Teams keeps what was streamed, and lets nothing change it), and
``stopped`` is called once, so the adapter stops the request itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal, Protocol

from botbuilder.schema import Activity, ActivityTypes, Entity

from bot import Step, Undeliverable, plain_text

from . import blocks, feedback, texts

log = logging.getLogger(__name__)

STREAM_TIME_LIMIT: Final = 120.0
"""Teams ends a stream two minutes after it started ("exceeded streaming time")."""
STREAM_TIME_MARGIN: Final = 10.0
"""The last seconds of a stream are left alone: no request Teams would refuse."""
INFORMATIVE_LIMIT: Final = 1000
"""Informative updates are at most 1 KB or 1000 characters."""
TEXT_BUDGET: Final = blocks.CARD_BUDGET_BYTES
"""The most text (UTF-8 bytes) one message carries, with room for the activity."""
STEPS_SHOWN: Final = 5
"""The most steps the final message lists (then "…and 2 more")."""
STEP_DETAIL_LIMIT: Final = 200

StreamType = Literal["informative", "streaming", "final"]


@dataclass(frozen=True, kw_only=True)
class StreamPace:
    """How often a stream may send: text every ``every`` seconds (Teams recommends
    buffering 1.5 to 2 seconds), and no two requests closer than ``gap`` (its limit
    is one a second). Both count from the moment the last request was answered."""

    every: float = 1.5
    gap: float = 1.0


class StreamRefused(Exception):
    """Teams answered a streaming request with an error status."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message

    @property
    def stopped_by_user(self) -> bool:
        """The user pressed Teams' Stop on this stream ("Stream bot messages": 403
        ``ContentStreamNotAllowed``, "Content stream was cancelled by user.")."""
        text = self.message.lower()
        return self.status == 403 and ("cancelled by user" in text or "canceled by user" in text)

    @property
    def not_here(self) -> bool:
        """Streaming is not allowed for this bot or user at all (not a refusal of this
        stream: it was stopped, it timed out, or it was too large)."""
        text = self.message.lower()
        return self.status == 403 and "not allowed" in text and "completed" not in text


class StreamBroken(Exception):
    """A stream could not show everything written into it: post the text whole."""


class StreamChannel(Protocol):
    """Where a stream's requests go: its 1:1 chat (the messenger addresses them)."""

    async def send(self, activity: Activity) -> str | None:
        """``POST`` an activity; the id Teams answered with, if any.

        Raises:
            StreamRefused: Teams answered with an error.
            Undeliverable: Teams could not be reached.
        """
        ...

    async def replace(self, activity_id: str, activity: Activity) -> None:
        """``PUT`` an activity in place of the one with ``activity_id`` (same errors)."""
        ...


class StreamInfo(Entity):  # type: ignore[misc]  # botbuilder's models are untyped
    """The ``streaminfo`` entity of a streaming request."""

    _attribute_map: ClassVar[dict[str, dict[str, str]]] = {
        "type": {"key": "type", "type": "str"},
        "stream_id": {"key": "streamId", "type": "str"},
        "stream_type": {"key": "streamType", "type": "str"},
        "stream_sequence": {"key": "streamSequence", "type": "int"},
    }

    def __init__(
        self,
        *,
        stream_type: StreamType,
        stream_id: str | None = None,
        stream_sequence: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(type="streaminfo", **kwargs)
        self.stream_id = stream_id
        self.stream_type = stream_type
        self.stream_sequence = stream_sequence


Rated = Callable[[str | None, str], Awaitable[None]]
"""Keeps that a message (its activity id, if Teams answered one) ends a run's answer."""


async def _not_kept(activity_id: str | None, run_id: str) -> None:
    return None


class TeamsStream:
    """The ``Live`` of one answer in a 1:1 chat. Start it with ``open``.

    Args:
        channel: Where its requests go.
        pace: How often it may send.
        done: Called once when it is over (the chat may stream again).
        stopped: Called once (not awaited) if the user pressed Teams' Stop on it while
            the answer was still going.
        rated: Called with the last message of a finished run's answer, which offers
            Teams' feedback buttons (a press names only the message).
        clock: Seconds, monotonic (tests may pass their own).
    """

    def __init__(
        self,
        channel: StreamChannel,
        *,
        pace: StreamPace,
        done: Callable[[], None] = lambda: None,
        stopped: Callable[[], None] = lambda: None,
        rated: Rated = _not_kept,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._channel = channel
        self._pace = pace
        self._done = done
        self._on_stopped = stopped
        self._stopped = False
        """The user pressed Stop: Teams takes nothing more, and nothing more is shown."""
        self._rated = rated
        self._feedback: str | None = None
        """The run a finished answer ends (``finish``): its last message offers feedback."""
        self._clock = clock
        self._text = ""
        self._steps: dict[str, Step] = {}
        self._stream_id: str | None = None
        self._sequence = 0
        self._started = 0.0
        self._answered = 0.0
        """When the last request was answered (pace counts from there)."""
        self._shown_info = ""
        self._shown_text = ""
        self._broken: str | None = None
        self._closing = False
        self._wake = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Start the stream with "Working…" (its first request gets the stream id).

        Raises:
            StreamRefused: Teams refused to stream here.
            Undeliverable: Teams could not be reached.
        """
        self._started = self._clock()
        self._stream_id = await self._request("informative", texts.STREAM_WORKING)
        if not self._stream_id:
            raise StreamRefused(201, "NoStreamId", "Teams answered without a stream id")
        self._shown_info = texts.STREAM_WORKING

    # -- Live --------------------------------------------------------------------

    async def write(self, text: str) -> None:
        """Add answer text; it goes out with the next update."""
        self._text += text
        self._kick()

    async def step(self, step: Step) -> None:
        """Show a tool step (an informative update while no text has been written)."""
        self._steps[step.id] = step
        self._kick()

    async def finish(self, *, feedback: str | None = None, stop: str | None = None) -> None:
        """End the stream with the whole text (and its steps) as the final message.
        ``feedback`` (the run a finished answer ends): its last message offers Teams'
        👍 / 👎.

        Raises:
            StreamBroken: What was written could not all be shown (the core posts it).
        """
        if self._closing:
            return  # finished already
        self._closing = True
        self._feedback = feedback
        self._wake.set()
        try:
            if self._pump is not None:
                await self._pump
            parts = split_text(final_text(self._text, tuple(self._steps.values())))
            if not parts or self._stopped:
                return  # nothing to show (Teams takes no final without text), or not wanted
            if self._broken is None and self._age() < STREAM_TIME_LIMIT - STREAM_TIME_MARGIN:
                try:
                    await self._final(parts[0], last=len(parts) == 1)
                except StreamRefused as exc:
                    if exc.stopped_by_user:
                        # A finished answer has no run left to stop; a paused one has.
                        self._stop_pressed(exc, run_over=feedback is not None)
                        return
                    self._broken = str(exc)
                except Undeliverable as exc:
                    self._broken = str(exc)
                else:
                    await self._posted(parts[1:])
                    return
            await self._repair(parts)
        finally:
            self._done()

    # -- internals -----------------------------------------------------------------

    def _kick(self) -> None:
        if self._closing or self._broken is not None:
            return
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._run())

    async def _run(self) -> None:
        """Send updates until nothing new waits (one request at a time, paced)."""
        while not self._closing and self._broken is None:
            update = self._next_update()
            if update is None:
                return
            kind, _ = update
            due = self._answered + (self._pace.every if kind == "streaming" else self._pace.gap)
            if self._clock() < due:
                await self._sleep_until(due)
                continue  # more may have come meanwhile
            if self._age() >= STREAM_TIME_LIMIT - STREAM_TIME_MARGIN:
                self._broken = "the stream is about to time out"
                return
            await self._send_update(*update)

    def _next_update(self) -> tuple[StreamType, str] | None:
        text = self._text.strip()
        if text:
            if text == self._shown_text or _too_big(text):
                return None  # too big: the rest waits for the final message
            return "streaming", text
        if self._shown_text:
            return None
        info = informative_text(tuple(self._steps.values()))
        return None if info == self._shown_info else ("informative", info)

    async def _send_update(self, kind: StreamType, text: str) -> None:
        try:
            await self._request(kind, text)
        except StreamRefused as exc:
            if exc.stopped_by_user:
                self._stop_pressed(exc, run_over=False)
                return
            log.warning("Teams stopped a streamed answer: %s", exc)
            self._broken = str(exc)
            return
        except Undeliverable as exc:
            log.warning("a streamed answer could not be sent: %s", exc)
            self._broken = str(exc)
            return
        if kind == "streaming":
            self._shown_text = text
        else:
            self._shown_info = text

    def _stop_pressed(self, exc: StreamRefused, *, run_over: bool) -> None:
        """The user pressed Stop: the stream is over, and (once) the request is stopped."""
        log.info("the user stopped a streamed answer: %s", exc)
        self._broken = str(exc)
        if self._stopped:
            return
        self._stopped = True
        if not run_over:
            self._on_stopped()

    async def _request(self, kind: StreamType, text: str) -> str | None:
        self._sequence += 1
        info = StreamInfo(
            stream_type=kind, stream_id=self._stream_id, stream_sequence=self._sequence
        )
        activity = Activity(type=ActivityTypes.typing, text=text, entities=[info])
        if kind == "streaming":
            activity.text_format = "markdown"
        try:
            return await self._channel.send(activity)
        finally:
            self._answered = self._clock()

    async def _final(self, text: str, *, last: bool) -> None:
        """The final request; ``last``: the answer ends with it."""
        await self._sleep_until(self._answered + self._pace.gap, wake=False)
        info = StreamInfo(stream_type="final", stream_id=self._stream_id)
        try:
            await self._channel.send(self._shown(text, last=last, entities=[info]))
        finally:
            self._answered = self._clock()
        if last:
            await self._kept(self._stream_id)  # a streamed message keeps the stream's id

    async def _rest(self, parts: list[str]) -> None:
        """What did not fit in the streamed message, as plain messages below it."""
        for number, part in enumerate(parts, start=1):
            last = number == len(parts)
            sent = await self._channel.send(self._shown(part, last=last))
            if last:
                await self._kept(sent)

    async def _repair(self, parts: list[str]) -> None:
        """A broken stream shows the whole text anyway: in its message, replaced in place
        as a plain one (the Teams SDK's way after a time-out), else in plain messages
        below it; if even those fail, ``StreamBroken`` lets the core post it."""
        log.warning("a streamed answer ended early (%s): showing it whole", self._broken)
        if self._shown_text and self._stream_id is not None:
            try:
                last = len(parts) == 1
                await self._channel.replace(self._stream_id, self._shown(parts[0], last=last))
            except (StreamRefused, Undeliverable) as exc:
                log.info("the streamed message could not be replaced: %s", exc)
            else:
                if last:
                    await self._kept(self._stream_id)
                await self._posted(parts[1:])
                return
        await self._posted(parts)

    async def _posted(self, parts: list[str]) -> None:
        try:
            await self._rest(parts)
        except (StreamRefused, Undeliverable) as exc:
            raise StreamBroken(f"{self._broken}; then {exc}") from exc

    async def _sleep_until(self, when: float, *, wake: bool = True) -> None:
        """Wait until ``when`` (sooner when ``finish`` is called, if ``wake``)."""
        delay = when - self._clock()
        if delay <= 0:
            return
        if not wake:
            await asyncio.sleep(delay)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay)

    def _age(self) -> float:
        return self._clock() - self._started

    def _shown(self, text: str, *, last: bool, entities: list[Any] | None = None) -> Activity:
        """A message of the answer; the last one of a finished run offers feedback."""
        activity = _message(text, entities=entities)
        return feedback.offer(activity) if last and self._feedback is not None else activity

    async def _kept(self, activity_id: str | None) -> None:
        if self._feedback is not None:
            await self._rated(activity_id, self._feedback)


async def open_stream(
    channel: StreamChannel,
    *,
    pace: StreamPace,
    done: Callable[[], None],
    stopped: Callable[[], None],
    rated: Rated,
) -> TeamsStream:
    """A started stream (see ``TeamsStream.open``; ``done`` is called if it fails)."""
    stream = TeamsStream(channel, pace=pace, done=done, stopped=stopped, rated=rated)
    try:
        await stream.open()
    except BaseException:
        done()
        raise
    return stream


# -- what a stream shows ---------------------------------------------------------------


def informative_text(steps: tuple[Step, ...]) -> str:
    """The informative line: the latest step under way ("Running deploy…", "Waiting for
    approval from Bob"), else "Working…" (plain text, within Teams' limit)."""
    for step in reversed(steps):
        if step.status == "in_progress":
            line = texts.STREAM_RUNNING.format(title=step.title)
        elif step.status == "pending":
            line = plain_text(step.detail).strip() or texts.STREAM_WAITING.format(title=step.title)
        else:
            continue
        return blocks.cut(line, INFORMATIVE_LIMIT)
    return texts.STREAM_WORKING


def final_text(text: str, steps: tuple[Step, ...]) -> str:
    """The final message: the answer, then its steps as a short list (markdown)."""
    lines = [_step_line(step) for step in steps[:STEPS_SHOWN]]
    if len(steps) > STEPS_SHOWN:
        lines.append(texts.STREAM_MORE_STEPS.format(count=len(steps) - STEPS_SHOWN))
    listed = "\n".join(f"- {line}" for line in lines)
    return "\n\n".join(part for part in (text.strip(), listed) if part)


def split_text(text: str, budget: int = TEXT_BUDGET) -> list[str]:
    """``text`` in parts of at most ``budget`` UTF-8 bytes, cut at a paragraph or line
    break where one is near (else anywhere: never inside a character)."""
    parts: list[str] = []
    while text:
        if len(text.encode()) <= budget:
            parts.append(text)
            break
        head = text.encode()[:budget].decode(errors="ignore")
        cut = max(head.rfind("\n\n"), head.rfind("\n"))
        if cut < len(head) // 2:
            cut = len(head)
        parts.append(head[:cut].rstrip())
        text = text[cut:].lstrip()
    return [part for part in parts if part]


def _step_line(step: Step) -> str:
    title = blocks.escape(blocks.cut(step.title, blocks.MAX_NAME))
    mark = texts.STREAM_STEP_MARKS[step.status]
    detail = blocks.cut(plain_text(step.detail).strip(), STEP_DETAIL_LIMIT)
    if detail:
        return texts.STREAM_STEP_DETAIL.format(mark=mark, title=title, detail=blocks.escape(detail))
    return texts.STREAM_STEP.format(mark=mark, title=title)


def _too_big(text: str) -> bool:
    return len(text.encode()) > TEXT_BUDGET


def _message(text: str, *, entities: list[Any] | None = None) -> Activity:
    return Activity(
        type=ActivityTypes.message, text=text, text_format="markdown", entities=entities
    )
