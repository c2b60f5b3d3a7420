"""Streamed answers in Teams 1:1 chats, at the HTTP edge: the fake connector checks every
streaming request against Teams' rules (sequence, pace, prefix, final) and refuses as
Teams does; group chats and channels keep whole messages; a refused stream loses no
text."""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from agents import Agent, FunctionModel, MemoryStore, Message, ModelResponse, ToolCall, tool
from agents.models.base import ModelRequest, TextDelta

from . import activities as act
from .conftest import TEST_PACE, MakeBot, TeamsBot
from .fake_connector import MESSAGE_LIMIT_BYTES, ConnectorCall, FakeConnector, Stream

DEADLINE = 5.0
ANSWER = "api is up and running, all green."
FIRST_WORDS = "api is up"
MORE_WORDS = "api is up and running,"


async def until(what: str, ready: Callable[[], bool]) -> None:
    """Wait (polling, with a deadline) until ``ready()``."""
    deadline = time.monotonic() + DEADLINE
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


class Typing(FunctionModel):
    """A model that writes its answer word by word and, each time what it wrote so far
    is one of ``pauses``, holds the rest until ``shown(those words)``: it takes its
    time, as models do."""

    def __init__(
        self, respond: Any, *, pauses: tuple[str, ...], shown: Callable[[str], bool]
    ) -> None:
        super().__init__(respond)
        self._pauses = pauses
        self._shown = shown

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        written = ""
        async for event in super().stream(request):
            if isinstance(event, TextDelta):
                words = written.strip()
                if words in self._pauses:
                    await until(f"{words!r} on screen", functools.partial(self._shown, words))
                written += event.text
            yield event


def status_agent(
    connector: FakeConnector, pauses: tuple[str, ...] = (FIRST_WORDS, MORE_WORDS)
) -> Agent:
    """Checks the api (a tool that runs until Teams shows it running), then answers,
    pausing after each of ``pauses`` until Teams shows it."""

    @tool
    async def service_status(service: str) -> str:
        """How a service is doing."""
        await until("the step on screen", lambda: _informed(connector, "Running service_status"))
        return f"{service} is up"

    def respond(messages: list[Message], request: ModelRequest) -> ModelResponse:
        if messages[-1].tool_results:
            return ModelResponse(text=ANSWER)
        return ModelResponse(tool_calls=[ToolCall("service_status", {"service": "api"})])

    model = Typing(
        respond,
        pauses=pauses,
        shown=lambda words: _streamed(connector, words),
    )
    return Agent(id="ops", model=model, tools=[service_status], store=MemoryStore())


def _informed(connector: FakeConnector, words: str) -> bool:
    return any(words in text for s in connector.streams for text in s.informative)


def _streamed(connector: FakeConnector, words: str) -> bool:
    return any(text.startswith(words) for s in connector.streams for text in s.streamed)


async def ask_in_chat(teams: TeamsBot, connector: FakeConnector, text: str) -> None:
    chat = act.chat_conversation("personal")
    answer = await teams.post(act.message(connector.url, text, conversation=chat))
    assert answer.status == 200
    await teams.bot.drain()


def requests(stream: Stream) -> list[tuple[str, str | None, int | None]]:
    """Each request of a stream: its type, stream type and sequence."""
    out: list[tuple[str, str | None, int | None]] = []
    for request in stream.requests:
        info = request.stream_info or {}
        out.append((request.body["type"], request.stream_type, info.get("streamSequence")))
    return out


async def test_a_1_1_answer_is_typing_then_working_then_streamed_text_then_the_final_message(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot(agent=status_agent(connector))

    await ask_in_chat(teams, connector, "how is the api?")

    assert connector.refused == []  # every request as Teams takes it
    (stream,) = connector.streams
    chat_calls = [c for c in connector.calls if c.conversation_id == act.PERSONAL_CHAT]
    assert chat_calls[0] in connector.typing()  # the typing indicator first
    assert chat_calls[1] is stream.requests[0]

    first = stream.requests[0]
    assert first.stream_info == {
        "type": "streaminfo",
        "streamType": "informative",
        "streamSequence": 1,
    }  # no streamId yet: Teams answers with it
    assert stream.informative[0] == "Working…"
    assert "Running service_status…" in stream.informative
    assert all(
        (r.stream_info or {}).get("streamId") == stream.stream_id for r in stream.requests[1:]
    )

    kinds = requests(stream)
    order = ["informative", "streaming", "final"]
    types = [str(t) for _, t, _ in kinds]
    assert types == sorted(types, key=order.index)  # informative updates, the text, the end
    sequence = [n for _, t, n in kinds if t != "final"]
    assert sequence == list(range(1, len(sequence) + 1))
    streamed = stream.streamed
    assert len(streamed) >= 2
    assert streamed[0].startswith(FIRST_WORDS)
    assert any(text.startswith(MORE_WORDS) for text in streamed[1:])
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(streamed))

    final = stream.final
    assert final is not None
    assert kinds[-1] == ("message", "final", None)  # a message, without streamSequence
    assert final.stream_info == {
        "type": "streaminfo",
        "streamId": stream.stream_id,
        "streamType": "final",
    }
    assert final.text == f"{ANSWER}\n\n- ✅ service\\_status"
    assert connector.texts(act.PERSONAL_CHAT) == [final.text]  # one message, whole


