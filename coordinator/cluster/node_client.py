"""One connection from this node to another node, speaking the Kafka protocol as a client.

The replica fetcher fetches over one (Fetch, OffsetForLeaderEpoch); the transaction coordinator
sends its markers over one per partition leader (WriteTxnMarkers, ``txn_marker_channel.py``), and
a partition leader asks the transaction coordinator of an id to verify a batch over one
(AddPartitionsToTxn v4 ``VerifyOnly``, KIP-890, ``txn_verifier.py``) — Kafka's inter-broker
``NetworkClient``s, as asyncio streams. One request at a time per connection: its one user (the
fetcher's loop, or a :class:`NodeQueues` sender) waits for each answer before the next request.

The endpoint is read from the cluster view at each connect, so a node that re-registered on a
new port is found. Any failure closes the connection (an answer may still be on its way, and a
later request must never read it); the caller decides whether to retry.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from protocol.client import decode_response, encode_request
from protocol.kafka_types import KafkaRequest, KafkaResponse

from ..security.node_client import NodeClientSecurity

__all__ = ["NodeConnection", "NodeQueues", "CONNECTION_ERRORS"]

log = logging.getLogger("groupcoord.cluster.nodes")

T = TypeVar("T")

#: What a lost, refused or silent connection raises.
CONNECTION_ERRORS = (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError)


class NodeConnection:
    def __init__(self, broker_id: int, endpoint: Callable[[], tuple[str, int] | None], client_id: str,
                 timeout_s: float = 30.0, security: NodeClientSecurity | None = None) -> None:
        self.broker_id = broker_id
        #: TLS and SASL on the inter-broker listener (coordinator/security/node_client.py); None: PLAINTEXT.
        self.security = security
        self.endpoint = endpoint
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0

    @property
    def connected(self) -> bool:
        return self._writer is not None

    async def connect(self) -> None:
        if self._writer is not None:
            return
        endpoint = self.endpoint()
        if endpoint is None:
            raise ConnectionError(f"broker {self.broker_id} is not registered")
        security = self.security
        if security is None or security.ssl is None:
            opening = asyncio.open_connection(*endpoint)
        else:
            opening = asyncio.open_connection(*endpoint, ssl=security.ssl, server_hostname=endpoint[0])
        self._reader, self._writer = await asyncio.wait_for(opening, self.timeout_s)
        if security is not None:
            await security.authenticate(self._exchange)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def call(self, api_key: int, version: int, request: KafkaRequest) -> KafkaResponse:
        """Send ``request`` at ``version`` and read its answer. Connects first if needed; on any
        error the connection is closed and the error raised."""
        try:
            await self.connect()
            return await self._exchange(api_key, version, request)
        except BaseException:
            self.close()
            raise

    async def _exchange(self, api_key: int, version: int, request: KafkaRequest) -> KafkaResponse:
        assert self._reader is not None and self._writer is not None
        self._correlation += 1
        cid = self._correlation
        self._writer.write(encode_request(api_key, version, cid, request, client_id=self.client_id))
        await self._writer.drain()
        size = struct.unpack(">i", await asyncio.wait_for(self._reader.readexactly(4), self.timeout_s))[0]
        frame = await asyncio.wait_for(self._reader.readexactly(size), self.timeout_s)
        got, response = decode_response(api_key, version, frame)
        if got != cid:
            raise ConnectionError(f"correlation id {got} != {cid}")
        return response


class NodeQueues(Generic[T]):
    """Requests to other nodes, one queue and one sender per node: what waits while a request is
    in flight goes in the next one together (Kafka's inter-broker senders drain a per-broker
    queue the same way: the transaction marker channel, the KIP-890 verification manager).

    ``send(connection, items)`` sends one request for ``items`` and answers each; ``fail(items)``
    answers them when it could not (an error, or shutdown). ``distinct(item)`` is a key no two
    items of one request may share (the answers are keyed by it)."""

    def __init__(self, connect: Callable[[int], NodeConnection],
                 send: Callable[[NodeConnection, list[T]], Awaitable[None]], fail: Callable[[list[T]], None],
                 distinct: Callable[[T], Hashable]) -> None:
        self._connect = connect
        self._send = send
        self._fail = fail
        self._distinct = distinct
        self._nodes: dict[int, tuple[NodeConnection, list[T]]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}

    def put(self, node: int, item: T) -> None:
        entry = self._nodes.get(node)
        if entry is None:
            entry = self._nodes[node] = (self._connect(node), [])
        entry[1].append(item)
        sender = self._senders.get(node)
        if sender is None or sender.done():
            self._senders[node] = asyncio.get_running_loop().create_task(self._drain(*entry))

    async def _drain(self, connection: NodeConnection, queue: list[T]) -> None:
        while queue:
            batch: list[T] = []
            rest: list[T] = []
            keys: set[Hashable] = set()
            for item in queue:
                key = self._distinct(item)
                if key in keys:
                    rest.append(item)
                else:
                    keys.add(key)
                    batch.append(item)
            queue[:] = rest
            try:
                await self._send(connection, batch)
            except asyncio.CancelledError:
                self._fail(batch)
                raise
            except Exception:
                log.exception("request to another node failed", extra={"broker": connection.broker_id})
                self._fail(batch)

    async def close(self) -> None:
        """Stop the senders, answer what is queued with ``fail``, close the connections."""
        for sender in self._senders.values():
            sender.cancel()
        await asyncio.gather(*self._senders.values(), return_exceptions=True)
        for connection, queue in self._nodes.values():
            self._fail(queue)
            queue.clear()
            connection.close()
