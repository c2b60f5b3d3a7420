"""Tracing by the standard OTEL_* variables: the real SDK and OTLP/HTTP exporter send
spans to a local collector (``tests.otlp``), which decodes them."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from opentelemetry.trace import StatusCode

from bot.settings import SettingsError
from bot.tracing import Tracing, tracing_from_env
from tests.otlp import OtlpReceiver

ROOT = Path(__file__).resolve().parents[2]

OpenTracing = Callable[[], Tracing]


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No OTEL_* variable but the test's own; batches leave every 10 ms, not 5 s."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
    return monkeypatch


@pytest.fixture
async def receiver() -> AsyncIterator[OtlpReceiver]:
    """A local OTLP/HTTP collector."""
    async with OtlpReceiver() as collector:
        yield collector


@pytest.fixture
async def opened() -> AsyncIterator[OpenTracing]:
    """``tracing_from_env()`` for a test that expects tracing on; closed at the end."""
    made: list[Tracing] = []

    def open_tracing() -> Tracing:
        tracing = tracing_from_env(close_timeout=0.2)
        assert tracing is not None
        made.append(tracing)
        return tracing

    yield open_tracing
    for tracing in made:
        await tracing.aclose()


async def test_spans_reach_the_collector_with_parent_attributes_events_and_service(
    environment: pytest.MonkeyPatch, receiver: OtlpReceiver, opened: OpenTracing
) -> None:
    environment.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    environment.setenv("OTEL_SERVICE_NAME", "x")
    tracer = opened().tracer()

    with (
        tracer.start_as_current_span("run", attributes={"run.id": "r1"}),
        tracer.start_as_current_span("tool") as tool,
    ):
        tool.set_attributes({"tool.name": "refund", "amount": 120, "args": ("a", "b")})
        tool.add_event("declined", {"by": "ana"})
        tool.set_status(StatusCode.ERROR, "not approved")

    spans = await receiver.wait_for(lambda spans: len(spans) == 2)
    run, tool_span = receiver.named("run"), receiver.named("tool")
    assert run.parent_span_id == ""
    assert (tool_span.trace_id, tool_span.parent_span_id) == (run.trace_id, run.span_id)
    assert run.attributes == {"run.id": "r1"}
    assert tool_span.attributes == {"tool.name": "refund", "amount": 120, "args": ["a", "b"]}
    assert [(event.name, event.attributes) for event in tool_span.events] == [
        ("declined", {"by": "ana"})
    ]
    assert (tool_span.status, tool_span.status_message) == ("error", "not approved")
    assert run.start_ns <= tool_span.start_ns <= tool_span.end_ns <= run.end_ns
    assert {(span.service_name, span.scope) for span in spans} == {("x", "approval-bot")}


async def test_the_exporter_follows_the_standard_variables(
    environment: pytest.MonkeyPatch, receiver: OtlpReceiver, opened: OpenTracing
) -> None:
    environment.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{receiver.url}/v1/traces")
    environment.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")  # for other signals
    environment.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
    environment.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer t0ken")
    environment.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    environment.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=ops-bot,deployment=test")

    with opened().tracer().start_as_current_span("run"):
        pass

    (span,) = await receiver.wait_for(lambda spans: len(spans) == 1)
    assert span.service_name == "ops-bot"
    (request,) = receiver.requests
    assert request["authorization"] == "Bearer t0ken"
    assert request["content-encoding"] == "gzip"


async def test_installed_the_api_tracers_export_as_approval_bot(
    environment: pytest.MonkeyPatch, receiver: OtlpReceiver
) -> None:
    """The composition root's path, in a process of its own (the API takes one global
    provider per process)."""
    environment.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    script = (
        "import asyncio\n"
        "from opentelemetry import trace\n"
        "from bot.tracing import tracing_from_env\n"
        "async def main():\n"
        "    tracing = tracing_from_env()\n"
        "    tracing.install()\n"
        "    with trace.get_tracer('agents').start_as_current_span('run'):\n"
        "        pass\n"
        "    await tracing.aclose()\n"
        "asyncio.run(main())\n"
    )
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", script, cwd=ROOT)

    assert await process.wait() == 0
    (span,) = receiver.spans
    assert (span.name, span.scope, span.service_name) == ("run", "agents", "approval-bot")


@pytest.mark.parametrize(
    "variables",
    [
        {},
        {"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SDK_DISABLED": "true"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_TRACES_EXPORTER": "none"},
    ],
    ids=["nothing", "no-endpoint", "sdk-disabled", "exporter-none"],
)
def test_without_an_endpoint_or_when_switched_off_tracing_is_off(
    environment: pytest.MonkeyPatch, variables: dict[str, str]
) -> None:
    for name, value in variables.items():
        environment.setenv(name, value)

    assert tracing_from_env() is None


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
    ],
)
def test_a_protocol_other_than_http_protobuf_is_a_start_error(
    environment: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    environment.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    environment.setenv(variable, value)

    with pytest.raises(SettingsError) as raised:
        tracing_from_env()

    assert raised.value.problems == [
        f"{variable}={value}: the bot exports traces over OTLP/HTTP only;"
        " use http/protobuf (the collector's port 4318)"
    ]


def test_an_exporter_other_than_otlp_is_a_start_error(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    environment.setenv("OTEL_TRACES_EXPORTER", "otlp,zipkin")

    with pytest.raises(SettingsError) as raised:
        tracing_from_env()

    assert raised.value.problems == [
        "OTEL_TRACES_EXPORTER=zipkin: the bot exports traces with otlp only"
    ]


async def test_a_collector_that_is_down_fails_nothing(
    environment: pytest.MonkeyPatch, receiver: OtlpReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    environment.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    await receiver.stop()
    tracing = tracing_from_env(close_timeout=0.2)
    assert tracing is not None

    for number in range(3):
        with tracing.tracer().start_as_current_span(f"run {number}"):
            await asyncio.sleep(0)
    await tracing.aclose()

    assert receiver.spans == []
    assert "tracing: spans not exported within 0.2 s at close" in caplog.messages


async def test_a_collector_that_hangs_fails_nothing(
    environment: pytest.MonkeyPatch, receiver: OtlpReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    environment.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    receiver.hang()
    tracing = tracing_from_env(close_timeout=0.2)
    assert tracing is not None

    with tracing.tracer().start_as_current_span("run"):
        pass
    await tracing.aclose()

    assert receiver.requests
    assert receiver.spans == []
    assert "tracing: spans not exported within 0.2 s at close" in caplog.messages


async def test_a_collector_refusing_twice_still_gets_the_spans(
    environment: pytest.MonkeyPatch, receiver: OtlpReceiver, opened: OpenTracing
) -> None:
    environment.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    receiver.fail_next(2)

    with opened().tracer().start_as_current_span("run"):
        pass

    (span,) = await receiver.wait_for(lambda spans: len(spans) == 1)
    assert span.name == "run"
    assert (receiver.refused, len(receiver.requests)) == (2, 3)


async def test_spans_still_queued_at_close_are_sent(
    environment: pytest.MonkeyPatch, receiver: OtlpReceiver
) -> None:
    environment.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    environment.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
    tracing = tracing_from_env()
    assert tracing is not None

    with tracing.tracer().start_as_current_span("last"):
        pass
    await tracing.aclose()

    assert [span.name for span in receiver.spans] == ["last"]
