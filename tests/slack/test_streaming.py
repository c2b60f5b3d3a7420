"""Live answers in Slack: the answer streams into the thread as the model writes it
(``chat.startStream`` / ``appendStream`` / ``stopStream``), each tool call a task in
the same message; where Slack refuses, the answer is posted whole, and no text is
ever lost."""

from __future__ import annotations

from itertools import groupby
from pathlib import Path

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import SlackMessenger
from adapters.slack.convert import thread_key
from adapters.slack.live import (
    DETAIL_LIMIT,
    FLUSH_CHARS,
    MARKDOWN_LIMIT,
    SlackLive,
    task_details,
)
from adapters.slack.wire import APPROVE_ACTION
from agents import Agent, MemoryStore, Store, ToolCall, tool
from agents.models.demo import DemoModel
from bot import ApprovalPolicy, Person
from examples.ops import build_agent as build_ops
from tests.agents.helpers import call_then_answer

from .conftest import StartBot
from .fake_slack import TEAM_ID, TOKEN, FakeSlack, Posted, Scripted
from .harness import ALICE, BOB, CHANNEL, DM_CHANNEL, BotServer, mention_event, message_event
from .scripted import LONG_ANSWER_PARAGRAPH, Ran, build_agent
from .test_approvals import ask_for_deploy, has_buttons

SENTENCE = "The api answers in time and nothing is queued. "


def status_agent() -> Agent:
    """Looks at a service with a tool that needs no approval, then answers."""

    @tool
    def service_status(service: str) -> str:
        """How a service is doing."""
        return f"{service} is up"

    model = call_then_answer(
        ToolCall("service_status", {"service": "api"}),
        before="Let me check.",
        answer=lambda _: "api is up.",
    )
    return Agent(id="ops", model=model, tools=[service_status], store=MemoryStore())


def methods(slack: FakeSlack) -> list[str]:
    """The Web API methods called after start-up, in order."""
    return [c.method for c in slack.calls if c.method != "auth.test"]


def streamed_text(posted: Posted) -> str:
    return "".join(c["text"] for c in posted.chunks if c["type"] == "markdown_text")


async def test_a_mention_in_a_channel_streams_the_answer_to_who_asked(
    bot: BotServer, slack: FakeSlack
) -> None:
    event = mention_event("hello there")
    await bot.send_event(event)
    await bot.idle()

    (start,) = slack.of("chat.startStream")
    assert start.args["channel"] == CHANNEL
    assert start.args["thread_ts"] == event["ts"]
    assert start.args["recipient_user_id"] == ALICE
    assert start.args["recipient_team_id"] == TEAM_ID
    assert start.args["task_display_mode"] == "timeline"
    (answer,) = slack.in_thread(CHANNEL, event["ts"])
    assert answer.text == "You said: hello there"
    assert not answer.streaming, "the stream was stopped"
    (stop,) = slack.of("chat.stopStream")
    assert stop.args["ts"] == answer.ts
    assert slack.of("chat.postMessage") == [], "nothing posted twice"


async def test_text_is_appended_in_batches_not_word_by_word(
    bot: BotServer, slack: FakeSlack
) -> None:
    words = SENTENCE * 30
    event = mention_event(words.strip())
    await bot.send_event(event)
    await bot.idle()

    (answer,) = slack.streamed(CHANNEL, event["ts"])
    assert answer.text == "You said: " + words.strip()
    appends = slack.of("chat.appendStream")
    assert 2 <= len(appends) <= len(answer.text) // FLUSH_CHARS + 1
    assert all(len(streamed_text_of(a.args)) >= FLUSH_CHARS for a in appends)
    assert len(answer.text.split()) > 10 * (len(appends) + 2), "far fewer calls than words"


def streamed_text_of(args: dict[str, object]) -> str:
    chunks = args.get("chunks")
    assert isinstance(chunks, list)
    return "".join(c["text"] for c in chunks if c["type"] == "markdown_text")


async def test_a_long_answer_goes_on_in_a_new_streamed_message_within_slack_limits(
    bot: BotServer, slack: FakeSlack
) -> None:
    event = mention_event("long")
    await bot.send_event(event)
    await bot.idle()

    answers = slack.streamed(CHANNEL, event["ts"])
    assert len(answers) == 2
    assert all(len(m.text) <= MARKDOWN_LIMIT and not m.streaming for m in answers)
    assert all(not m.text.startswith((" ", "\n")) for m in answers)
    shown = "".join(m.text for m in answers)
    assert shown.count("All systems nominal.") == LONG_ANSWER_PARAGRAPH.count("All") * 20
    assert slack.of("chat.postMessage") == []


