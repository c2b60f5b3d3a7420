"""The rules a streamed answer keeps on its own: Teams' two-minute limit, its message
size, its informative length, and what a stream with nothing to show sends."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from botbuilder.schema import Activity

from adapters.teams import StreamPace
from adapters.teams.streaming import (
    INFORMATIVE_LIMIT,
    TEXT_BUDGET,
    StreamRefused,
    TeamsStream,
    informative_text,
    split_text,
)
from bot import Step

PACE = StreamPace(every=0.02, gap=0.01)


class Channel:
    """Records a stream's requests; answers each with an id."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.replaced: list[tuple[str, dict[str, Any]]] = []

    async def send(self, activity: Activity) -> str | None:
        self.sent.append(activity.serialize())
        return f"id-{len(self.sent)}"

    async def replace(self, activity_id: str, activity: Activity) -> None:
        self.replaced.append((activity_id, activity.serialize()))

    def kinds(self) -> list[str | None]:
        return [_stream_type(a) for a in self.sent]


def _stream_type(activity: dict[str, Any]) -> str | None:
    for entity in activity.get("entities") or []:
        if entity.get("type") == "streaminfo":
            return str(entity.get("streamType"))
    return None


class Clock:
    """Monotonic time that a test can move on."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.ahead


async def settled(channel: Channel, count: int) -> None:
    deadline = time.monotonic() + 5
    while len(channel.sent) < count:
        assert time.monotonic() < deadline, channel.sent
        await asyncio.sleep(0.005)


async def opened(channel: Channel, clock: Clock | None = None) -> TeamsStream:
    stream = TeamsStream(channel, pace=PACE, clock=clock or time.monotonic)
    await stream.open()
    return stream


async def test_near_its_two_minutes_a_stream_sends_no_more_and_ends_in_its_message() -> None:
    channel, clock = Channel(), Clock()
    stream = await opened(channel, clock)
    await stream.write("hello")
    await settled(channel, 2)

    clock.ahead = 115.0  # Teams would refuse anything more on this stream
    await stream.write(" world")
    await stream.finish()

    assert channel.kinds() == ["informative", "streaming"]
    ((activity_id, replaced),) = channel.replaced
    assert activity_id == "id-1"  # the stream's id: its first request's
    assert (replaced["type"], replaced["text"], replaced.get("entities")) == (
        "message",
        "hello world",
        None,
    )


async def test_an_answer_longer_than_a_message_ends_the_stream_at_the_limit_and_goes_on_below() -> (
    None
):
    channel = Channel()
    stream = await opened(channel)
    paragraph = "Ünïcode words in a long paragraph. " * 40
    text = "\n\n".join([paragraph.strip()] * 60)
    assert len(text.encode()) > 2 * TEXT_BUDGET

    await stream.write(text)
    await stream.finish()

    final, *rest = [a for a in channel.sent if a["type"] == "message"]
    assert _stream_type(final) == "final"
    assert [_stream_type(a) for a in rest] == [None] * len(rest)
    assert len(rest) >= 2
    shown = [a["text"] for a in [final, *rest]]
    assert all(len(part.encode()) <= TEXT_BUDGET for part in shown)
    assert "\n\n".join(shown) == text
    streamed = [a["text"] for a in channel.sent if _stream_type(a) == "streaming"]
    assert all(len(part.encode()) <= TEXT_BUDGET for part in streamed)


async def test_a_stream_with_nothing_to_show_sends_no_final() -> None:
    channel = Channel()
    stream = await opened(channel)
    await stream.write("   ")
    await stream.finish()
    assert channel.kinds() == ["informative"]


async def test_an_informative_update_stays_within_teams_limit() -> None:
    long = Step(id="c1", title="a" * 5000, status="in_progress")
    assert len(informative_text((long,))) <= INFORMATIVE_LIMIT
    waiting = Step(id="c2", title="deploy", status="pending", detail=("Waiting for Bob",))
    done = Step(id="c3", title="status", status="complete")
    assert informative_text((long, waiting, done)) == "Waiting for Bob"
    assert informative_text((done,)) == "Working…"


def test_text_is_split_at_breaks_and_never_inside_a_character() -> None:
    assert split_text("short") == ["short"]
    parts = split_text("é" * 30, budget=7)
    assert parts == ["ééé"] * 10
    assert split_text("one\n\ntwo three", budget=9) == ["one", "two three"]


def _offers_feedback(activity: dict[str, Any]) -> bool:
    return (activity.get("channelData") or {}).get("feedbackLoopEnabled") is True


class Rated:
    """Records which message was kept as ending which run's answer."""

    def __init__(self) -> None:
        self.kept: list[tuple[str | None, str]] = []

    async def __call__(self, activity_id: str | None, run_id: str) -> None:
        self.kept.append((activity_id, run_id))


async def test_a_finished_answer_longer_than_a_message_offers_feedback_on_its_last_one() -> None:
    channel, rated = Channel(), Rated()
    stream = TeamsStream(channel, pace=PACE, rated=rated)
    await stream.open()
    paragraph = "Words in a long paragraph. " * 40
    await stream.write("\n\n".join([paragraph.strip()] * 60))
    await stream.finish(feedback="run-1")

    messages = [a for a in channel.sent if a["type"] == "message"]
    assert [_offers_feedback(a) for a in messages] == [False] * (len(messages) - 1) + [True]
    assert rated.kept == [(f"id-{len(channel.sent)}", "run-1")]


async def test_a_timed_out_finished_answer_offers_feedback_on_its_message_replaced() -> None:
    channel, rated, clock = Channel(), Rated(), Clock()
    stream = TeamsStream(channel, pace=PACE, rated=rated, clock=clock)
    await stream.open()
    await stream.write("hello")
    await settled(channel, 2)

    clock.ahead = 115.0
    await stream.finish(feedback="run-1")

    ((activity_id, replaced),) = channel.replaced
    assert _offers_feedback(replaced)
    assert rated.kept == [(activity_id, "run-1")]


async def test_an_answer_finished_without_a_run_offers_no_feedback() -> None:
    channel, rated = Channel(), Rated()
    stream = TeamsStream(channel, pace=PACE, rated=rated)
    await stream.open()
    await stream.write("hello")
    await stream.finish()

    assert not any(_offers_feedback(a) for a in channel.sent)
    assert rated.kept == []


class StoppedChannel(Channel):
    """Its user presses Stop after the first request: Teams refuses the rest."""

    async def send(self, activity: Activity) -> str | None:
        if self.sent:
            raise StreamRefused(
                403, "ContentStreamNotAllowed", "Content stream was cancelled by user."
            )
        return await super().send(activity)

    async def replace(self, activity_id: str, activity: Activity) -> None:
        raise StreamRefused(403, "ContentStreamNotAllowed", "Content stream was cancelled by user.")


async def test_a_stream_the_user_stops_stops_once_and_shows_nothing_more() -> None:
    channel, pressed = StoppedChannel(), list[int]()
    stream = TeamsStream(channel, pace=PACE, stopped=lambda: pressed.append(1))
    await stream.open()

    await stream.write("hello")
    deadline = time.monotonic() + 5
    while not pressed:
        assert time.monotonic() < deadline, channel.sent
        await asyncio.sleep(0.005)
    await stream.write(" world")
    await stream.finish()

    assert pressed == [1]
    assert channel.kinds() == ["informative"]
    assert channel.replaced == []
