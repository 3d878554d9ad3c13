"""ZooKeeper paths and znode values as Kafka's ZooKeeper mode writes them (``ZkData``).

An operator's ``zkCli.sh ls /brokers/ids`` or ``get /cluster/id`` must read as it would for a
Kafka cluster (the znodes and their JSON:
https://github.com/apache/kafka/blob/3.9.0/core/src/main/scala/kafka/zk/ZkData.scala). Values are UTF-8 JSON maps
(field order is free) except where noted. Decoders never raise anything but :class:`ZnodeError`, whose message
names the path: a corrupt or foreign znode is a clear log line, never a crash.

Pure: no ZooKeeper client here, only paths and bytes.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = ["ZnodeError", "BROKER_IDS", "CLUSTER_ID", "PERSISTENT_PATHS", "broker_path", "BrokerRegistration",
           "encode_broker", "decode_broker", "encode_cluster_id", "decode_cluster_id", "CONTROLLER",
           "CONTROLLER_EPOCH", "encode_controller", "decode_controller", "decode_controller_epoch", "BROKER_TOPICS",
           "topic_path", "partition_state_path", "topic_config_path", "TopicAssignment", "PartitionState",
           "encode_topic", "decode_topic", "encode_partition_state", "decode_partition_state",
           "encode_topic_config", "decode_topic_config", "encode_topic_id", "decode_topic_id"]

BROKER_IDS = "/brokers/ids"
CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_TOPICS = "/brokers/topics"
#: groupcoord's own: an ephemeral ``<id>`` child per node in controlled shutdown (Kafka sends the
#: ControlledShutdown RPC instead; docs/architecture.md says why we use a znode).
CONTROLLED_SHUTDOWN = "/admin/controlled_shutdown"
#: groupcoord's own: an ephemeral ``<id>:<topic>:<partition>`` child per replica whose state is
#: still warming (a hot standby not yet caught up, coordinator/runtime rule 6). The controller
#: prefers a warm replica when it chooses a leader; Kafka has no such notion (it loads the
#: whole offsets partition on every election). Topic names cannot hold ':' (Kafka's legal
#: characters are ASCII letters, digits, '.', '_' and '-'), so the name splits unambiguously.
WARMING_REPLICAS = "/admin/warming_replicas"
#: ``/admin/delete_topics/<t>``: a deletion the controller carries out (Kafka's ZooKeeper mode).
DELETE_TOPICS = "/admin/delete_topics"
CONFIG_TOPICS = "/config/topics"
#: ``/config/brokers/<id>`` and ``/config/brokers/<default>``: dynamic broker configs.
CONFIG_BROKERS = "/config/brokers"
DEFAULT_ENTITY = "<default>"
#: ``/config/groups/<group>``: a KIP-848 group's config overrides (coordinator/admin/group_configs.py),
#: in the form of a topic's. Kafka keeps these in KRaft metadata only; the path follows its other
#: config entities. A group id may hold any character, so the znode name is its percent-encoding.
CONFIG_GROUPS = "/config/groups"
#: ``/config/changes/config_change_<seq>``: Kafka brokers read config changes from these
#: notifications; our nodes watch the config znodes themselves, but write them for Kafka's tools.
CONFIG_CHANGES = "/config/changes/config_change_"

#: The persistent parents a Kafka broker creates at start-up (``ZkData.PersistentZkPaths``), so
#: tools that list them find them on a cluster of ours too.
PERSISTENT_PATHS = ("/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/config/topics",
                    "/config/brokers", "/admin/delete_topics", "/brokers/seqid", "/isr_change_notification",
                    "/log_dir_event_notification")

#: The registration version Kafka 2.7+ writes (v5 adds ``features``; v4 the protocol map; v3 rack).
BROKER_VERSION = 5


#: A znode's value as ``json.loads`` gives it (typed ``Any`` by the standard library): a znode
#: may hold JSON of any shape, so the decoders check the fields they read.
JsonObject: TypeAlias = dict[str, Any]


class ZnodeError(ValueError):
    """A znode whose value is not what Kafka's ZooKeeper mode writes there."""


