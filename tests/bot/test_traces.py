"""One trace per request, across a restart: the bot, configured by the standard
``OTEL_*`` variables, exports its spans to an OTLP/HTTP collector (a local receiver
decoding them with opentelemetry-proto). A refund asked in one process and approved
in the next, on the same store, is one trace: the message, the model's turns, the
card posted, the wait for a person, the click, the tool and the answer."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider

from bot.metrics import Metrics
from tests.bot.test_console import console_demo
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
