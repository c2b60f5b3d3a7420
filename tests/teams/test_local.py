"""Trying Teams locally as the README says: its ``curl`` against ``python -m bot`` (what
``make run`` starts) with ``TEAMS_ALLOW_UNAUTHENTICATED=true``, the local stand-in for
the Bot Connector, and the Bot Framework Emulator's shape of activities."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from adapters.teams.local_connector import PORT, LocalConnector

from .conftest import MakeBot
from .fake_connector import FakeConnector
from .test_settings import teams_section

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0


@dataclass(frozen=True)
class Curl:
    """The README's ``curl``: where it posts, its headers, and its body exactly."""

    url: str
    headers: dict[str, str]
    body: str


def readme_curl() -> Curl:
    (command,) = [
        block
        for block in re.findall(r"```sh\n(.*?)```", teams_section(), re.DOTALL)
        if block.startswith("curl ")
    ]
    words = shlex.split(command)
    (url,) = [w for w in words if w.startswith("http")]
    headers = dict(words[i + 1].split(": ", 1) for i, word in enumerate(words) if word == "-H")
    return Curl(url=url, headers=headers, body=words[words.index("-d") + 1])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def until(what: str, ready: Callable[[], bool]) -> None:
    """Wait (polling, with a deadline) until ``ready()``."""
    deadline = time.monotonic() + DEADLINE
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


@dataclass
class Served:
    """``python -m bot`` as ``make run`` starts it, and the stand-in it answers through."""

    url: str
    connector: LocalConnector
    shown: list[str]
    log: Path
    process: asyncio.subprocess.Process

    def messages(self) -> list[dict[str, Any]]:
        return [a for a in self.connector.received if a.get("type") == "message"]

    async def stop(self) -> None:
        """SIGTERM, as Ctrl-C on ``make run``: the bot finishes its work, then exits."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), DEADLINE)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


async def started(port: int, process: asyncio.subprocess.Process, log: Path) -> None:
    """Wait until ``/healthz`` answers 200 (else fail with the bot's log)."""
    async with aiohttp.ClientSession() as session:
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                pass
            if process.returncode is not None or time.monotonic() > deadline:
                why = "exited" if process.returncode is not None else "did not start"
                pytest.fail(f"the bot {why}:\n{await asyncio.to_thread(log.read_text)}")
            await asyncio.sleep(0.05)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    shown: list[str] = []
    connector = LocalConnector(show=shown.append)
    try:
        await connector.start(port=PORT)
    except OSError as exc:
        pytest.fail(f"the README's serviceUrl needs port {PORT} free on 127.0.0.1: {exc}")
    port = free_port()
    keep = ("PATH", "HOME", "LANG", "SYSTEMROOT", "TMPDIR")
    env = {name: os.environ[name] for name in keep if name in os.environ} | {
        "PYTHONPATH": str(ROOT),
        "BOT_MODEL": "demo",
        "BOT_HOST": "127.0.0.1",
        "BOT_PORT": str(port),
        "TEAMS_ALLOW_UNAUTHENTICATED": "true",
    }
    log = tmp_path / "bot.log"
    with log.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", cwd=tmp_path, env=env, stderr=stderr
        )
    served = Served(f"http://127.0.0.1:{port}", connector, shown, log, process)
    try:
        await started(port, process, log)
        yield served
    finally:
        await served.stop()
        await connector.close()


async def post(served: Served, curl: Curl, body: str) -> int:
    path = urlsplit(curl.url).path
    async with (
        aiohttp.ClientSession() as session,
        session.post(served.url + path, data=body.encode(), headers=curl.headers) as response,
    ):
        return response.status


def test_the_readme_curl_is_a_teams_message_to_the_local_connector() -> None:
    curl = readme_curl()
    assert urlsplit(curl.url).path == "/api/messages"
    assert curl.headers == {"Content-Type": "application/json"}
    activity = json.loads(curl.body)
    assert activity["type"] == "message"
    assert activity["serviceUrl"] == f"http://127.0.0.1:{PORT}/"
    assert activity["conversation"]["conversationType"] == "personal"
    assert "TEAMS_ALLOW_UNAUTHENTICATED=true" in teams_section()
    assert "python -m adapters.teams.local_connector" in teams_section()


async def test_the_readme_curl_gets_an_answer_from_the_server_make_run_starts(
    served: Served,
) -> None:
    curl = readme_curl()

    assert await post(served, curl, curl.body) == 200

    await until("the answer", lambda: bool(served.messages()))
    (answer,) = served.messages()
    assert answer["conversation"]["id"] == "a:local-chat"
    assert answer["text"].startswith("User 42: "), answer
    assert any("User 42: " in lines for lines in served.shown), served.shown

    # The same id again is Teams redelivering it: only the message after it is answered.
    assert await post(served, curl, curl.body) == 200
    activity = json.loads(curl.body) | {"id": "2", "text": "find user 7"}
    assert await post(served, curl, json.dumps(activity)) == 200
    await until("the second answer", lambda: len(served.messages()) > 1)

    # An approval card, its buttons listed.
    activity = json.loads(curl.body) | {"id": "3", "text": "deploy api 1.4.2 to production"}
    assert await post(served, curl, json.dumps(activity)) == 200
    await until("the card", lambda: any(m.get("attachments") for m in served.messages()))
    assert any("[Approve] [Decline]" in lines for lines in served.shown), served.shown

    await served.stop()
    shown = served.messages()
    second, card = shown[1], shown[-1]
    assert "User 7" in second["text"], second
    assert card["attachments"][0]["content"]["type"] == "AdaptiveCard"


# -- the Bot Framework Emulator --------------------------------------------------------


def emulator_message(service_url: str, **fields: Any) -> dict[str, Any]:
    """A message as the Emulator sends it: its own channel, a conversation with no type."""
    return {
        "type": "message",
        "id": fields.pop("id", "em-1"),
        "channelId": "emulator",
        "serviceUrl": service_url,
        "from": {"id": "3f5a0b5e-user", "name": "User", "role": "user"},
        "recipient": {"id": "b1c2-bot", "name": "Bot", "role": "bot"},
        "conversation": {"id": "c0ffee00|livechat"},
        "locale": "en-US",
        "textFormat": "plain",
        **fields,
    }


async def test_the_emulator_conversation_is_a_1_1_chat_the_bot_answers(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()

    answer = await teams.post(emulator_message(connector.url, text="hello"))
    await teams.bot.drain()

    assert answer.status == 200
    assert connector.texts("c0ffee00|livechat") == ["You said: hello"]
    assert connector.streams == []  # Teams' streaming is for Teams (channelId msteams)


async def test_an_emulator_card_is_decided_through_its_submit_fallback(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    await teams.post(emulator_message(connector.url, text="deploy api"))
    await teams.bot.drain()
    (posted,) = connector.cards("c0ffee00|livechat")
    assert posted.card is not None
    (approve,) = [a for a in posted.card["actions"] if a.get("verb") == "approve"]

    click = emulator_message(
        connector.url, id="em-2", replyToId=posted.response_id, value=approve["fallback"]["data"]
    )
    assert (await teams.post(click)).status == 200
    await teams.bot.drain()

    assert teams.deployed == ["api"]
    assert any("Approved by" in u.card_text for u in connector.updates())