def warming_replica_name(broker_id: int, topic: str, partition: int) -> str:
    return f"{broker_id}:{topic}:{partition}"


def decode_warming_replica(name: str) -> tuple[int, str, int] | None:
    """``(broker, topic, partition)`` of a ``WARMING_REPLICAS`` child, None for a name we did not
    write (ignored: it only costs a preference)."""
    broker, sep, rest = name.partition(":")
    topic, sep2, partition = rest.rpartition(":")
    if not (sep and sep2 and topic and broker.isdigit() and partition.isdigit()):
        return None
    return int(broker), topic, int(partition)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """``/brokers/ids/<id>``: where a live broker can be reached (ephemeral: gone with its session)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    #: Milliseconds since the epoch at registration.
    timestamp_ms: int = 0
    #: Every listener, (NAME, host, port), as Kafka's ``endpoints``; empty: PLAINTEXT at host:port.
    endpoints: tuple[tuple[str, str, int], ...] = ()
    #: ``listener_security_protocol_map`` as (NAME, PROTOCOL) pairs; empty: PLAINTEXT:PLAINTEXT.
    protocols: tuple[tuple[str, str], ...] = ()
    #: The broker epoch: the registration znode's ``czxid`` (KIP-380,
    #: https://cwiki.apache.org/confluence/display/KAFKA/KIP-380%3A+Detect+outdated+control+requests+and+bounced+brokers+using+broker+generation).
    #: Each registration, in each session, gets a new and larger one; -1 when not read from ZooKeeper.
    epoch: int = -1

    @property
    def endpoint(self) -> str:
        return f"PLAINTEXT://{self.host}:{self.port}"

    def endpoint_for(self, listener: str) -> tuple[str, int] | None:
        """This broker's address on listener ``listener``, or None without that listener (Metadata
        then answers LISTENER_NOT_FOUND for what it leads, as Kafka's MetadataCache does)."""
        if not self.endpoints:
            return (self.host, self.port) if listener == "PLAINTEXT" else None
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None


def _endpoint_string(name: str, host: str, port: int) -> str:
    return f"{name}://[{host}]:{port}" if ":" in host else f"{name}://{host}:{port}"


def encode_broker(reg: BrokerRegistration) -> bytes:
    value: dict[str, object] = {
        "version": BROKER_VERSION,
        # host/port: the first PLAINTEXT endpoint (all we have), for pre-0.10 readers.
        "host": reg.host,
        "port": reg.port,
        "jmx_port": -1,
        "timestamp": str(reg.timestamp_ms),  # a string in Kafka's encoding
        "endpoints": [_endpoint_string(*e) for e in reg.endpoints] if reg.endpoints else [reg.endpoint],
        "listener_security_protocol_map": dict(reg.protocols) if reg.protocols else {"PLAINTEXT": "PLAINTEXT"},
        "features": {},
    }
    if reg.rack:  # present only when set (v3+)
        value["rack"] = reg.rack
    return json.dumps(value, separators=(",", ":")).encode()


