"""``python -m bot check``: variables that look like the bot's but are not, and, with
``--live``, each configured service reached once (fakes at the network edge)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from bot.__main__ import known_variables, main
from bot.checks import unknown_variables
from tests.models.fake_anthropic import FakeAnthropic
from tests.slack.fake_slack import TOKEN, FakeSlack

from .test_settings import clean_env, demo_env

__all__ = ["clean_env", "demo_env"]


def test_a_misspelled_variable_is_named_with_the_one_meant(
    demo_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo_env.setenv("STORE_UR", "redis://elsewhere")
    demo_env.setenv("BOT_MODLE", "claude-sonnet-5-5")
    demo_env.setenv("SLACK_WEBHOOK", "https://hooks.example/x")
    assert main(["check"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "approval-bot: BOT_MODLE: unknown; did you mean BOT_MODEL?",
        "approval-bot: SLACK_WEBHOOK: unknown; the bot does not read it",
        "approval-bot: STORE_UR: unknown; did you mean STORE_URL?",
    ]


def test_every_variable_the_bot_and_its_platforms_read_is_known() -> None:
    known = known_variables()
    for name in (
        "STORE_URL",
        "BOT_LEASE",
        "APPROVAL_POLICY",
        "ANTHROPIC_API_KEY",
        "BOT_LOG_FILE",
        "SLACK_BOT_TOKEN",
        "SLACK_APP_TOKEN",
        "MICROSOFT_APP_TENANT_ID",
        "TEAMS_ALLOW_UNAUTHENTICATED",
    ):
        assert name in known
    environ = {name: "x" for name in known} | {"PATH": "/bin", "OPS_DB_PATH": "x"}
    assert unknown_variables(environ, known) == []


# -- check --live: each configured service reached once ---------------------------------


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
async def anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


async def check_live(tmp_path: Path, **env: str) -> tuple[int, str, str]:
    """``python -m bot check --live`` in a clean environment plus ``env``."""
    keep = ("PATH", "HOME", "LANG", "SYSTEMROOT")
    base = {name: os.environ[name] for name in keep if name in os.environ}
    base |= {"STORE_URL": "memory://", "OPS_DB_PATH": str(tmp_path / "ops.db")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "check",
        "--live",
        cwd=tmp_path,
        env=base | env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_check_live_names_the_token_slack_refuses(tmp_path: Path, slack: FakeSlack) -> None:
    code, out, err = await check_live(
        tmp_path,
        BOT_MODEL="demo",
        SLACK_BOT_TOKEN="xoxb-revoked",
        SLACK_SIGNING_SECRET="secret",
        SLACK_API_URL=slack.url,
    )
    assert code == 2
    assert out == ""
    assert err.strip().splitlines() == [
        "approval-bot: Slack: auth.test refused SLACK_BOT_TOKEN (invalid_auth)"
    ]
    assert [call.method for call in slack.calls].count("auth.test") >= 1


async def test_check_live_says_ok_when_slack_and_the_model_answer(
    tmp_path: Path, slack: FakeSlack, anthropic: FakeAnthropic
) -> None:
    code, out, err = await check_live(
        tmp_path,
        BOT_MODEL="claude-sonnet-5-5",
        ANTHROPIC_API_KEY="sk-good",
        ANTHROPIC_BASE_URL=anthropic.base_url,
        SLACK_BOT_TOKEN=TOKEN,
        SLACK_SIGNING_SECRET="secret",
        SLACK_API_URL=slack.url,
    )
    assert (code, err) == (0, "")
    assert "configuration OK (live: Slack, model anthropic:claude-sonnet-5-5)" in out


async def test_check_live_names_a_refused_key_and_an_unknown_model(
    tmp_path: Path, anthropic: FakeAnthropic
) -> None:
    anthropic.keys = {"sk-good"}
    code, _, err = await check_live(
        tmp_path,
        BOT_MODEL="claude-sonnet-5-5",
        ANTHROPIC_API_KEY="sk-revoked",
        ANTHROPIC_BASE_URL=anthropic.base_url,
    )
    assert code == 2
    assert "HTTP 401 (authentication_error)" in err
    code, _, err = await check_live(
        tmp_path,
        BOT_MODEL="claude-sonnet-9",
        ANTHROPIC_API_KEY="sk-good",
        ANTHROPIC_BASE_URL=anthropic.base_url,
    )
    assert code == 2
    assert "claude-sonnet-9" in err
    assert "HTTP 404 (not_found_error)" in err


async def test_check_live_says_when_a_service_cannot_be_reached(tmp_path: Path) -> None:
    code, _, err = await check_live(
        tmp_path,
        BOT_MODEL="demo",
        SLACK_BOT_TOKEN=TOKEN,
        SLACK_SIGNING_SECRET="secret",
        SLACK_API_URL="http://127.0.0.1:9/api/",
    )
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith("approval-bot: Slack: cannot reach http://127.0.0.1:9/api/")
    assert "Traceback" not in err


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[str, list[bytes]]]:
    """A webhook taking ``POST /audit`` (the bodies it took), and nothing else."""
    taken: list[bytes] = []

    async def take(request: web.Request) -> web.Response:
        taken.append(await request.read())
        return web.Response()

    app = web.Application()
    app.router.add_post("/audit", take)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", taken
    await runner.cleanup()


async def test_check_live_reaches_the_audit_sink_and_sends_it_nothing(
    tmp_path: Path, receiver: tuple[str, list[bytes]]
) -> None:
    base, taken = receiver
    sink = {"BOT_MODEL": "demo", "AUDIT_SINK_SECRET": "s3cret"}
    code, out, err = await check_live(tmp_path, AUDIT_SINK=f"{base}/audit", **sink)
    assert (code, err) == (0, "")
    assert f"(live: audit sink {base})" in out
    code, _, err = await check_live(tmp_path, AUDIT_SINK=f"{base}/nope", **sink)
    assert code == 2
    assert err.strip().splitlines() == [f"approval-bot: audit sink {base}: answered 404"]
    code, _, err = await check_live(tmp_path, AUDIT_SINK="http://127.0.0.1:9/audit", **sink)
    assert code == 2
    assert err.startswith("approval-bot: audit sink http://127.0.0.1:9: ")
    assert "Traceback" not in err
    log = tmp_path / "approvals.jsonl"
    code, out, err = await check_live(tmp_path, BOT_MODEL="demo", AUDIT_SINK=log.as_uri())
    assert (code, err) == (0, "")
    assert f"(live: audit sink {log.as_uri()})" in out
    assert taken == []
    assert not log.exists()
