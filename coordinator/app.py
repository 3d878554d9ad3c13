"""Wires a configured node together and runs it: data directory, topics, handlers, server, signals.

Start-up order: lock the data directory, load ``meta.properties`` and the topic registry, bind the
listener, then serve. Shutdown (SIGTERM/SIGINT): stop accepting, finish in-flight requests, close
connections, flush and close the logs, release the data directory, exit 0. A second signal during
shutdown exits at once.

Embedded (``App(config, embedded=True)``, the test harness of coordinator/testing/embedded.py): the
node runs on an event loop of a thread of its own, so it installs no signal handler and leaves the
process's garbage collector alone; ``request_stop`` is the graceful shutdown and ``abort`` a crash.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from protocol.apis import SUPPORTED_VERSIONS, ZOOKEEPER_MODE_VERSIONS, ApiKey
from protocol.errors import ErrorCode
from storage.group_commit import set_fsync_observer

from . import gc_policy
from .admin.acl_apis import AclApis
from .admin.cluster_apis import ClusterApis
from .admin.config_apis import ConfigApis
from .admin.elect_leaders import ElectLeadersApis
from .admin.group_configs import FileGroupConfigs, GroupConfigs
from .admin.reassignments import ReassignmentApis
from .admin.scram_apis import ScramApis
from .cluster.controller import Controller
from .cluster.controller_election import ControllerElection
from .cluster.coordinator_leadership import CoordinatorLeadership
from .cluster.coordinator_moves import CoordinatorMoves, MoveRefused
from .cluster.dynamic_configs import ZkConfigs
from .cluster.liveness import StallGuard
from .cluster.producer_id_blocks import ProducerIdBlocks
from .cluster.replica_fetcher import FetchSettings
from .cluster.replica_manager import ReplicaManager
from .cluster.replica_racks import ReplicaRacks
from .cluster.topic_store import ZkTopicStore
from .cluster.txn_marker_channel import ClusterMarkerChannel
from .cluster.txn_verifier import ClusterVerifier
from .cluster.view import ClusterView
from .cluster.warming import WarmingMarks
from .cluster.zk_consumers import ZkConsumers
from .cluster.zk_offset_apis import ZkOffsetApis
from .cluster.zk_watcher import ZkWatcher
from .cluster.znodes import BrokerRegistration
from .cluster.zookeeper import ZooKeeper
from .config import Config, ConfigError, parse_host_port
from .context import NodeInfo, RequestContext
from .data_dir import DataDir, new_cluster_id
from .group.config import GroupConfig
from .group.coordinator_type import group_coordinator_type
from .group.service import GroupService
from .group.shard import GroupCoordinatorShard
from .runtime.coordinator_types import CoordinatorTypes
from .runtime.runtime import CoordinatorRuntime
from .security.acl_store import FileAclStore, ZkAclStore
from .security.authorizer import build_authorizer
from .security.listeners import Listener, resolve_listeners
from .security.node_client import node_client_security
from .security.sasl.gate import gate_factory
from .security.sasl.jaas import plain_users as plain_users_of
from .security.scram_credentials import FileScramStore, ZkScramStore
from .security.ssl_principal import PrincipalMapper
from .security.tls import ServerTls, tls_settings
from .server.gate import GateFactory, TlsPrincipal
from .server.server import Handler, KafkaServer
from .topics.apis import TopicApis
from .topics.delete_records import DeleteRecordsApis
from .topics.describe_producers import DescribeProducersApis
from .topics.fetch import FetchApis
from .topics.log_dirs import LogDirApis
from .topics.log_manager import LogManager
from .topics.offset_apis import OffsetApis
from .topics.produce import ProduceApis
from .topics.producer_ids import ProducerIdApis, ProducerIdManager
from .topics.registry import CONSUMER_OFFSETS, TRANSACTION_STATE, TopicRegistry
from .topics.replication_quota import ReplicationThrottle
from .topics.service import TopicService
from .topics.txn_markers import TxnMarkerApis
from .transactions.config import TransactionConfig
from .transactions.coordinator_type import transaction_coordinator_type
from .transactions.service import TransactionService, next_node_coordinator_epoch
from .transactions.shard import TransactionHooks, TransactionShard

if TYPE_CHECKING:
    from .faults.engine import FaultEngine
    from .ops.context import OpsContext
    from .ops.http_listener import HttpListener

__all__ = ["App"]

#: How long a node in controlled shutdown keeps serving after its leaderships moved.
SHUTDOWN_DRAIN_S = 1.0

log = logging.getLogger("groupcoord")


class App:
    def __init__(self, config: Config, *, embedded: bool = False) -> None:
        self.config = config
        #: Hosted by a test harness in a process that is not ours: no signals, no gc freeze.
        self.embedded = embedded
        #: Once serving: the bound listeners (name, host, port), and ``started`` set.
        self.bound: list[tuple[str, str, int]] = []
        self.started = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._aborted = False
        # Listeners, TLS stores and principal rules are checked before anything starts: a bad one
        # is a ConfigError (exit 2) naming the setting.
        self.listeners = resolve_listeners(config)
        self.listener_tls = {listener.name: _listener_tls(config, listener) for listener in self.listeners.bound}
        # How this node connects to the others (TLS, SASL) on the inter-broker listener.
        self.inter_broker_security = node_client_security(config, self.listeners) if config["zookeeper.connect"] \
            else None
        #: Cluster mode (``zookeeper.connect`` set): this node's ZooKeeper session.
        self.zookeeper: ZooKeeper | None = None
        self.election: ControllerElection | None = None
        self.view: ClusterView | None = None
        self.watcher: ZkWatcher | None = None
        self.controller: Controller | None = None
        self.replicas: ReplicaManager | None = None
        #: Cluster mode: dynamic broker configs in ZooKeeper, and the replication throttles.
        self.dynamic_configs: ZkConfigs | None = None
        self.throttle: ReplicationThrottle | None = None
        self.stall_guard: StallGuard | None = None
        #: Cluster mode: the coordinators' leadership, the markers and verifications across nodes.
        self.coordinator_leadership: CoordinatorLeadership | None = None
        #: Cluster mode: the ``move-coordinator`` fault as a real leadership move.
        self.coordinator_moves: CoordinatorMoves | None = None
        self.marker_channel: ClusterMarkerChannel | None = None
        self.verifier: ClusterVerifier | None = None
        cluster_id_source = None
        if config["zookeeper.connect"]:
            zookeeper = self.zookeeper = ZooKeeper(config["zookeeper.connect"],
                                                   int(config["zookeeper.session.timeout.ms"]),
                                                   int(config["zookeeper.connection.timeout.ms"]))
            zookeeper.start()

            def cluster_id_source(stored: str | None) -> str:
                return zookeeper.cluster_id(stored or new_cluster_id())

        try:
            self.data_dir = DataDir(config.data_dir, int(config["node.id"]), cluster_id_source)
        except BaseException:
            if self.zookeeper is not None:
                self.zookeeper.close()
            raise
        # Security (issue 33; docs/security.html): SCRAM credentials and ACLs in the data directory
        # on one node, in ZooKeeper where Kafka keeps them in a cluster; the authorizer reads the
        # ACL store's cache; SASL listeners get a gate per connection.
        self.scram_store: FileScramStore | ZkScramStore
        self.acl_store: FileAclStore | ZkAclStore
        if self.zookeeper is None:
            self.scram_store = FileScramStore(config.data_dir)
            self.acl_store = FileAclStore(config.data_dir)
        else:
            self.scram_store = ZkScramStore(self.zookeeper)
            self.scram_store.start()
            self.acl_store = ZkAclStore(self.zookeeper)
            self.acl_store.start()
        self.authorizer = build_authorizer(str(config["authorizer.class.name"]), str(config["super.users"]),
                                           bool(config["allow.everyone.if.no.acl.found"]), self.acl_store)
        self.gates = {listener.name: self._gate_factory(listener) for listener in self.listeners.bound
                      if listener.sasl}
        # Cluster mode: the topics are ZooKeeper's; the registry mirrors them (replica_manager).
        self.registry = TopicRegistry(config.data_dir, persistent=self.zookeeper is None)
        self.registry.node_rack = config["broker.rack"]
        self.topics = TopicService(self.registry, config)
        self.logs = LogManager(config.data_dir, self.registry, config)
        if self.zookeeper is not None:
            self.logs.broker_id = self.data_dir.node_id
        self.topics.listeners.append(self.logs)
        self.producer_ids = ProducerIdManager(config.data_dir)
        # KIP-848 groups' config overrides: a file on one node; ZooKeeper's in a cluster, read
        # through the view once it exists (``_build_cluster``).
        self.group_configs = GroupConfigs(
            config, FileGroupConfigs(config.data_dir) if self.zookeeper is None else ZkConfigs(self.zookeeper))
        group_config = GroupConfig(
            session_timeout_min_ms=int(config["group.min.session.timeout.ms"]),
            session_timeout_max_ms=int(config["group.max.session.timeout.ms"]),
            initial_rebalance_delay_ms=int(config["group.initial.rebalance.delay.ms"]),
            max_size=int(config["group.max.size"]),
            offsets_retention_ms=int(config["offsets.retention.minutes"]) * 60_000,
            offsets_retention_check_interval_ms=int(config["offsets.retention.check.interval.ms"]),
            offset_metadata_max_bytes=int(config["offset.metadata.max.bytes"]),
            consumer_session_timeout_ms=config["group.consumer.session.timeout.ms"],
            consumer_min_session_timeout_ms=config["group.consumer.min.session.timeout.ms"],
            consumer_max_session_timeout_ms=config["group.consumer.max.session.timeout.ms"],
            consumer_heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
            consumer_min_heartbeat_interval_ms=config["group.consumer.min.heartbeat.interval.ms"],
            consumer_max_heartbeat_interval_ms=config["group.consumer.max.heartbeat.interval.ms"],
            consumer_max_size=config["group.consumer.max.size"],
            consumer_assignors=tuple(config["group.consumer.assignors"].split(",")),
            consumer_migration_policy=config["group.consumer.migration.policy"],
            consumer_regex_refresh_interval_ms=config["group.consumer.regex.refresh.interval.ms"],
            consumer_assignment_interval_ms=config["group.consumer.assignment.interval.ms"],
        )

        def partition_exists(topic: str, partition: int) -> bool:
            info = self.registry.get(topic)
            return info is not None and 0 <= partition < info.num_partitions

        # The coordinator types this node hosts, one runtime each (only consumer groups yet).
        self.coordinator_types = CoordinatorTypes()
        # KIP-848 groups read the topics from the registry (a TopicsImage) and their overrides
        # (IncrementalAlterConfigs on the GROUP resource) from the group configs.
        groups = group_coordinator_type(group_config, partition_exists, topics=self.registry,
                                        group_configs=self.group_configs.overrides)
        assert groups.topic == CONSUMER_OFFSETS
        self.coordinator_types.register(groups)
        self.runtime = CoordinatorRuntime(
            self.logs, groups,
            snapshot_min_records=int(config["offsets.snapshot.min.records"]),
            commit_timeout_ms=int(config["offsets.commit.timeout.ms"]))

        def offsets_partitions() -> int | None:
            info = self.registry.get(CONSUMER_OFFSETS)
            return None if info is None else info.num_partitions

        self.groups = GroupService(self.runtime, offsets_partitions, group_config.consumer_assignors,
                                   authorizer=self.authorizer, node_id=self.data_dir.node_id)
        if self.zookeeper is None:
            self.topics.listeners.append(self.groups)

        # The transaction coordinator (KIP-98): the second coordinator type, on __transaction_state.
        txn_config = TransactionConfig(
            max_timeout_ms=int(config["transaction.max.timeout.ms"]),
            id_expiration_ms=int(config["transactional.id.expiration.ms"]),
            abort_timed_out_interval_ms=int(config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]),
            remove_expired_interval_ms=int(config["transaction.remove.expired.transaction.cleanup.interval.ms"]))
        txn_hooks = TransactionHooks()
        transactions = transaction_coordinator_type(txn_config, txn_hooks)
        assert transactions.topic == TRANSACTION_STATE
        self.coordinator_types.register(transactions)
        self.txn_runtime = CoordinatorRuntime(
            self.logs, transactions,
            snapshot_min_records=int(config["offsets.snapshot.min.records"]),
            commit_timeout_ms=int(config["offsets.commit.timeout.ms"]))

        def transaction_state_partitions() -> int | None:
            info = self.registry.get(TRANSACTION_STATE)
            return None if info is None else info.num_partitions

        def offsets_partition_count() -> int:
            return offsets_partitions() or int(config["offsets.topic.num.partitions"])

        self.producer_id_apis = ProducerIdApis(self.producer_ids, authorizer=self.authorizer)
        self.transactions = TransactionService(
            self.txn_runtime, txn_hooks, txn_config, transaction_state_partitions, offsets_partition_count,
            self.producer_ids, self.producer_id_apis.init_producer_id, partition_exists=partition_exists,
            # One node: a counter raised at every start (see transactions/service.py); a cluster
            # uses each partition's leader epoch instead.
            node_coordinator_epoch=next_node_coordinator_epoch(config.data_dir) if self.zookeeper is None else 0,
            ensure_topic=self.topics.create_transaction_state_topic, authorizer=self.authorizer)
        # The markers of hosted partitions (WriteTxnMarkers; seam C2, docs/transactions.md): on one node they are
        # also the transaction coordinator's marker writer, in-process.
        self.txn_markers = TxnMarkerApis(self.logs, authorizer=self.authorizer)
        # A marker on a __consumer_offsets partition goes through the group coordinator, which
        # stores or drops the producer's pending offsets (seam C4, docs/transactions.md).
        self.txn_markers.internal_marker_writer = self.groups.complete_transaction
        self.transactions.marker_writer = self.txn_markers
        # (In cluster mode ClusterMarkerChannel, over this, replaces it: ``_build_cluster``.)
        if self.zookeeper is None:
            self.topics.listeners.append(self.transactions)
        # Cluster mode: the coordinator follows the leadership of the offsets partitions
        # (``follow_offsets_leadership`` in ``_build_cluster``).
        self.server: KafkaServer | None = None
        self.handlers: dict[ApiKey, Handler] = {}
        #: ``http.listen`` set: the HTTP listener (/metrics, health, dashboard) and the lag monitor.
        self.http: HttpListener | None = None
        self.ops: OpsContext | None = None
        #: ``test.faults.enable`` set: the fault engine (docs/testing.md), and what restarts this
        #: node for its crash-restart fault (set by whoever hosts the App, before ``run``).
        self.faults: FaultEngine | None = None
        #: Cluster mode: OffsetCommit/OffsetFetch v0 in ZooKeeper and the commits mirrored there.
        self.zk_offsets: ZkOffsetApis | None = None
        self.crash_restart_hook: Callable[[], None] | None = None
        self._stop = asyncio.Event()
        self._signals = 0

    def _gate_factory(self, listener: Listener) -> GateFactory:
        """The SASL gates of one listener, from its settings (listener-prefixed ones first)."""
        config, name = self.config, listener.name
        mechanisms = [m.strip() for m in str(config.for_listener(name, "sasl.enabled.mechanisms")).split(",")
                      if m.strip()]
        jaas = {m: str(config.for_listener(name, "sasl.jaas.config", m)) for m in mechanisms
                if config.for_listener(name, "sasl.jaas.config", m)}
        try:
            return gate_factory(mechanisms, jaas, self.scram_store.get,
                                max_receive_size=int(config.for_listener(name, "sasl.server.max.receive.size")),
                                reauth_ms=int(config.for_listener(name, "connections.max.reauth.ms")),
                                failed_delay_ms=int(config.for_listener(name, "connection.failed.authentication.delay.ms")),
                                versions=ZOOKEEPER_MODE_VERSIONS if self.zookeeper is not None else SUPPORTED_VERSIONS)
        except ValueError as exc:
            raise ConfigError(f"listener {name} ({listener.protocol}): {exc}") from None

    def _build_handlers(self, node: NodeInfo) -> dict[ApiKey, Handler]:
        handlers: dict[ApiKey, Handler] = {}
        # SaslHandshake / SaslAuthenticate reach a handler only outside a SASL exchange (a listener
        # without SASL); on SASL listeners the connection's gate answers them.
        handlers[ApiKey.SASL_HANDSHAKE] = _sasl_handshake_without_sasl
        handlers[ApiKey.SASL_AUTHENTICATE] = _sasl_authenticate_without_sasl
        handlers.update(ScramApis(self.scram_store, self.authorizer).handlers())
        handlers.update(AclApis(self.authorizer, self.acl_store).handlers())
        authorizer = self.authorizer
        handlers.update(ClusterApis(node, self.topics, self.view, authorizer=authorizer).handlers())
        handlers.update(TopicApis(node, self.topics, authorizer=authorizer).handlers())
        handlers.update(ConfigApis(node, self.config, self.topics, self.dynamic_configs, self.group_configs,
                                   authorizer=authorizer).handlers())
        produce = ProduceApis(self.logs, authorizer=authorizer)
        if self.config["transaction.partition.verification.enable"]:
            # KIP-890 part 1 (seam C3, docs/transactions.md): a transaction's first batch on a partition is checked
            # with its coordinator (in cluster mode wherever it runs: ClusterVerifier).
            verifier = self.verifier if self.verifier is not None else self.transactions
            produce.verifier = verifier
            self.groups.verifier = verifier  # TxnOffsetCommit's check, as Kafka's group coordinator
        handlers.update(produce.handlers())
        handlers.update(FetchApis(self.logs, self.throttle, authorizer=authorizer).handlers())
        handlers.update(LogDirApis(self.logs, authorizer=authorizer).handlers())
        handlers.update(ElectLeadersApis(self.topics, self.controller, authorizer=authorizer).handlers())
        handlers.update(ReassignmentApis(node, self.topics, self.controller, authorizer=authorizer).handlers())
        handlers.update(OffsetApis(self.logs, authorizer=authorizer).handlers())
        # Transaction markers and producer state of hosted partitions (KIP-98, KIP-664).
        handlers.update(self.txn_markers.handlers())
        handlers.update(DescribeProducersApis(self.logs, authorizer=authorizer).handlers())
        handlers.update(DeleteRecordsApis(self.logs, authorizer=authorizer).handlers())
        handlers.update(self.producer_id_apis.handlers())
        handlers.update(self.groups.handlers())
        # InitProducerId with a transactional id, and the transaction APIs; without one it goes on
        # to the idempotent path (producer_id_apis).
        handlers.update(self.transactions.handlers())
        if self.zookeeper is not None and self.view is not None:
            # OffsetCommit / OffsetFetch v0 keep their offsets in ZooKeeper, as ZooKeeper-mode Kafka did.
            # A v0 request gives up on a ZooKeeper that does not answer within the session timeout
            # (coordinator/cluster/zk_consumers.py says how Kafka 2.x differed).
            consumers = ZkConsumers(self.zookeeper.client, request_timeout_s=self.zookeeper.session_timeout_ms / 1000)
            self.zk_offsets = ZkOffsetApis(consumers, self.view.partition_count,
                                           metadata_max_bytes=int(self.config["offset.metadata.max.bytes"]),
                                           authorizer=authorizer,
                                           mirror_groups=self.config["offsets.zookeeper.mirror.groups"])
            self.zk_offsets.wrap(handlers)
        missing = set(SUPPORTED_VERSIONS) - set(handlers)
        if missing:  # the one api table must only advertise what is implemented
            raise RuntimeError(f"advertised apis without a handler: {sorted(k.name for k in missing)}")
        return handlers

    async def run(self) -> int:
        loop = self._loop = asyncio.get_running_loop()
        started = loop.time()
        await self.logs.open_all()
        log.info("logs loaded", extra={"partitions": len(self.logs._logs), "seconds": round(loop.time() - started, 3)})
        self.server = KafkaServer({}, max_request_size=int(self.config["socket.request.max.bytes"]),
                                  max_connections=int(self.config["max.connections"]),
                                  idle_timeout_ms=int(self.config["connections.max.idle.ms"]))
        if self.zookeeper is not None:
            self.server.versions = ZOOKEEPER_MODE_VERSIONS  # OffsetCommit v0-1, OffsetFetch v0 (KIP-896's removed)
        bound: list[tuple[str, str, int]] = []
        endpoints: list[tuple[str, str, int]] = []
        for listener, advertised in zip(self.listeners.bound, self.listeners.advertised, strict=True):
            tls, principal = self.listener_tls[listener.name]
            gates = self.gates.get(listener.name)
            bound_host, bound_port = await self.server.bind(
                listener.host, listener.port, listener=listener.name, ssl=tls.context if tls is not None else None,
                tls_principal=principal, gate_factory=gates)
            bound.append((listener.name, bound_host, bound_port))
            # Port 0 binds a free port; the advertised one follows it.
            endpoints.append((listener.name, advertised.host, advertised.port or bound_port))
        bound_host, bound_port = bound[0][1], bound[0][2]
        inter_broker = next(e for e in endpoints if e[0] == self.listeners.inter_broker)
        _name, adv_host, adv_port = inter_broker
        node = NodeInfo(self.data_dir.node_id, adv_host, adv_port, self.data_dir.cluster_id, tuple(endpoints))
        if self.zookeeper is not None:
            self._build_cluster(node)
        self.handlers = self._build_handlers(node)
        self.server.set_handlers(self.handlers)
        self._build_faults()
        if self.config["http.listen"]:
            # Before this node registers or loads anything: a port in use stops start-up before the
            # cluster sees the node, and /readyz answers 503 while the coordinator partitions load.
            await self._start_ops(node)
        if self.zookeeper is not None:
            # Registered before serving: a node whose broker.id another live node holds never
            # answers a client (ClusterError, exit 1).
            registration = BrokerRegistration(node.node_id, adv_host, adv_port, self.config["broker.rack"] or None,
                                              endpoints=node.endpoints,
                                              protocols=tuple(self.listeners.protocol_map().items()))
            await asyncio.to_thread(self.zookeeper.register, registration)
            await self._start_cluster(node)
        if self.embedded:
            gc_policy.leave_to_host()  # nor later, once the coordinator partitions have loaded
        else:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._on_signal, sig)
            gc_policy.freeze_long_lived()  # the code: modules, classes, schemas (see gc_policy)
        if self.zookeeper is None:
            self.groups.load_all()
            self.transactions.load_all()
        await self.server.start()
        log.info("listening", extra={"listen": f"{bound_host}:{bound_port}", "advertised": f"{adv_host}:{adv_port}",
                                     "listeners": ",".join(f"{n}://{h}:{p}" for n, h, p in bound),
                                     "node_id": node.node_id, "cluster_id": node.cluster_id,
                                     "event_loop": type(loop).__module__.split(".")[0],
                                     "data_dir": str(self.config.data_dir)})
        self.bound = bound
        self.started.set()
        await self._stop.wait()
        if self._aborted:
            # ``abort`` did the crash; what is left is the ops wing's sockets and the cluster's parts.
            await self._stop_ops()
            await self._stop_cluster()
            self.close()
            log.info("aborted")
            return 1
        log.info("shutting down")
        if self.replicas is not None and self.config["controlled.shutdown.enable"]:
            # While still serving, hand leadership over (Kafka: controlled.shutdown.max.retries 3
            # × retry.backoff 5 s bounds the wait), so clients move with no failed request.
            await self.replicas.controlled_shutdown(15.0)
            # Keep answering a moment longer (a heartbeat interval): clients still talking to this
            # node get NOT_COORDINATOR / NOT_LEADER_OR_FOLLOWER on a live connection, which sends
            # every stock client to the new leader; a reset connection sends some (kafka-python,
            # kafkajs) into error paths of their own.
            await asyncio.sleep(SHUTDOWN_DRAIN_S)
        # Resign as coordinator first, so parked JoinGroup/SyncGroup requests are answered
        # (NOT_COORDINATOR) instead of holding the shutdown until their rebalance times out.
        self.server.stop_accepting()
        # Snapshot first, so the next start loads the state instead of replaying the log.
        await self.runtime.snapshot_all()
        await self.txn_runtime.snapshot_all()
        self.groups.shutdown()
        self.transactions.shutdown()
        await self._stop_cluster()
        await self.server.shutdown()
        await self._stop_ops()
        await self.logs.close_all()
        self.close()
        if not self.embedded:
            self._keep_second_signal_fatal(loop)
        log.info("stopped")
        return 0

    def _build_faults(self) -> None:
        """``test.faults.enable``: the fault engine, acting on this node's group service and server,
        in front of every handler (coordinator/faults/). Imported here: a node without it loads
        none of it, and its requests pass no wrapper."""
        if not self.config["test.faults.enable"]:
            return
        from .faults.engine import FaultEngine, FaultTargets

        server = self.server
        assert server is not None

        def topic_name(topic_id: uuid.UUID) -> str | None:
            info = self.registry.by_id(topic_id)
            return None if info is None else info.name

        def crash_restart() -> None:
            hook = self.crash_restart_hook
            if hook is None:
                raise RuntimeError("crash-restart is not available here")
            hook()

        targets = FaultTargets(rebalance=self.groups.force_rebalance, kick_member=self.groups.kick_member,
                               # A cluster node moves the partition's leadership for real.
                               move_coordinator=self._cluster_move_coordinator if self.coordinator_moves is not None
                               else self.groups.move_coordinator,
                               drop_connections=server.drop_connections,
                               crash_restart=crash_restart if self.crash_restart_hook is not None else None,
                               topic_name=topic_name)
        self.faults = FaultEngine(targets, int(self.config["test.faults.max.duration.ms"]), _now_ms)
        server.set_handlers(self.faults.wrap(self.handlers))
        # A warning on a served node (an operator should see it); in the test harness, where every
        # node has faults on, a note that does not litter each test's output.
        log.log(logging.INFO if self.embedded else logging.WARNING,
                "fault injection is on (test.faults.enable): never in production")

    async def _start_ops(self, node: NodeInfo) -> None:
        """The ops wing (docs/metrics.md): the node's live view, the lag monitor sampling it,
        readiness, the metrics (two timing hooks, on requests and on fsyncs) and the HTTP listener
        on ``http.listen``. Imported here: a node without ``http.listen`` loads none of it."""
        from .ops.context import OpsContext
        from .ops.http_listener import start_http
        from .ops.lag_monitor import LagMonitor
        from .ops.metrics import register_metrics
        from .ops.readiness import Readiness
        from .ops.state_view import StateView

        assert self.server is not None
        config = self.config
        view = StateView(runtime=self.runtime, txn_runtime=self.txn_runtime, logs=self.logs, cluster=self.view,
                         node_id=node.node_id, endpoint=(node.host, node.port), rack=config["broker.rack"] or None)
        if self.view is not None:
            # Offsets of partitions led by other nodes, asked of their leaders on the lag interval.
            from .ops.remote_offsets import RemoteOffsets

            view.remote = RemoteOffsets(self.view, node.node_id, view.committed_partitions, view.is_led_here,
                                        interval_ms=config["lag.sample.interval.ms"])
        lag = LagMonitor(view, _now_ms, interval_ms=config["lag.sample.interval.ms"],
                         table_size=config["lag.lookup.table.size"], intervals=config["lag.burrow.intervals"],
                         min_distance_ms=config["lag.burrow.min.distance.ms"],
                         allowed_lag=config["lag.burrow.allowed.lag"])
        plain_users: dict[str, str] = {}
        for listener in self.listeners.bound:
            if listener.sasl:
                jaas = str(config.for_listener(listener.name, "sasl.jaas.config", "PLAIN"))
                plain_users.update(plain_users_of(jaas) if jaas else {})
        ctx = self.ops = OpsContext(
            config=config, view=view, lag=lag, readiness=Readiness(view, zookeeper=self.zookeeper),
            handlers=self.handlers, authorizer=self.authorizer, scram_store=self.scram_store,
            plain_users=plain_users, admin_enabled=config["http.admin.enabled"], cluster_id=node.cluster_id,
            node_id=node.node_id, clock_ms=_now_ms, faults=self.faults)
        if self.zookeeper is not None:
            # ZooKeeper-era groups (/consumers) beside the node's own in /metrics (ops/zk_era_groups.py).
            from .ops.zk_era_groups import ZkEraGroups

            ctx.zk_era = ZkEraGroups(self.zookeeper.client, interval_ms=config["lag.sample.interval.ms"])
        hooks = register_metrics(ctx)
        self.server.request_observer = hooks.requests.observe
        set_fsync_observer(hooks.fsyncs.observe)
        self.runtime.set_write_observer(hooks.counters.on_write)
        host, port = parse_host_port(config["http.listen"])
        self.http = await start_http(ctx, host, port)
        if view.remote is not None:
            view.remote.start()
        lag.start()
        if ctx.zk_era is not None:
            ctx.zk_era.start()

    async def _stop_ops(self) -> None:
        if self.ops is not None:
            await self.ops.lag.stop()
            if self.ops.zk_era is not None:
                await self.ops.zk_era.stop()
            if self.ops.view.remote is not None:
                await self.ops.view.remote.stop()
        if self.http is not None:
            await self.http.stop()
            self.http = None
        if self.ops is not None:
            set_fsync_observer(None)
            self.ops = None

    def _build_cluster(self, node: NodeInfo) -> None:
        """Cluster mode's parts (docs/architecture.md): the view of ZooKeeper, the topic store,
        the replica manager, the controller. Started by ``_start_cluster``."""
        assert self.zookeeper is not None
        config = self.config
        self.view = ClusterView()
        self.view.inter_broker_listener = self.listeners.inter_broker
        self.view.inter_broker_security = self.inter_broker_security
        # What consumer groups read of replica racks (KIP-1101), from the view.
        ReplicaRacks(self.view, self.registry)
        self.topics.store = ZkTopicStore(self.zookeeper, self.view)
        # Producer ids unique across the cluster, not only across this node's restarts.
        self.producer_ids.claim_block = ProducerIdBlocks(self.zookeeper, node.node_id).claim
        view = self.view
        self.dynamic_configs = ZkConfigs(self.zookeeper, view)
        self.group_configs.store = self.dynamic_configs

        def throttle_rate(key: str) -> int:
            dynamic = view.dynamic_broker_config(node.node_id, key)
            try:
                return int(dynamic) if dynamic is not None else int(config[key])
            except ValueError:
                return int(config[key])

        def topic_configs(topic: str) -> dict[str, str] | None:
            info = self.registry.get(topic)
            return None if info is None else info.configs

        window_s = float(int(config["replication.quota.window.num"]) * int(config["replication.quota.window.size.seconds"]))
        self.throttle = ReplicationThrottle(node.node_id, throttle_rate, lambda: window_s, topic_configs)
        self.stall_guard = StallGuard(self.zookeeper, int(config["zookeeper.session.timeout.ms"]))
        self.replicas = ReplicaManager(
            node.node_id, self.zookeeper, self.view, self.topics, self.logs, throttle=self.throttle,
            lease=self.stall_guard.fresh,
            lag_time_max_ms=int(config["replica.lag.time.max.ms"]),
            fetch=FetchSettings(node.node_id, max_wait_ms=int(config["replica.fetch.wait.max.ms"]),
                                max_bytes=int(config["replica.fetch.response.max.bytes"]),
                                partition_max_bytes=int(config["replica.fetch.max.bytes"]),
                                backoff_s=int(config["replica.fetch.backoff.ms"]) / 1000.0))
        # Every coordinator type follows the leadership of its topic's partitions: the leader
        # epoch is the coordinator epoch (cluster/coordinator_leadership.py).
        services: dict[str, GroupService | TransactionService] = {
            CONSUMER_OFFSETS: self.groups, TRANSACTION_STATE: self.transactions}
        runtimes: dict[str, CoordinatorRuntime[GroupCoordinatorShard] | CoordinatorRuntime[TransactionShard]] = {
            CONSUMER_OFFSETS: self.runtime, TRANSACTION_STATE: self.txn_runtime}
        self.coordinator_leadership = CoordinatorLeadership()
        # A standby still replaying (just restarted, or newly a replica) is published, so the
        # controller elects a warm replica when it has the choice (cluster/warming.py).
        marks = WarmingMarks(self.zookeeper, node.node_id)
        def publish(topic: str) -> Callable[[int, bool], None]:
            return lambda partition, warming: marks.set(topic, partition, warming)

        for ctype in self.coordinator_types:
            self.coordinator_leadership.register(ctype.topic, services[ctype.topic])
            runtimes[ctype.topic].standby_listeners.append(publish(ctype.topic))
        self.replicas.leadership_listeners.append(self.coordinator_leadership.on_leadership)
        leadership = self.coordinator_leadership
        self.coordinator_moves = CoordinatorMoves(
            node.node_id, view, lambda topic, p: leadership.coordinator_epoch(topic, p) is not None)
        # Transactions across nodes: markers to each partition's leader, KIP-890 verification at
        # each id's coordinator (cluster/txn_marker_channel.py, cluster/txn_verifier.py).
        self.marker_channel = ClusterMarkerChannel(node.node_id, self.view, self.txn_markers)
        self.transactions.marker_writer = self.marker_channel
        self.verifier = ClusterVerifier(node.node_id, self.view, self.transactions)
        self.election = ControllerElection(self.zookeeper, node.node_id)
        self.controller = Controller(self.election, self.view,
                                     unclean_leader_election=bool(config["unclean.leader.election.enable"]),
                                     auto_leader_rebalance=bool(config["auto.leader.rebalance.enable"]),
                                     leader_imbalance_check_s=float(config["leader.imbalance.check.interval.seconds"]))

    async def _start_cluster(self, node: NodeInfo) -> None:
        """Watch ZooKeeper into the view, follow and lead this node's replicas, stand for controller."""
        assert self.zookeeper is not None and self.view is not None
        assert self.replicas is not None and self.controller is not None and self.election is not None
        config = self.config
        loop = asyncio.get_running_loop()
        if self.stall_guard is not None:
            self.stall_guard.start()
        self.replicas.start()
        self.controller.start()
        self.watcher = ZkWatcher(self.zookeeper, self.view, loop, broker_id=node.node_id)
        await asyncio.to_thread(self.watcher.start)
        await asyncio.to_thread(self.election.start)
        log.info("cluster mode: watching ZooKeeper, standing for controller",
                 extra={"zookeeper": config["zookeeper.connect"], "broker_id": node.node_id})

    async def _stop_cluster(self) -> None:
        if self.marker_channel is not None:
            await self.marker_channel.close()
        if self.verifier is not None:
            await self.verifier.close()
        if self.stall_guard is not None:
            await self.stall_guard.stop()
        if self.watcher is not None:
            self.watcher.stop()
        if self.controller is not None:
            await self.controller.stop()
        if self.replicas is not None:
            await self.replicas.stop()

    async def _cluster_move_coordinator(self, group_id: str, load_ms: int, not_coordinator_ms: int) -> dict[str, object]:
        """The ``move-coordinator`` fault on a cluster node: a real move of the group's offsets
        partition's leadership to another in-sync replica (cluster/coordinator_moves.py), answered
        once the new leader coordinates the group. The single node's timed windows have no
        counterpart in a real move, so they are refused (400) rather than ignored; a move the
        cluster cannot make (no other in-sync replica, no controller) is 409."""
        from .faults.spec import FaultError

        assert self.coordinator_moves is not None
        if load_ms or not_coordinator_ms:
            raise FaultError(400, "load_ms and not_coordinator_ms apply to a single node only: on a cluster, "
                                  "move-coordinator moves the partition's leadership for real")
        partition = self.groups.partition_of(group_id)
        if partition is None or self.runtime.serving_error(partition) != ErrorCode.NONE \
                or not self.runtime.shard(partition).holds_group(group_id):
            raise LookupError(f"group '{group_id}' does not exist")
        try:
            move = await self.coordinator_moves.move_group_coordinator(CONSUMER_OFFSETS, partition, group_id)
        except MoveRefused as exc:
            raise FaultError(409, str(exc)) from None
        return {"group": group_id, "partition": move.partition, "from": move.from_broker, "to": move.to_broker}

    def _keep_second_signal_fatal(self, loop: asyncio.AbstractEventLoop) -> None:
        """Closing the loop would restore the default signal actions, so a second SIGTERM in the
        last moments would kill us with a signal instead of exiting at once as promised. Swap in
        a plain handler while the signals are blocked, so none slips through the gap."""
        signals = {signal.SIGTERM, signal.SIGINT}
        signal.pthread_sigmask(signal.SIG_BLOCK, signals)
        try:
            for sig in signals:
                loop.remove_signal_handler(sig)
                signal.signal(sig, lambda _sig, _frame: os._exit(1))
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)

    def _on_signal(self, sig: int) -> None:
        self._signals += 1
        if self._signals > 1:
            log.warning("second signal, exiting now", extra={"signal": signal.Signals(sig).name})
            os._exit(1)
        log.info("signal received, shutting down gracefully", extra={"signal": signal.Signals(sig).name})
        self._stop.set()

    def request_stop(self) -> None:
        """Shut down gracefully, as on SIGTERM (from any thread)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self._stop.set()  # not running yet: ``run`` returns as soon as it would serve
        else:
            loop.call_soon_threadsafe(self._stop.set)

    def abort(self) -> None:
        """End the node as a crash would, on its loop's thread: the listeners close and every
        connection is reset; timers, loads and background tasks stop; the logs' files close with
        nothing written (no snapshot, no checkpoint, no clean-shutdown marker); the data directory
        is released. The next App on this data directory recovers from the logs, as after a
        SIGKILL. ``run`` then returns 1 once it has closed the ops wing's listener."""
        if self._aborted:
            return
        self._aborted = True
        log.warning("aborting: no shutdown steps (a crash)")
        if self.server is not None:
            self.server.abort()
        for runtime in (self.runtime, self.txn_runtime):
            for partition, _state, _shard in runtime.hosted():
                runtime.unload(partition)  # timers stop; parked requests fail with nothing written
        # With nothing hosted left, this only cancels the loads and the transaction markers' jobs.
        self.groups.shutdown()
        self.transactions.shutdown()
        self.logs.abort_all()
        self.data_dir.close()
        self._stop.set()

    def close(self) -> None:
        if self.zk_offsets is not None:
            self.zk_offsets.close()  # writes the queued mirror writes (a bounded wait) while the session is up
        if self.zookeeper is not None:
            # Ending the session removes /brokers/ids/<id> at once, not after the session timeout.
            self.zookeeper.close()
            self.zookeeper = None
        self.data_dir.close()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _listener_tls(config: Config, listener: Listener) -> tuple[ServerTls | None, TlsPrincipal | None]:
    """One listener's TLS contexts (SSL, SASL_SSL) and the mapping of client certificates to
    principals (SSL only: on SASL_SSL the SASL identity is the principal)."""
    tls = ServerTls(tls_settings(config, listener.name, listener.protocol), listener.name) if listener.tls else None
    principal: TlsPrincipal | None = None
    if listener.protocol == "SSL":
        principal = PrincipalMapper(str(config.for_listener(listener.name, "ssl.principal.mapping.rules"))).principal
    return tls, principal


def _sasl_handshake_without_sasl(ctx: RequestContext, _request: object) -> object:
    # Kafka's KafkaApis.handleSaslHandshakeRequest: a handshake the authenticator did not take.
    return SaslHandshakeResponse(version=ctx.api_version, error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


def _sasl_authenticate_without_sasl(ctx: RequestContext, _request: object) -> object:
    # Kafka's KafkaApis.handleSaslAuthenticateRequest, with its message.
    return SaslAuthenticateResponse(version=ctx.api_version, error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                    error_message="SaslAuthenticate request received after successful authentication",
                                    auth_bytes=b"", session_lifetime_ms=0)