def _json_map(path: str, data: bytes | None) -> JsonObject:
    if not data:
        raise ZnodeError(f"znode {path} is empty")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ZnodeError(f"znode {path} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ZnodeError(f"znode {path} holds {type(value).__name__} JSON, expected an object")
    return value


def _int_field(path: str, value: JsonObject, key: str) -> int:
    field = value.get(key)
    if isinstance(field, bool) or not isinstance(field, int):
        raise ZnodeError(f"znode {path}: {key} is {field!r}, expected an integer")
    return field


def decode_broker(path: str, data: bytes | None) -> BrokerRegistration:
    """Read a registration as Kafka's ``BrokerIdZNode.decode`` does: ``version`` and ``jmx_port``
    are required; the endpoint is the PLAINTEXT one of ``endpoints`` (v2+), else host/port."""
    value = _json_map(path, data)
    version = _int_field(path, value, "version")
    if not 1 <= version <= BROKER_VERSION:
        raise ZnodeError(f"znode {path}: registration version {version} is not one Kafka writes (1..{BROKER_VERSION})")
    _int_field(path, value, "jmx_port")
    try:
        broker_id = int(path.rsplit("/", 1)[1])
    except ValueError:
        raise ZnodeError(f"znode {path}: the last path element is not a broker id") from None
    host, port = value.get("host"), value.get("port")
    endpoints = value.get("endpoints") or []
    if not isinstance(endpoints, list):  # Kafka writes a JSON array; anything else is corrupt
        raise ZnodeError(f"znode {path}: endpoints is {endpoints!r}, not a list")
    listeners: list[tuple[str, str, int]] = []
    for endpoint in endpoints:
        if not isinstance(endpoint, str) or "://" not in endpoint:
            raise ZnodeError(f"znode {path}: endpoint {endpoint!r} is not NAME://host:port")
        name, _, address = endpoint.partition("://")
        ep_host, _, port_text = address.rpartition(":")
        ep_host = ep_host.strip("[]")
        try:
            ep_port = int(port_text)
        except ValueError:
            raise ZnodeError(f"znode {path}: endpoint {endpoint!r} has no port") from None
        listeners.append((name.upper(), ep_host, ep_port))
    for name, ep_host, ep_port in listeners:
        if name == "PLAINTEXT":
            host, port = ep_host, ep_port
            break
    protocol_map = value.get("listener_security_protocol_map") or {}
    if not isinstance(protocol_map, dict) or not all(isinstance(v, str) for v in protocol_map.values()):
        raise ZnodeError(f"znode {path}: listener_security_protocol_map is {protocol_map!r}, expected an object")
    if not isinstance(host, str) or not host or isinstance(port, bool) or not isinstance(port, int) or port < 0:
        raise ZnodeError(f"znode {path}: no PLAINTEXT endpoint (host {host!r}, port {port!r})")
    rack = value.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise ZnodeError(f"znode {path}: rack is {rack!r}, expected a string")
    try:
        timestamp = int(value.get("timestamp", 0))
    except (TypeError, ValueError):
        raise ZnodeError(f"znode {path}: timestamp {value.get('timestamp')!r} is not milliseconds") from None
    return BrokerRegistration(broker_id, host, port, rack, timestamp, tuple(listeners),
                              tuple((str(k).upper(), v.upper()) for k, v in protocol_map.items()))


def encode_cluster_id(cluster_id: str) -> bytes:
    # The version is a string here, unlike every other Kafka znode (``ClusterIdZNode``).
    return json.dumps({"version": "1", "id": cluster_id}, separators=(",", ":")).encode()


def decode_cluster_id(data: bytes | None) -> str:
    value = _json_map(CLUSTER_ID, data)
    cluster_id = value.get("id")
    if not isinstance(cluster_id, str) or not cluster_id:
        raise ZnodeError(f"znode {CLUSTER_ID}: id is {cluster_id!r}, expected a cluster id string")
    return cluster_id


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    # Version 1, as Kafka up to 3.3 writes it (3.4+ adds kraftControllerEpoch for the KRaft
    # migration, which readers ignore; they need only brokerid).
    return json.dumps({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)},
                      separators=(",", ":")).encode()


def decode_controller(data: bytes | None) -> int:
    """The broker id in ``/controller``."""
    return _int_field(CONTROLLER, _json_map(CONTROLLER, data), "brokerid")


