"""One trace per request, across a restart: the bot, configured by the standard
``OTEL_*`` variables, exports its spans to an OTLP/HTTP collector (a local receiver
decoding them with opentelemetry-proto). A refund asked in one process and approved
in the next, on the same store, is one trace: the message, the model's turns, the
card posted, the wait for a person, the click, the tool and the answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider

from bot.metrics import Metrics
from tests.bot.test_console import console_demo, demo_env, start_console
from tests.otlp import OtlpReceiver, ReceivedSpan


def by_name(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name]


async def test_a_question_answered_by_a_reply_is_a_wait_on_the_requests_trace(
    tmp_path: Path,
) -> None:
    async with OtlpReceiver() as receiver:
        await console_demo(
            tmp_path,
            "deploy web to staging",
            "9.9.9",
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
            OTEL_SERVICE_NAME="approvals",
        )
        spans = await receiver.wait_for(lambda got: bool(by_name(got, "approval.wait")))

    asked, _ = sorted(by_name(spans, "chat.message"), key=lambda s: s.start_ns)
    (wait,) = by_name(spans, "approval.wait")
    assert wait.trace_id == asked.trace_id
    assert wait.attributes["approval.tool"] == "deploy_service"
    assert wait.attributes["approval.outcome"] == "answered"


async def test_a_click_after_a_restart_continues_the_requests_trace(tmp_path: Path) -> None:
    async with OtlpReceiver() as receiver:
        url = receiver.url
        # The first process asks and stops with the card waiting; the second approves.
        await console_demo(
            tmp_path,
            "refund order A-1001 150",
            OTEL_EXPORTER_OTLP_ENDPOINT=url,
            OTEL_SERVICE_NAME="approvals",
        )
        asked = list(receiver.spans)
        await console_demo(
            tmp_path, "a", OTEL_EXPORTER_OTLP_ENDPOINT=url, OTEL_SERVICE_NAME="approvals"
        )
        spans = await receiver.wait_for(lambda got: bool(by_name(got, "execute_tool refund")))

    (message,) = by_name(asked, "chat.message")
    trace = message.trace_id
    assert message.parent_span_id == ""  # the request's root
    assert {s.service_name for s in spans} == {"approvals"}

    (click,) = by_name(spans, "chat.click")
    (wait,) = by_name(spans, "approval.wait")
    (ran,) = by_name(spans, "execute_tool refund")
    turns = by_name(spans, "chat demo")
    assert len(turns) >= 2  # the turn that asked, and the one that answered
    # Everything, in both processes, is the message's trace.
    for span in (click, wait, ran, *turns):
        assert span.trace_id == trace, span.name
    assert click not in asked  # made by the second process
    assert ran not in asked
    ids = {s.span_id: s for s in spans}
    assert ids[ran.span_id].parent_span_id in ids  # under the click, not a new root
    assert wait.attributes["approval.tool"] == "refund"
    assert wait.attributes["approval.outcome"] == "approved"
    assert wait.attributes["approval.decided_by"] == "grace"
    assert isinstance(wait.attributes["approval.wait_seconds"], float)
    assert turns[0].attributes["gen_ai.operation.name"] == "chat"
    assert turns[0].attributes["gen_ai.request.model"] == "demo"
    assert ran.attributes["gen_ai.tool.name"] == "refund"
    # The platform's calls for the request are its spans: the card, then the answer.
    posts = [s for s in spans if s.name == "console.post" and s.trace_id == trace]
    assert any(s in asked for s in posts)
    assert any(s not in asked for s in posts)


async def console_until(tmp_path: Path, seen: str, **env: str) -> str:
    """``python -m bot console`` on the demo, given no line until its output shows
    ``seen`` (its sweeper's work, say); then its input ends. Its output."""
    process = await start_console(tmp_path, (), demo_env(tmp_path, **env))
    assert process.stdin is not None
    assert process.stdout is not None
    out = ""
    try:
        async with asyncio.timeout(30):
            while seen not in out:
                line = await process.stdout.readline()
                assert line, f"the console ended before showing {seen!r}: {out}"
                out += line.decode()
    finally:
        process.stdin.close()
        rest, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    return out + rest.decode()


async def test_an_expiry_in_the_next_process_goes_on_in_the_requests_trace(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.refund]\nexpires_in = "1s"\n')
    async with OtlpReceiver() as receiver:
        env = {
            "APPROVAL_POLICY": str(policy),
            "OTEL_SERVICE_NAME": "approvals",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        }
        await console_demo(tmp_path, "refund order A-1001 150", **env)  # type: ignore[arg-type]
        asked = list(receiver.spans)
        # The next process's sweeper (every second) finds the card's second ran out.
        await console_until(tmp_path, "I could not refund", BOT_LEASE="2s", **env)
        spans = await receiver.wait_for(lambda got: bool(by_name(got, "chat.expire")))

    (message,) = by_name(asked, "chat.message")
    (expire,) = by_name(spans, "chat.expire")
    (wait,) = by_name(spans, "approval.wait")
    assert expire.trace_id == wait.trace_id == message.trace_id
    assert wait.attributes["approval.outcome"] == "expired"
    # The model, told of the expiry, answers in that trace, under the expiry.
    ids = {s.span_id: s for s in spans}
    told = [s for s in by_name(spans, "chat demo") if s.trace_id == message.trace_id]
    assert any(ids.get(s.parent_span_id) == expire for s in told)


async def test_no_endpoint_exports_nothing_and_changes_nothing(tmp_path: Path) -> None:
    async with OtlpReceiver() as receiver:
        out = await console_demo(tmp_path, "refund order A-1001 150", "a")
        assert "Refunded order A-1001" in out
        assert receiver.spans == []


async def test_a_collector_that_is_down_never_fails_the_bot(tmp_path: Path) -> None:
    receiver = OtlpReceiver()
    async with receiver:
        url = receiver.url
    # Nobody listens there any more: the conversation goes on, answered in full.
    out = await console_demo(
        tmp_path,
        "refund order A-1001 150",
        "a",
        OTEL_EXPORTER_OTLP_ENDPOINT=url,
        OTEL_EXPORTER_OTLP_TIMEOUT="1",
    )
    assert "Refunded order A-1001" in out


def test_decisions_are_counted_with_the_trace_they_happened_in() -> None:
    provider = TracerProvider()
    metrics = Metrics()
    with provider.get_tracer("test").start_as_current_span("chat.click") as span:
        metrics.decided("approved")
    metrics.decided("expired")  # outside any trace: no exemplar
    trace_id = format(span.get_span_context().trace_id, "032x")

    body, kind = metrics.render("application/openmetrics-text; version=1.0.0")
    assert kind.startswith("application/openmetrics-text")
    lines = body.decode().splitlines()
    (approved,) = [line for line in lines if 'outcome="approved"' in line and "_total" in line]
    assert f'# {{span_id="{format(span.get_span_context().span_id, "016x")}",' in approved
    assert f'trace_id="{trace_id}"' in approved
    (expired,) = [line for line in lines if 'outcome="expired"' in line and "_total" in line]
    assert "#" not in expired
    plain, kind = metrics.render()
    assert kind.startswith("text/plain")
    assert trace_id not in plain.decode()
    provider.shutdown()
