"""Background tasks, and how waiting calls read as views."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agents import PendingInfo
from bot import Prompt
from bot.tasks import KeyedLocks, TaskTracker
from bot.views import ReplyBuffer, approval_card, begins, prompt_fields, question_text


async def test_drain_waits_for_work_spawned_by_work() -> None:
    tracker = TaskTracker()
    done: list[str] = []

    async def child() -> None:
        await asyncio.sleep(0)
        done.append("child")

    async def parent() -> None:
        tracker.spawn(child())
        done.append("parent")

    tracker.spawn(parent())
    await tracker.drain()
    assert done == ["parent", "child"]
    assert tracker.running == 0


async def test_a_failing_task_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    tracker = TaskTracker()

    async def boom() -> None:
        raise ValueError("kaput")

    tracker.spawn(boom(), name="boom")
    await tracker.drain()
    assert "background task boom failed" in caplog.text


async def test_aclose_cancels_what_outlives_the_grace_period() -> None:
    tracker = TaskTracker()
    forever = asyncio.Event()
    tracker.spawn(forever.wait())
    await tracker.aclose(timeout=0.01)
    assert tracker.running == 0
    work = asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="closed"):
        tracker.spawn(work)


async def test_keyed_locks_serialize_one_key_and_forget_it_afterwards() -> None:
    locks = KeyedLocks()
    order: list[str] = []

    async def hold(key: str, name: str, gate: asyncio.Event | None = None) -> None:
        async with locks.hold(key):
            order.append(f"{name} in")
            if gate is not None:
                await gate.wait()
            order.append(f"{name} out")

    gate = asyncio.Event()
    first = asyncio.create_task(hold("t1", "a", gate))
    second = asyncio.create_task(hold("t1", "b"))
    other = asyncio.create_task(hold("t2", "c"))
    await other
    gate.set()
    await asyncio.gather(first, second)
    assert order == ["a in", "c in", "c out", "a out", "b in", "b out"]
    assert locks._locks == {}


def waiting(payload: Any) -> PendingInfo:
    now = datetime.now(UTC)
    return PendingInfo(
        run_id="r",
        tool_call_id="c",
        tool_name="deploy_service",
        args={},
        kind="suspension",
        agent_path=("ops", "deploy"),
        suspend_payload=payload,
        created_at=now,
        expires_at=now + timedelta(hours=1),
    )


@pytest.mark.parametrize(
    ("payload", "question"),
    [
        ({"message": " Which version? "}, "Which version?"),
        ("Which version?", "Which version?"),
        (
            {"service": "web", "choices": ["1.0", "2.0"]},
            "`deploy_service` needs more information to continue.\n"
            "• service: web\n• choices: 1.0, 2.0",
        ),
        (None, "`deploy_service` needs more information to continue."),
        (42, "`deploy_service` needs more information to continue.\n42"),
    ],
)
def test_a_question_reads_well_whatever_the_payload(payload: Any, question: str) -> None:
    assert question_text(waiting(payload)) == question


def test_model_steps_are_separated_in_the_reply() -> None:
    reply = ReplyBuffer()
    reply.step_ended()  # a tool ran before any text: no leading break
    for piece in ("Let ", "me ", "check."):
        reply.add(piece)
    reply.step_ended()
    reply.add("It is up.")
    assert reply.take() == "Let me check.\n\nIt is up."
    assert reply.take() == ""


def test_a_card_shows_the_answer_that_runs_with_its_arguments() -> None:
    info = replace(
        waiting(None),
        kind="approval",
        args={"environment": "production", "version": "1.5.0"},
        answer={"version": "1.5.0", "reason": "hotfix"},
    )
    card = approval_card(info, expires_at=info.expires_at)
    assert card.args == {"environment": "production", "version": "1.5.0", "reason": "hotfix"}


def test_a_card_shows_a_reply_the_tool_takes_as_it_is() -> None:
    info = replace(waiting(None), kind="approval", args={"cache": "cdn"}, answer="and the db")
    card = approval_card(info, expires_at=info.expires_at)
    assert card.args == {"cache": "cdn", "answer": "and the db"}


@pytest.mark.parametrize(
    ("properties", "form"),
    [
        ({}, False),  # no schema: a free reply
        ({"city": {"type": "string"}}, False),  # one text field: the reply is the answer
        ({"city": {"type": "string"}, "days": {"type": "integer"}}, True),
        ({"action": {"enum": ["start", "stop"]}}, True),  # one choice: a form offers them
        ({"days": {"type": "integer"}}, True),
        ({"confirm": {"type": "boolean"}}, True),
    ],
)
def test_a_question_is_a_form_when_it_asks_several_things_or_one_not_free_text(
    properties: dict[str, Any], form: bool
) -> None:
    fields = prompt_fields({"type": "object", "properties": properties} if properties else None)
    asked = Prompt(
        run_id="r", tool_call_id="c", tool_name="t", agent_path=("a",), question="?", fields=fields
    )
    assert asked.form is form


@pytest.mark.parametrize(
    ("shown", "words", "expected"),
    [
        ("You ", "You said: hello there", True),
        ("*Deploying* `api`", "**Deploying** `api` now", True),  # marks drawn differently
        ("you said: HELLO", "You said: hello there", True),
        ("You said: hello there", "You said: hello there", True),
        ("You said: goodbye", "You said: hello there", False),
        ("said", "You said: hello there", False),  # a middle is no start
        ("", "You said: hello there", False),  # nothing shown begins nothing
        ("…", "You said", False),
        ("Yo", "You said", False),  # too few letters to tell
        ("ok", "OK", True),  # unless the answer is that short
    ],
)
def test_a_message_begins_an_answer_by_its_letters_whatever_marks_surround_them(
    shown: str, words: str, expected: bool
) -> None:
    assert begins(shown, words) is expected