def decode_controller_epoch(data: bytes | None) -> int:
    """``/controller_epoch`` holds plain decimal text (not JSON)."""
    try:
        epoch = int((data or b"").decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise ZnodeError(f"znode {CONTROLLER_EPOCH} holds {data!r}, expected a decimal epoch") from None
    if epoch < 0:
        raise ZnodeError(f"znode {CONTROLLER_EPOCH} holds {epoch}, expected an epoch >= 0")
    return epoch


# --- topics -------------------------------------------------------------------------------------

def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding (22 characters)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def decode_topic_id(path: str, text: object) -> uuid.UUID:
    if not isinstance(text, str) or len(text) != 22:
        raise ZnodeError(f"znode {path}: topic_id {text!r} is not a 22-character base64 id")
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
    except (ValueError, TypeError):
        raise ZnodeError(f"znode {path}: topic_id {text!r} is not base64") from None


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """``/brokers/topics/<t>``: the replicas of each partition; the first is the preferred leader.

    During a reassignment (KIP-455) a partition's replicas are the union of the original and the
    target set, ``adding`` holds the target replicas not yet in the original and ``removing`` the
    original replicas not in the target; both are empty (absent) otherwise. ``zk_version`` is the
    znode's version, every rewrite is conditional on it; -1 when not read from ZooKeeper."""

    name: str
    topic_id: uuid.UUID
    partitions: dict[int, tuple[int, ...]] = field(default_factory=dict)
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)
    zk_version: int = -1

    def reassigning(self, partition: int) -> bool:
        return bool(self.adding.get(partition) or self.removing.get(partition))

    def target(self, partition: int) -> tuple[int, ...]:
        """Where the partition is going: its replicas without those being removed."""
        removing = self.removing.get(partition, ())
        return tuple(r for r in self.partitions[partition] if r not in removing)

    def original(self, partition: int) -> tuple[int, ...]:
        """Where the partition was before its reassignment: its replicas without those being added."""
        adding = self.adding.get(partition, ())
        return tuple(r for r in self.partitions[partition] if r not in adding)


def encode_topic(assignment: TopicAssignment) -> bytes:
    # Version 3 (Kafka 2.8+): topic_id (KIP-516) and the KIP-455 reassignment maps.
    return json.dumps({"version": 3, "topic_id": encode_topic_id(assignment.topic_id),
                       "partitions": {str(p): list(r) for p, r in sorted(assignment.partitions.items())},
                       "adding_replicas": {str(p): list(r) for p, r in sorted(assignment.adding.items()) if r},
                       "removing_replicas": {str(p): list(r) for p, r in sorted(assignment.removing.items()) if r}},
                      separators=(",", ":")).encode()


def _broker_list(path: str, what: str, value: object) -> tuple[int, ...]:
    if not isinstance(value, list) or any(isinstance(b, bool) or not isinstance(b, int) or b < 0 for b in value):
        raise ZnodeError(f"znode {path}: {what} is {value!r}, expected a list of broker ids")
    if len(set(value)) != len(value):
        raise ZnodeError(f"znode {path}: {what} {value!r} names a broker twice")
    return tuple(value)


def decode_topic(path: str, data: bytes | None, zk_version: int = -1) -> TopicAssignment:
    """A topic znode of version 1-3. A topic without ``topic_id`` (written by Kafka before 2.8)
    gets a stable id derived from its name, so every node agrees on it."""
    value = _json_map(path, data)
    version = _int_field(path, value, "version")
    if not 1 <= version <= 3:
        raise ZnodeError(f"znode {path}: topic version {version} is not one Kafka writes (1..3)")
    name = path.rsplit("/", 1)[1]
    raw_id = value.get("topic_id")
    topic_id = decode_topic_id(path, raw_id) if raw_id is not None else uuid.uuid5(uuid.NAMESPACE_URL, name)
    parts = value.get("partitions")
    if not isinstance(parts, dict) or not parts:
        raise ZnodeError(f"znode {path}: partitions is {parts!r}, expected a non-empty map")
    partitions: dict[int, tuple[int, ...]] = {}
    for key, replicas in parts.items():
        try:
            index = int(key)
        except ValueError:
            raise ZnodeError(f"znode {path}: partition key {key!r} is not a number") from None
        partitions[index] = _broker_list(path, f"partition {key}", replicas)
        if not partitions[index]:
            raise ZnodeError(f"znode {path}: partition {key} has no replicas")
    if sorted(partitions) != list(range(len(partitions))):
        raise ZnodeError(f"znode {path}: partitions {sorted(partitions)} are not 0..{len(partitions) - 1}")
    moving = [_reassignment_map(path, what, value.get(what), partitions)
              for what in ("adding_replicas", "removing_replicas")]
    return TopicAssignment(name, topic_id, partitions, moving[0], moving[1], zk_version)


