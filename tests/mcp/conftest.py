"""Real MCP servers for the tests: ``tickets_server`` over stdio and over streamable HTTP."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agents.mcp import McpServer, McpTools

ROOT = Path(__file__).resolve().parents[2]
SERVER_MODULE = "tests.mcp.tickets_server"
TOKEN = "s3cret-token"


@dataclass
class Calls:
    """The calls that reached the server's tools, read from its JSON-lines file."""

    path: Path
    since: int = 0

    def mark(self) -> None:
        """Count only calls from now on."""
        self.since = len(self._all())

    def _all(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def __call__(self) -> list[dict[str, Any]]:
        return self._all()[self.since :]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class HttpServer:
    """A ``tickets_server`` process serving streamable HTTP; ``restart`` after ``kill``."""

    port: int
    calls: Calls
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        env = {"MCP_TEST_CALLS": str(self.calls.path), "MCP_TEST_TOKEN": TOKEN, "PATH": ""}
        self.process = subprocess.Popen(
            [sys.executable, "-m", SERVER_MODULE, "http", "127.0.0.1", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        give_up = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > give_up:
                    raise RuntimeError("the test MCP server did not start") from None
                time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """One HTTP server process per test module."""
    server = HttpServer(free_port(), Calls(tmp_path_factory.mktemp("mcp") / "calls.jsonl"))
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def stdio_calls(tmp_path: Path) -> Calls:
    return Calls(tmp_path / "calls.jsonl")


def stdio_server(calls: Calls, **options: Any) -> McpServer:
    """The tickets server as a stdio process of the bot."""
    return McpServer(
        name="tickets",
        command=sys.executable,
        args=["-m", SERVER_MODULE, "stdio"],
        env={"MCP_TEST_CALLS": str(calls.path)},
        cwd=str(ROOT),
        **options,
    )


def http_server_spec(server: HttpServer, **options: Any) -> McpServer:
    """The tickets server over streamable HTTP, with its bearer token."""
    return McpServer(
        name="tickets",
        url=server.url,
        headers={"Authorization": f"Bearer {TOKEN}"},
        **options,
    )


@dataclass
class Connected:
    """A started ``McpTools`` and the calls its server received since."""

    tools: McpTools
    calls: Calls


@pytest.fixture
async def legacy(request: pytest.FixtureRequest, stdio_calls: Calls) -> AsyncIterator[Connected]:
    """The tickets server over stdio on the previous revision (MCP 2025-11-25), where a
    server asks inside its call."""
    tools = McpTools(stdio_server(stdio_calls, timeout=2.0, protocol="legacy"))
    await tools.start(wait=20)
    try:
        yield Connected(tools, stdio_calls)
    finally:
        await tools.aclose()


@pytest.fixture(params=["stdio", "http"])
async def tickets(
    request: pytest.FixtureRequest, stdio_calls: Calls, http_server: HttpServer
) -> AsyncIterator[Connected]:
    """The tickets server's tools, over each transport in turn."""
    if request.param == "stdio":
        spec, calls = stdio_server(stdio_calls, timeout=2.0), stdio_calls
    else:
        spec, calls = http_server_spec(http_server, timeout=2.0), http_server.calls
    calls.mark()
    tools = McpTools(spec)
    await tools.start(wait=20)
    try:
        yield Connected(tools, calls)
    finally:
        await tools.aclose()