async def test_a_tool_call_is_a_task_in_progress_then_complete_between_the_words(
    serve: StartBot, slack: FakeSlack
) -> None:
    bot = await serve(status_agent())
    event = mention_event("how is the api?")
    await bot.send_event(event)
    await bot.idle()

    (answer,) = slack.in_thread(CHANNEL, event["ts"])
    assert answer.text == "Let me check.\n\napi is up."
    ((call_id, task),) = answer.tasks.items()
    assert task["title"] == "service_status"
    assert answer.task_statuses(call_id) == ["in_progress", "complete"]
    kinds = [kind for kind, _ in groupby(c["type"] for c in answer.chunks)]
    assert kinds == ["markdown_text", "task_update", "markdown_text"], "the task where it ran"


async def test_a_sub_agents_tool_is_a_task_titled_with_its_agent(
    serve: StartBot, slack: FakeSlack, store: Store, tmp_path: Path
) -> None:
    bot = await serve(build_ops(DemoModel(), store, db_path=tmp_path / "ops.db"))
    event = mention_event("deploy api 1.4.2 to staging")
    await bot.send_event(event)
    await bot.idle()

    (answer,) = slack.streamed(CHANNEL, event["ts"])
    titles = {task["title"]: task["status"] for task in answer.tasks.values()}
    assert titles.get("deploy › deploy_service") == "complete", titles
    assert "1.4.2" in answer.text


async def test_a_call_waiting_for_approval_ends_the_stream_above_its_card(
    serve: StartBot, slack: FakeSlack, store: Store, ran: Ran
) -> None:
    policy = ApprovalPolicy.from_toml(f'[tools.deploy]\napprovers = ["{BOB}"]\n')
    bot = await serve(build_agent(store, ran), policy=policy)
    card = await ask_for_deploy(bot, slack)
    await bot.idle()
    root = card.thread_ts or ""

    first, posted_card = slack.in_thread(CHANNEL, root)
    assert posted_card is card, "the card comes below the streamed answer"
    assert first.text == "Deploying."
    ((call_id, task),) = first.tasks.items()
    assert (task["title"], task["status"]) == ("deploy", "pending")
    assert task["details"] == f"Waiting for approval from <@{BOB}>"
    assert not first.streaming
    calls = methods(slack)
    assert calls.index("chat.stopStream") < calls.index("chat.postMessage")

    assert await bot.press(card, APPROVE_ACTION, user=BOB) == 200
    await bot.idle()
    assert len(ran.deploys) == 1
    assert not has_buttons(card)
    first_again, card_again, told, resumed = slack.in_thread(CHANNEL, root)
    assert (first_again, card_again) == (first, card), "the resumed answer is a new message"
    assert told.text.startswith(f"<@{ALICE}>: your request to run `deploy` was approved")
    assert resumed.started_with is not None
    assert resumed.started_with["recipient_user_id"] == ALICE, "still addressed to who asked"
    assert resumed.text.startswith("Done. deploy ok")
    assert resumed.task_statuses(call_id)[-1] == "complete"
    assert not resumed.streaming


async def test_a_refused_stream_is_posted_whole_and_not_tried_again_in_that_channel(
    bot: BotServer, slack: FakeSlack
) -> None:
    slack.refuse_streaming("not_allowed", channel=CHANNEL)
    first = mention_event("one")
    await bot.send_event(first)
    await bot.idle()
    second = mention_event("two")
    await bot.send_event(second)
    await bot.idle()

    assert [m.text for m in slack.in_thread(CHANNEL, first["ts"])] == ["You said: one"]
    assert [m.text for m in slack.in_thread(CHANNEL, second["ts"])] == ["You said: two"]
    assert len(slack.of("chat.startStream")) == 1, "not asked again in that channel"
    assert len(slack.of("chat.postMessage")) == 2

    dm = message_event("three", channel=DM_CHANNEL, channel_type="im")
    await bot.send_event(dm)
    await bot.idle()
    (answer,) = slack.streamed(DM_CHANNEL, dm["ts"])
    assert answer.text == "You said: three", "other channels still stream"


async def test_a_passing_refusal_is_posted_whole_and_streaming_is_tried_again(
    bot: BotServer, slack: FakeSlack
) -> None:
    slack.script("chat.startStream", Scripted(error="service_unavailable"))
    first = mention_event("one")
    await bot.send_event(first)
    await bot.idle()
    second = mention_event("two")
    await bot.send_event(second)
    await bot.idle()

    assert [m.text for m in slack.posts_in(CHANNEL, first["ts"])] == ["You said: one"]
    assert [m.text for m in slack.streamed(CHANNEL, second["ts"])] == ["You said: two"]


