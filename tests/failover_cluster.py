"""A private Redis Cluster with a replica per primary, for tests that kill a primary.

``failover_cluster`` starts six ``redis-server`` processes on free ports, joins
them with ``redis-cli --cluster create --cluster-replicas 1`` (three primaries,
a replica each), waits until every node says the cluster is ok and every
replica is in sync, and kills every node at teardown. A short node timeout
makes a replica take over within a few seconds of its primary dying. When
``redis-server`` is missing or the cluster does not come up, the test fails:
it never skips.

The fixture lives as long as its test module; a test that kills a primary
leaves that shard without a replica, so one such test per module.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import signal
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest
import pytest_asyncio
from redis.asyncio import Redis
from redis.exceptions import RedisError

HOST = "127.0.0.1"
PRIMARIES = 3
NODE_TIMEOUT_MS = 2000
"""How long a silent node takes to be suspected: a replica is promoted a few seconds
after its primary dies, instead of the default fifteen."""
BUS_OFFSET = 10_000
"""A node's cluster bus listens this far above its port (Redis's fixed rule)."""
START_WITHIN = 30.0
POLL = 0.05


@dataclass(frozen=True, kw_only=True)
class Seen:
    """One node as another node sees it (a line of ``CLUSTER NODES``)."""

    id: str
    address: str
    primary: bool
    failing: bool
    """Flagged ``fail`` or ``fail?``: suspected or agreed to be down."""
    slots: tuple[range, ...]

    def owns(self, slot: int) -> bool:
        """Whether this primary serves ``slot``."""
        return any(slot in slots for slots in self.slots)


def parse_nodes(text: str) -> list[Seen]:
    """The nodes a ``CLUSTER NODES`` reply lists."""
    seen = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        flags = set(fields[2].split(","))
        slots = []
        for owned in fields[8:]:
            if owned.startswith("["):
                continue  # a slot being migrated: none are in this cluster
            first, _, last = owned.partition("-")
            slots.append(range(int(first), int(last or first) + 1))
        seen.append(
            Seen(
                id=fields[0],
                address=fields[1].split("@")[0],
                primary="master" in flags,
                failing=bool(flags & {"fail", "fail?"}),
                slots=tuple(slots),
            )
        )
    return seen


def parse_info(text: str) -> dict[str, str]:
    """The ``name:value`` lines of a ``CLUSTER INFO`` reply."""
    pairs = (line.partition(":") for line in text.splitlines() if ":" in line)
    return {name: value.strip() for name, _, value in pairs}


@dataclass
class Node:
    """One ``redis-server`` of the cluster."""

    port: int
    process: asyncio.subprocess.Process
    log: Path

    @property
    def address(self) -> str:
        """``host:port``, as the cluster names it."""
        return f"{HOST}:{self.port}"

    def client(self) -> Redis:
        """A client of this node alone (not the cluster), quick to give up on it."""
        return Redis(
            host=HOST,
            port=self.port,
            decode_responses=True,
            socket_connect_timeout=1.0,
            socket_timeout=2.0,
        )

    async def ask(self, *command: str) -> str:
        """One command's raw text reply (``CLUSTER``'s subcommands are not parsed)."""
        client = self.client()
        try:
            # Untyped in redis-py, and the raw text: the typed helpers parse some replies.
            return str(await client.execute_command(*command))  # type: ignore[no-untyped-call]
        finally:
            await client.aclose()

    async def replication(self) -> dict[str, Any]:
        """``INFO replication``, parsed."""
        client = self.client()
        try:
            return dict(await client.info("replication"))
        finally:
            await client.aclose()

    async def answers(self) -> bool:
        """Whether the node answers ``PING``."""
        client = self.client()
        try:
            return bool(await client.ping())
        except (RedisError, OSError):
            return False
        finally:
            await client.aclose()

    def log_tail(self, lines: int = 15) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else "(no log)"
        return f"--- {self.address} ---\n" + "\n".join(text.splitlines()[-lines:])


@dataclass
class FailoverCluster:
    """The running cluster: its URL, its nodes, and a way to kill one."""

    nodes: list[Node]
    killed: list[Node] = field(default_factory=list)

    @property
    def url(self) -> str:
        """``redis+cluster://`` naming every node, as the stores read it."""
        return "redis+cluster://" + ",".join(node.address for node in self.nodes) + "/"

    @property
    def alive(self) -> list[Node]:
        """The nodes not killed."""
        return [node for node in self.nodes if node not in self.killed]

    def node(self, address: str) -> Node:
        """The node at ``host:port``."""
        return next(node for node in self.nodes if node.address == address)

    async def layout(self) -> list[Seen]:
        """Every node as the first live node that answers sees it."""
        problems = []
        for node in self.alive:
            try:
                return parse_nodes(await node.ask("CLUSTER", "NODES"))
            except (RedisError, OSError) as exc:
                problems.append(f"{node.address}: {exc}")
        raise AssertionError(f"no node of the cluster answers: {problems}")

    async def primary_of(self, slot: int) -> Node:
        """The node serving ``slot`` now."""
        owner = next(seen for seen in await self.layout() if seen.primary and seen.owns(slot))
        return self.node(owner.address)

    async def slots_of(self, node: Node) -> tuple[range, ...]:
        """The slots a primary serves now."""
        return next(seen for seen in await self.layout() if seen.address == node.address).slots

    def kill(self, node: Node) -> None:
        """``kill -9``: the node dies where it stands (reaped at teardown)."""
        # A signal, not ``process.kill()``: the process belongs to the fixture's loop.
        node.process.send_signal(signal.SIGKILL)
        self.killed.append(node)

    async def promoted(self, dead: Node, slots: tuple[range, ...], *, within: float) -> Node:
        """Wait until every live node agrees that one replica took over the ``slots``
        the killed primary ``dead`` served, and says the cluster is ok again; that replica.

        Raises:
            AssertionError: Not within ``within`` seconds.
        """
        deadline = time.monotonic() + within
        while True:
            heir = await self._heir(dead, slots)
            if heir is not None:
                return heir
            if time.monotonic() > deadline:
                logs = "\n".join(node.log_tail() for node in self.nodes)
                raise AssertionError(f"no replica of {dead.address} took over:\n{logs}")
            await asyncio.sleep(POLL)

    async def _heir(self, dead: Node, slots: tuple[range, ...]) -> Node | None:
        views = []
        for node in self.alive:
            try:
                info = parse_info(await node.ask("CLUSTER", "INFO"))
                views.append((info, parse_nodes(await node.ask("CLUSTER", "NODES"))))
            except (RedisError, OSError):
                return None
        heirs = set()
        for info, seen in views:
            was = next(s for s in seen if s.address == dead.address)
            owners = [s for s in seen if s.primary and not s.failing and s.slots == slots]
            if info.get("cluster_state") != "ok" or not was.failing or len(owners) != 1:
                return None
            heirs.add(owners[0].address)
        return self.node(heirs.pop()) if len(heirs) == 1 else None


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
        return True