def _reassignment_map(path: str, what: str, raw: object,
                      partitions: dict[int, tuple[int, ...]]) -> dict[int, tuple[int, ...]]:
    """``adding_replicas`` / ``removing_replicas`` (v2+; absent or empty when nothing moves). Each
    must name replicas of the partition, or the controller could never finish the move."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ZnodeError(f"znode {path}: {what} is {raw!r}, expected a map")
    out: dict[int, tuple[int, ...]] = {}
    for key, replicas in raw.items():
        try:
            index = int(key)
        except ValueError:
            raise ZnodeError(f"znode {path}: {what} key {key!r} is not a number") from None
        brokers = _broker_list(path, f"{what} of partition {key}", replicas)
        if index not in partitions or not set(brokers) <= set(partitions[index]):
            raise ZnodeError(f"znode {path}: {what} of partition {key} {list(brokers)} are not among its replicas")
        if brokers:
            out[index] = brokers
    return out


@dataclass(frozen=True, slots=True)
class PartitionState:
    """``.../partitions/<p>/state``: leader, leader epoch, ISR and the controller epoch of the last
    writer. ``zk_version`` is the znode's version, the partition epoch every write is
    conditional on (``KafkaZkClient.updateLeaderAndIsr``,
    https://github.com/apache/kafka/blob/3.9.0/core/src/main/scala/kafka/zk/KafkaZkClient.scala); -1 when not read
    from ZooKeeper."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1
    #: The zxid of the znode's last write (its ``mzxid``), -1 when not read from ZooKeeper. zxids
    #: order every write of the ensemble, so a broker epoch (a registration's czxid) larger than
    #: it means that broker registered again after this state was written: what the state says
    #: of it is from its previous life (see plan.py's bounced replicas, KIP-380).
    mzxid: int = -1


#: ``leader`` when no replica may lead (all of the ISR is down, unclean election off).
NO_LEADER = -1


def encode_partition_state(state: PartitionState) -> bytes:
    return json.dumps({"version": 1, "leader": state.leader, "leader_epoch": state.leader_epoch,
                       "controller_epoch": state.controller_epoch, "isr": list(state.isr)},
                      separators=(",", ":")).encode()


def decode_partition_state(path: str, data: bytes | None, zk_version: int = -1, mzxid: int = -1) -> PartitionState:
    value = _json_map(path, data)
    version = _int_field(path, value, "version")
    if version != 1:
        raise ZnodeError(f"znode {path}: partition state version {version} is not 1")
    leader = _int_field(path, value, "leader")
    epoch = _int_field(path, value, "leader_epoch")
    controller_epoch = _int_field(path, value, "controller_epoch")
    if leader < -2 or epoch < -2:
        raise ZnodeError(f"znode {path}: leader {leader} / leader_epoch {epoch} out of range")
    isr = _broker_list(path, "isr", value.get("isr"))
    return PartitionState(leader, epoch, isr, controller_epoch, zk_version, mzxid)


def broker_config_path(entity: str) -> str:
    return f"{CONFIG_BROKERS}/{entity}"


def group_znode_name(group_id: str) -> str:
    """The znode name of a group id: percent-encoded, so '/' cannot make a path and '.' or '..'
    (names ZooKeeper refuses) cannot arise."""
    name = urllib.parse.quote(group_id, safe="")
    return name.replace(".", "%2E") if name in (".", "..") else name


def group_of_znode(name: str) -> str:
    return urllib.parse.unquote(name)


def group_config_path(group_id: str) -> str:
    return f"{CONFIG_GROUPS}/{group_znode_name(group_id)}"


def encode_config_change(entity_path: str) -> bytes:
    """A ``/config/changes`` notification (version 2: ``topics/<t>``, ``brokers/<id>``)."""
    return json.dumps({"version": 2, "entity_path": entity_path}, separators=(",", ":")).encode()


def encode_topic_config(configs: dict[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": dict(sorted(configs.items()))}, separators=(",", ":")).encode()


def decode_topic_config(path: str, data: bytes | None) -> dict[str, str]:
    value = _json_map(path, data)
    config = value.get("config")
    if not isinstance(config, dict) or any(not isinstance(k, str) or not isinstance(v, str)
                                           for k, v in config.items()):
        raise ZnodeError(f"znode {path}: config is {config!r}, expected a map of strings")
    return dict(config)
