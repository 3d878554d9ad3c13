"""InitProducerId (api key 22) for idempotent producers, and durable producer id allocation.

Without a transactional id Kafka "blindly" hands out a fresh producer id with epoch 0 — also to a
producer that names its old id and epoch (KIP-360): an idempotent producer bumps its epoch itself
and only asks for a new id when it must. Producer ids must never be reused, across restarts too,
or a new producer could be taken for a retry of an old one. Ids are reserved in blocks of
``BLOCK_SIZE``: the end of the current block is made durable before any id from it is handed out,
so a restart continues after the reserved block and an fsync costs one per 1,000 producers.
A transactional id goes to the transaction coordinator (``coordinator/transactions/service.py``),
which hands this handler only the requests without one and takes its producer ids from the same
manager: one id space for idempotent and transactional producers, as Kafka's.

In cluster mode the ids must be unique across the nodes, not only across restarts: a block is
claimed from the cluster (``claim_block``, the cluster wing's ``/latest_producer_id_block`` in
ZooKeeper, as Kafka's ZooKeeper mode does), off the event loop, and the local file is not used.
Two nodes handing out the same id would make one producer's first batch look like a retry of
another's, answered as a duplicate and never written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from kafka.protocol.producer import InitProducerIdResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse

from ..config import ConfigError
from ..context import Handler, Reply, RequestContext
from ..data_dir import atomic_write
from ..security.acl import AclOperation, Authorizer, ResourceType
from ..security.request_checks import NO_AUTHORIZER, allowed, cluster_allowed

__all__ = ["ProducerIdManager", "ProducerIdApis", "BLOCK_SIZE"]

BLOCK_SIZE = 1000


class ProducerIdManager:
    FILE = "producer_ids"

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / self.FILE
        self._next = 0
        self._block_end = 0
        #: Cluster mode: claims the next cluster-wide block, (first id, last id + 1). Blocking.
        self.claim_block: Callable[[], tuple[int, int]] | None = None
        self._claiming: asyncio.Future[None] | None = None
        if self._path.exists():
            text = self._path.read_text(encoding="utf-8", errors="replace").strip()
            try:
                self._next = self._block_end = int(text.removeprefix("next.block.start="))
            except ValueError:
                raise ConfigError(f"{self._path}: expected next.block.start=<integer>, found {text[:40]!r}") from None

    @property
    def exhausted(self) -> bool:
        return self._next >= self._block_end

    async def refill(self) -> None:
        """Cluster mode: claim the next block from the cluster (one claim at a time)."""
        if self._claiming is None:
            claim = self.claim_block
            assert claim is not None

            async def run() -> None:
                try:
                    self._next, self._block_end = await asyncio.to_thread(claim)
                finally:
                    self._claiming = None
            self._claiming = asyncio.ensure_future(run())
        await asyncio.shield(self._claiming)

    def next_id(self) -> int:
        if self.claim_block is not None:
            if self.exhausted:
                raise RuntimeError("no producer id block: refill() first")
            pid = self._next
            self._next += 1
            return pid
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            atomic_write(self._path, f"next.block.start={self._block_end}\n".encode())
        pid = self._next
        self._next += 1
        return pid


def init_producer_id_refusal(authorizer: Authorizer, ctx: RequestContext, transactional_id: str | None) -> int:
    """KafkaApis handleInitProducerIdRequest: WRITE on the transactional id
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), or without one IDEMPOTENT_WRITE on the cluster or
    WRITE on some topic (``authorizeByResourceType``; CLUSTER_AUTHORIZATION_FAILED)."""
    if not authorizer.enabled:
        return ErrorCode.NONE
    if transactional_id is not None:
        if not allowed(authorizer, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not cluster_allowed(authorizer, ctx, AclOperation.IDEMPOTENT_WRITE) and \
            not authorizer.authorize_by_resource_type(ctx.principal, ctx.client_host, AclOperation.WRITE,
                                                      ResourceType.TOPIC):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return ErrorCode.NONE


class ProducerIdApis:
    def __init__(self, manager: ProducerIdManager, *, authorizer: Authorizer = NO_AUTHORIZER) -> None:
        self.manager = manager
        self.authorizer = authorizer

    def init_producer_id(self, ctx: RequestContext, request: KafkaRequest) -> Reply:
        version = ctx.api_version
        error = init_producer_id_refusal(self.authorizer, ctx, request.transactional_id)
        if error:
            return InitProducerIdResponse(version=version, throttle_time_ms=0, error_code=error, producer_id=-1,
                                          producer_epoch=-1)
        if request.transactional_id is not None:
            # Served by the transaction coordinator; reached only where none is wired.
            return InitProducerIdResponse(version=version, throttle_time_ms=0,
                                          error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
        if self.manager.claim_block is not None and self.manager.exhausted:
            return self._after_refill(version)
        return InitProducerIdResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                      producer_id=self.manager.next_id(), producer_epoch=0)

    async def _after_refill(self, version: int) -> KafkaResponse:
        while self.manager.exhausted:
            try:
                await self.manager.refill()
            except Exception:
                # ZooKeeper unreachable: the producer retries (Kafka answers the same way when its
                # producer id manager cannot get a block).
                return InitProducerIdResponse(version=version, throttle_time_ms=0,
                                              error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1,
                                              producer_epoch=-1)
        return InitProducerIdResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                      producer_id=self.manager.next_id(), producer_epoch=0)

    def handlers(self) -> dict[ApiKey, Handler]:
        return {ApiKey.INIT_PRODUCER_ID: self.init_producer_id}
