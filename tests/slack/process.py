"""``python -m bot`` as a real process, spoken to the way Slack does.

The bot talks to a ``FakeSlack`` of the test process for the Web API, keeps
its state in a store the test names, and logs to a file the test can show on
failure. ``kill`` is ``kill -9``: no shutdown code runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp

from .fake_slack import TOKEN, FakeSlack, Posted
from .harness import SIGNING_SECRET, block_actions, event_body, signed_headers

ROOT = Path(__file__).resolve().parents[2]
CRASH_AGENT = "tests.slack.crash_agent:build"


def free_port() -> int:
    """A local TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class BotProcess:
    """One bot process at a time on a fixed port; started again after a kill."""

    slack: FakeSlack
    store_url: str
    workdir: Path
    lease: str = "1s"
    agent: str = CRASH_AGENT
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: asyncio.subprocess.Process | None = None
    session: aiohttp.ClientSession | None = None

    @property
    def log(self) -> Path:
        """Where every start of the process appends its log."""
        return self.workdir / "bot.log"

    @property
    def record(self) -> Path:
        """The crash agent's record of what its tools really did."""
        return self.workdir / "record.jsonl"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/slack/events"

    def env(self) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "MICROSOFT_"))}
        return base | {
            "BOT_MODEL": "demo",
            "BOT_AGENT": self.agent,
            "BOT_HOST": "127.0.0.1",
            "BOT_PORT": str(self.port),
            "BOT_LEASE": self.lease,
            "STORE_URL": self.store_url,
            "SLACK_BOT_TOKEN": TOKEN,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_API_URL": self.slack.url,
            "TEAMS_ALLOW_UNAUTHENTICATED": "false",
            "CRASH_RECORD": str(self.record),
            "PYTHONPATH": str(ROOT),
            **self.extra_env,
        }

    async def start(self) -> None:
        """Start the process and wait until ``/healthz`` answers 200."""
        assert self.process is None or self.process.returncode is not None
        with self.log.open("ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", cwd=self.workdir, env=self.env(), stderr=log
            )
        if self.session is None:
            self.session = aiohttp.ClientSession()
        deadline = time.monotonic() + 30
        while True:
            try:
                async with self.session.get(f"http://127.0.0.1:{self.port}/healthz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                pass
            assert self.process.returncode is None, f"the bot exited:\n{self.log_text()}"
            assert time.monotonic() < deadline, f"the bot did not come up:\n{self.log_text()}"
            await asyncio.sleep(0.05)

    async def kill(self) -> None:
        """``kill -9``: the process dies where it stands."""
        assert self.process is not None
        self.process.kill()
        await self.process.wait()

    async def stop(self) -> None:
        """SIGTERM and wait (the normal shutdown), killing it if it hangs."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 30)
            except TimeoutError:
                await self.kill()
        if self.session is not None:
            await self.session.close()
            self.session = None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else "(no log)"

    def recorded(self, event: str) -> list[dict[str, Any]]:
        """The crash agent's record lines of one kind."""
        if not self.record.exists():
            return []
        lines = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [line for line in lines if line["event"] == event]

    # -- speaking like Slack -----------------------------------------------------

    async def post(
        self, body: str, content_type: str, headers: dict[str, str] | None = None
    ) -> int:
        assert self.session is not None
        headers = {"Content-Type": content_type, **signed_headers(body), **(headers or {})}
        async with self.session.post(self.url, data=body.encode(), headers=headers) as resp:
            await resp.read()
            return resp.status

    async def send_event(
        self, event: dict[str, Any], *, event_id: str | None = None, retry: int | None = None
    ) -> int:
        """An Events API delivery (a retry says so, like Slack); the HTTP status."""
        body = json.dumps(event_body(event, event_id=event_id))
        headers = {} if retry is None else {"X-Slack-Retry-Num": str(retry)}
        return await self.post(body, "application/json", headers)

    async def press(self, card: Posted, action_id: str) -> int:
        """A button press on a card; the HTTP status."""
        body = urlencode({"payload": json.dumps(block_actions(card, action_id))})
        return await self.post(body, "application/x-www-form-urlencoded")


@asynccontextmanager
async def running(
    slack: FakeSlack, store_url: str, workdir: Path, *, agent: str = CRASH_AGENT
) -> AsyncIterator[BotProcess]:
    """A started bot process (of ``agent``, ``module:attribute``), stopped at the end."""
    process = BotProcess(slack=slack, store_url=store_url, workdir=workdir, agent=agent)
    try:
        await process.start()
        yield process
    finally:
        await process.stop()
