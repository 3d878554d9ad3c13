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

from protocol.apis import ApiKey, response_class
from protocol.kafka_types import KafkaMessageClass, KafkaRequest, KafkaResponse

__all__ = ["NodeConnection", "NodeQueues", "CONNECTION_ERRORS"]

log = logging.getLogger("groupcoord.cluster.nodes")

T = TypeVar("T")

#: What a lost, refused or silent connection raises.
CONNECTION_ERRORS = (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError)


class NodeConnection:
    def __init__(self, broker_id: int, endpoint: Callable[[], tuple[str, int] | None], client_id: str,
                 timeout_s: float = 30.0) -> None:
        self.broker_id = broker_id
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
        self._reader, self._writer = await asyncio.wait_for(asyncio.open_connection(*endpoint), self.timeout_s)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def call(self, api_key: int, version: int, request: KafkaRequest,
                   response: KafkaMessageClass | None = None) -> KafkaResponse:
        """Send ``request`` at ``version`` and read its answer, decoded with ``response`` (by
        default the api table's class of ``api_key``). Connects first if needed; on any error the
        connection is closed and the error raised."""
        try:
            await self.connect()
            assert self._reader is not None and self._writer is not None
            self._correlation += 1
            cid = self._correlation
            self._writer.write(_encode(api_key, version, cid, request, self.client_id))
            await self._writer.drain()
            size = struct.unpack(">i", await asyncio.wait_for(self._reader.readexactly(4), self.timeout_s))[0]
            frame = await asyncio.wait_for(self._reader.readexactly(size), self.timeout_s)
        except BaseException:
            self.close()
            raise
        cls = response if response is not None else response_class(api_key)
        (got,) = struct.unpack_from(">i", frame, 0)
        if got != cid:
            self.close()
            raise ConnectionError(f"correlation id {got} != {cid}")
        # Response header v1 (flexible versions) adds empty tagged fields; ApiVersions keeps v0.
        pos = 5 if cls.flexible_version_q(version) and api_key != ApiKey.API_VERSIONS else 4
        decoded: KafkaResponse = cls.decode(frame[pos:], version=version)
        return decoded


def _encode(api_key: int, version: int, correlation_id: int, request: KafkaRequest, client_id: str) -> bytes:
    """One request frame, size prefix included: request header v1, or v2 when flexible (as
    ``protocol/client.py`` writes it, from the request's own class, so messages the api table does
    not list yet can be sent)."""
    flexible = type(request).flexible_version_q(version)
    name = client_id.encode()
    header = struct.pack(">hhih", api_key, version, correlation_id, len(name)) + name + (b"\x00" if flexible else b"")
    body: bytes = request.encode(version=version)
    return struct.pack(">i", len(header) + len(body)) + header + body


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