def free_ports(count: int) -> list[int]:
    """``count`` consecutive ports that, with their bus ports, nobody listens on."""
    for _ in range(200):
        first = random.randint(20_000, 30_000)
        ports = list(range(first, first + count))
        if all(_free(port) and _free(port + BUS_OFFSET) for port in ports):
            return ports
    pytest.fail("no free ports for a Redis Cluster", pytrace=False)


async def _until(check: Callable[[], Awaitable[bool]], within: float) -> bool:
    """Poll the async ``check`` until it is true; whether it was, within ``within`` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if await check():
                return True
        except (RedisError, OSError):
            pass
        await asyncio.sleep(POLL)
    return False


async def _start_node(port: int, workdir: Path) -> Node:
    log = workdir / f"redis-{port}.log"
    process = await asyncio.create_subprocess_exec(
        "redis-server",
        "--bind", HOST,
        "--port", str(port),
        "--save", "",
        "--appendonly", "no",
        "--cluster-enabled", "yes",
        "--cluster-config-file", f"nodes-{port}.conf",
        "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
        # A replica's first sync starts at once, not after the 5 s default wait.
        "--repl-diskless-sync-delay", "0",
        "--dir", str(workdir),
        "--logfile", str(log),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    return Node(port=port, process=process, log=log)


async def _joined(nodes: Iterable[Node]) -> bool:
    """Every node says ok, knows the primaries with a replica each, and every
    replica is in sync with its primary."""
    for node in nodes:
        info = parse_info(await node.ask("CLUSTER", "INFO"))
        known = info.get("cluster_known_nodes")
        if info.get("cluster_state") != "ok" or known != str(PRIMARIES * 2):
            return False
        seen = parse_nodes(await node.ask("CLUSTER", "NODES"))
        if sum(s.primary for s in seen) != PRIMARIES or any(s.failing for s in seen):
            return False
        me = next(s for s in seen if s.address == node.address)
        if not me.primary:
            replication = await node.replication()
            if replication.get("master_link_status") != "up":
                return False
            if replication.get("master_sync_in_progress") != 0:
                return False
    return True


async def start_cluster(workdir: Path) -> FailoverCluster:
    """Start and join the six nodes; fail the test when they do not come up."""
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.fail(
            "redis-server and redis-cli are needed (scripts/ensure-redis-cluster installs"
            " them); the failover test never skips.",
            pytrace=False,
        )
    cluster = FailoverCluster(
        [await _start_node(port, workdir) for port in free_ports(PRIMARIES * 2)]
    )
    try:
        await _join(cluster)
    except BaseException:
        await stop_cluster(cluster)
        raise
    return cluster


async def _join(cluster: FailoverCluster) -> None:
    def failed(what: str) -> NoReturn:
        logs = "\n".join(node.log_tail() for node in cluster.nodes)
        pytest.fail(f"the failover cluster {what}:\n{logs}", pytrace=False)

    async def answering() -> bool:
        if any(node.process.returncode is not None for node in cluster.nodes):
            failed("lost a node while starting")
        return all([await node.answers() for node in cluster.nodes])

    if not await _until(answering, START_WITHIN):
        failed("nodes did not answer")
    create = await asyncio.create_subprocess_exec(
        "redis-cli",
        "--cluster", "create", *(node.address for node in cluster.nodes),
        "--cluster-replicas", "1",
        "--cluster-yes",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        output, _ = await asyncio.wait_for(create.communicate(), START_WITHIN)
    except TimeoutError:
        create.kill()
        await create.wait()
        failed("was not created in time")
    if create.returncode != 0:
        failed(f"was not created:\n{output.decode(errors='replace')}")
    if not await _until(lambda: _joined(cluster.nodes), START_WITHIN):
        failed("did not come up (cluster_state:ok, replicas in sync)")


async def stop_cluster(cluster: FailoverCluster) -> None:
    """Kill every node and reap it."""
    for node in cluster.nodes:
        if node.process.returncode is None:
            node.process.kill()
    await asyncio.gather(*(node.process.wait() for node in cluster.nodes))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def failover_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[FailoverCluster]:
    """A fresh six-node cluster (three primaries, a replica each), killed at the end."""
    cluster = await start_cluster(tmp_path_factory.mktemp("failover-cluster"))
    try:
        yield cluster
    finally:
        await stop_cluster(cluster)