async def test_an_append_that_fails_midway_loses_no_text(bot: BotServer, slack: FakeSlack) -> None:
    slack.script("chat.appendStream", Scripted(error="fatal_error"))
    words = (SENTENCE * 20).strip()
    event = mention_event(words)
    await bot.send_event(event)
    await bot.idle()

    (broken,) = slack.streamed(CHANNEL, event["ts"])
    assert not broken.streaming, "the broken stream was stopped"
    assert ("You said: " + words).startswith(broken.text)
    (whole,) = slack.posts_in(CHANNEL, event["ts"])
    assert whole.text == "You said: " + words, "the whole answer, posted below"
    assert len(slack.of("chat.appendStream")) == 1, "the broken stream is given up"


async def test_a_rate_limited_append_is_retried_and_the_stream_goes_on(
    bot: BotServer, slack: FakeSlack
) -> None:
    slack.script("chat.appendStream", Scripted(status=429, retry_after=0))
    words = (SENTENCE * 20).strip()
    event = mention_event(words)
    await bot.send_event(event)
    await bot.idle()
    assert [m.text for m in slack.in_thread(CHANNEL, event["ts"])] == ["You said: " + words]
    assert slack.of("chat.postMessage") == []


async def test_a_stop_that_fails_loses_no_text(bot: BotServer, slack: FakeSlack) -> None:
    slack.script("chat.stopStream", Scripted(error="fatal_error", times=2))
    event = mention_event("hello")
    await bot.send_event(event)
    await bot.idle()
    assert [m.text for m in slack.posts_in(CHANNEL, event["ts"])] == ["You said: hello"]


async def test_the_streamed_text_pings_nobody_and_shows_where_links_go(
    bot: BotServer, slack: FakeSlack
) -> None:
    event = mention_event("<!channel> read [the run book](https://example.com/run) & go")
    await bot.send_event(event)
    await bot.idle()
    (answer,) = slack.streamed(CHANNEL, event["ts"])
    assert answer.text == (
        "You said: &lt;!channel&gt; read the run book (https://example.com/run) &amp; go"
    )
    assert streamed_text(answer) == answer.text


async def test_nothing_streams_without_a_recipient_outside_a_dm_or_outside_a_thread() -> None:
    messenger = SlackMessenger(AsyncWebClient(token="xoxb-unused"))
    channel = thread_key(TEAM_ID, CHANNEL, "1700000000.000100")
    dm = thread_key(TEAM_ID, DM_CHANNEL, "1700000000.000100")
    assert await messenger.start_live(channel, None) is None
    assert await messenger.start_live(channel, Person(id=ALICE)) is not None
    assert await messenger.start_live(dm, None) is not None, "a DM needs no recipient"
    assert await messenger.start_live(thread_key(TEAM_ID, CHANNEL, ""), Person(id=ALICE)) is None


async def test_a_link_split_across_batches_still_shows_where_it_goes(slack: FakeSlack) -> None:
    refused: list[str] = []
    client = AsyncWebClient(token=TOKEN, base_url=slack.url)
    live = SlackLive(
        client, thread_key(TEAM_ID, CHANNEL, "1.1"), Person(id=ALICE), refused=refused.append
    )
    await live.write("Read ")
    await live.write("y" * FLUSH_CHARS + " [the run")  # a batch is due; the link is unfinished
    await live.write(" book](https://example.com/run) first.")
    await live.finish()

    (answer,) = slack.streamed(CHANNEL, "1.1")
    assert answer.text.endswith(" the run book (https://example.com/run) first.")
    (append,) = slack.of("chat.appendStream")
    assert "[" not in streamed_text_of(append.args), "the unfinished link was held back"
    assert refused == []


def test_task_details_mention_people_and_stay_within_slacks_limit() -> None:
    detail = ("Waiting for approval from ", Person(id=BOB), ", ", Person(id="S0GROUP"), "")
    assert task_details(detail) == f"Waiting for approval from <@{BOB}>, <!subteam^S0GROUP>"
    assert task_details(("a <b> & c",)) == "a &lt;b&gt; &amp; c"
    long = task_details(("x" * 300, Person(id=BOB)))
    assert long is not None
    assert len(long) <= DETAIL_LIMIT
    assert long.endswith("…")
    cut_before_a_person = task_details(("y" * (DETAIL_LIMIT - 3), Person(id=BOB)))
    assert cut_before_a_person == "y" * (DETAIL_LIMIT - 3) + "…"
    assert task_details(()) is None
