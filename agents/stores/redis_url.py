"""A Redis URL as the stores read it: the server or cluster, and the key prefix.

``redis://`` (``rediss://``, ``unix://``) names one primary; ``redis+cluster://``
(``rediss+cluster://``) names a Redis Cluster by one or more of its nodes,
``redis+cluster://[user:password@]host:port[,host:port...]/``. Either may end in
``?prefix=...``, the deployment's key prefix.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, TypeAlias, cast
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from .redis_keys import DEFAULT_PREFIX

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster

    RedisClient: TypeAlias = Redis | RedisCluster
else:
    RedisClient: TypeAlias = Any

CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}
"""The schemes naming a cluster, and whether each speaks TLS."""

CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a TCP connection when the URL does not say: a dead server
fails a health check quickly instead of hanging it."""


def split_prefix(url: str) -> tuple[str, str]:
    """Split ``?prefix=...`` off a Redis URL: ``(url for redis-py, key prefix)``."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefix = next((v for name, v in query if name == "prefix"), DEFAULT_PREFIX)
    if not prefix:
        raise ValueError(f"empty key prefix in {url!r}")
    rest = urlencode([(name, v) for name, v in query if name != "prefix"])
    return urlunsplit(parts._replace(query=rest)), prefix


def is_cluster(url: str) -> bool:
    """Whether a Redis URL names a Redis Cluster."""
    return urlsplit(url).scheme in CLUSTER_SCHEMES


POOL_SIZE = 64
"""Connections one client opens at most (per node of a cluster). Beyond that a
command waits for a free one, so a burst of requests queues instead of failing
with "too many connections"."""
POOL_WAIT = 20.0
"""Seconds a command waits for a free connection before it fails."""


def redis_client(server_url: str, *, pool_size: int = POOL_SIZE) -> RedisClient:
    """A client on a bounded connection pool that waits when it is full.

    It connects on first use. ``server_url`` is a URL without its prefix
    (``split_prefix``); a cluster URL gives redis-py's cluster client.

    Raises:
        ValueError: A cluster URL without nodes, or with options it does not take.
    """
    if is_cluster(server_url):
        return _cluster_client(server_url, pool_size=pool_size)
    from redis.asyncio import BlockingConnectionPool
    from redis.asyncio import Redis as Client

    pool = BlockingConnectionPool.from_url(
        server_url,
        max_connections=pool_size,
        timeout=POOL_WAIT,
        decode_responses=True,
        socket_connect_timeout=CONNECT_TIMEOUT,
    )
    return Client.from_pool(pool)  # the client owns the pool: closing one closes both


def _cluster_client(server_url: str, *, pool_size: int) -> RedisCluster:
    from redis.asyncio.cluster import ClusterNode, RedisCluster

    class QueuedCluster(RedisCluster):
        """redis-py's cluster client raises once a node's pool is full; this one waits.

        At most ``pool_size`` commands are under way at once, so no node ever
        needs more connections than its pool holds. It also learns the cluster's
        layout before the first command: commands racing the lazy first
        ``initialize`` of redis-py 8.1 fail on connections not yet open.
        """

        def __init__(self, gate: asyncio.Semaphore, **options: Any) -> None:
            super().__init__(**options)
            self._gate = gate
            self._ready = False

        async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
            if not self._ready:
                await self.initialize()  # under redis-py's lock: once
                self._ready = True
            async with asyncio.timeout(POOL_WAIT):
                await self._gate.acquire()
            try:
                return await super().execute_command(*args, **kwargs)
            finally:
                self._gate.release()

    parts = urlsplit(server_url)
    if parts.query or parts.path.strip("/"):
        raise ValueError(
            f"{server_url!r}: a cluster URL takes nodes and ?prefix=, nothing else"
            " (a cluster has no database number)"
        )
    credentials, _, hosts = parts.netloc.rpartition("@")
    username, _, password = credentials.partition(":")
    nodes = []
    for address in filter(None, hosts.split(",")):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{server_url!r}: {address!r} is not host:port")
        nodes.append(ClusterNode(host, int(port)))
    if not nodes:
        raise ValueError(f"{server_url!r}: name at least one node, host:port")
    return QueuedCluster(
        asyncio.Semaphore(pool_size),
        startup_nodes=nodes,
        username=unquote(username) or None,
        password=unquote(password) or None,
        ssl=CLUSTER_SCHEMES[parts.scheme],
        max_connections=pool_size,
        decode_responses=True,
        socket_connect_timeout=CONNECT_TIMEOUT,
    )


SINGLE_SERVER = "server"
"""The name ``primaries`` gives the one primary of a ``redis://`` client."""


async def primaries(client: RedisClient) -> list[str]:
    """The primaries a deployment-wide SCAN visits, by name: each of a cluster's
    (``host:port``, as it names them), or ``SINGLE_SERVER``."""
    from redis.asyncio.cluster import RedisCluster

    if not isinstance(client, RedisCluster):
        return [SINGLE_SERVER]
    await client.initialize()  # a no-op once the client knows the layout
    return sorted(node.name for node in client.get_primaries())


async def scan_primary(
    client: RedisClient, node: str, cursor: int, *, match: str, count: int
) -> tuple[int, list[str]]:
    """One ``SCAN`` step on one primary (named as ``primaries`` names it): the next
    cursor (0: done) and the keys found."""
    from redis.asyncio.cluster import RedisCluster

    if not isinstance(client, RedisCluster):
        following, keys = await client.scan(cursor, match=match, count=count)
        return int(following), cast(list[str], keys)  # this client always decodes
    target = client.get_node(node_name=node)
    if target is None:
        raise ConnectionError(f"{node} is no longer a node of the cluster")
    cursors, keys = await client.scan(cursor, match=match, count=count, target_nodes=target)
    # redis-py's cluster client answers a cursor per node it asked, typed as one.
    return int(cast(dict[str, int], cursors)[node]), cast(list[str], keys)