async def test_text_is_buffered_not_sent_word_by_word(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    words = " ".join(f"word{i}" for i in range(60))

    await ask_in_chat(teams, connector, words)

    assert connector.refused == []  # none sooner than Teams allows after the last
    (stream,) = connector.streams
    assert len(stream.streamed) < 10  # 60 words written at once: an update or two
    assert stream.final is not None
    assert stream.final.text == f"You said: {words}"


async def test_an_approval_in_a_1_1_chat_ends_the_streamed_message_before_the_card(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    chat = act.chat_conversation("personal")

    await ask_in_chat(teams, connector, "deploy api")

    assert connector.refused == []
    (stream,) = connector.streams
    assert stream.final is not None
    (card,) = connector.cards(act.PERSONAL_CHAT)
    messages = connector.messages(act.PERSONAL_CHAT)
    assert messages.index(stream.final) < messages.index(card)
    assert stream.final.text == "- ⏳ deploy: Waiting for approval"

    assert card.card is not None
    click = act.execute(
        connector.url, card.card, "approve", conversation=chat, card_id=card.response_id
    )
    assert (await teams.post(click)).status == 200
    await teams.bot.drain()

    assert teams.deployed == ["api"]
    _, second = connector.streams
    assert second.final is not None
    assert second.final.text == "Done. deploy ok: deployed api\n\n- ✅ deploy"
    assert connector.refused == []


async def test_group_chats_and_channels_keep_whole_messages(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    group = act.chat_conversation("groupChat")
    await teams.post(act.message(connector.url, "hello", conversation=group, mention=True))
    await teams.post(act.channel_post(connector.url, "hello there", mention=True))
    await teams.bot.drain()

    assert connector.streams == []
    assert all(c.stream_info is None for c in connector.calls)
    assert connector.texts(act.GROUP_CHAT) == ["You said: hello"]
    assert "You said: hello there" in connector.texts()


async def test_where_teams_refuses_streaming_the_answer_is_posted_whole_and_not_tried_again(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    connector.refuse_streaming = True
    teams = await make_bot()

    await ask_in_chat(teams, connector, "hello")
    await ask_in_chat(teams, connector, "again")

    assert connector.streams == []
    assert connector.texts(act.PERSONAL_CHAT) == ["You said: hello", "You said: again"]
    (refusal,) = connector.refused  # the chat is not asked to stream again
    assert (refusal.status, refusal.message) == (403, "Content stream is not allowed")


async def test_a_stream_the_user_stops_is_not_posted_again_below(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    connector.stop_after = 3  # "Working…", the step, a first piece of text: then Stop
    teams = await make_bot(agent=status_agent(connector, pauses=(FIRST_WORDS,)))

    await ask_in_chat(teams, connector, "how is the api?")

    (stream,) = connector.streams
    assert stream.final is None
    assert stream.streamed == [FIRST_WORDS]  # Teams keeps what was streamed
    assert any(r.status == 403 and "cancelled" in r.message for r in connector.refused)
    # They asked for no more: the rest of the answer is not shown below.
    assert not any(ANSWER in m.text for m in connector.messages(act.PERSONAL_CHAT))
    assert not any(u.activity_id == stream.stream_id for u in connector.updates())


async def test_a_throttled_stream_still_shows_the_whole_answer(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    connector.stream_gap = TEST_PACE.every * 1.6  # Teams is slower today than the bot's pace
    teams = await make_bot(agent=status_agent(connector, pauses=()))

    await ask_in_chat(teams, connector, "how is the api?")

    assert any(r.status == 429 for r in connector.refused)
    (stream,) = connector.streams
    shown = [stream.final] if stream.final is not None else []
    shown += [u for u in connector.updates() if u.activity_id == stream.stream_id]
    shown += [m for m in connector.messages(act.PERSONAL_CHAT) if m.stream_info is None]
    assert any(ANSWER in call.text for call in shown), _texts(connector.calls)


def _texts(calls: list[ConnectorCall]) -> list[str]:
    return [f"{c.method} {c.body.get('type')} {c.stream_type}: {c.text}" for c in calls]


async def test_a_whole_answer_longer_than_a_teams_message_goes_in_several(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    paragraph = "A long paragraph of the answer, with words in it. " * 30
    long = "\n\n".join([paragraph.strip()] * 40)

    def respond(messages: list[Message], request: ModelRequest) -> ModelResponse:
        return ModelResponse(text=long)

    agent = Agent(id="ops", model=FunctionModel(respond), store=MemoryStore())
    teams = await make_bot(agent=agent)
    group = act.chat_conversation("groupChat")

    await teams.post(act.message(connector.url, "tell me", conversation=group, mention=True))
    await teams.bot.drain()

    parts = connector.texts(act.GROUP_CHAT)
    assert len(parts) > 1
    assert all(len(part.encode()) <= MESSAGE_LIMIT_BYTES for part in parts)
    assert "\n\n".join(parts) == long
