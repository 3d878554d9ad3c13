"""ZooKeeper paths and znode values as Kafka's ZooKeeper mode writes them (``ZkData``).

An operator's ``zkCli.sh ls /brokers/ids`` or ``get /cluster/id`` must read as it would for a
Kafka cluster (reference/cluster_replication.md §1). Values are UTF-8 JSON maps (field order is
free) except where noted. Decoders never raise anything but :class:`ZnodeError`, whose message
names the path: a corrupt or foreign znode is a clear log line, never a crash.

Pure: no ZooKeeper client here, only paths and bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["ZnodeError", "BROKER_IDS", "CLUSTER_ID", "PERSISTENT_PATHS", "broker_path", "BrokerRegistration",
           "encode_broker", "decode_broker", "encode_cluster_id", "decode_cluster_id", "CONTROLLER",
           "CONTROLLER_EPOCH", "encode_controller", "decode_controller", "decode_controller_epoch"]

BROKER_IDS = "/brokers/ids"
CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"

#: The persistent parents a Kafka broker creates at start-up (``ZkData.PersistentZkPaths``), so
#: tools that list them find them on a cluster of ours too.
PERSISTENT_PATHS = ("/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/config/topics",
                    "/config/brokers", "/admin/delete_topics", "/brokers/seqid", "/isr_change_notification",
                    "/log_dir_event_notification")

#: The registration version Kafka 2.7+ writes (v5 adds ``features``; v4 the protocol map; v3 rack).
BROKER_VERSION = 5


class ZnodeError(ValueError):
    """A znode whose value is not what Kafka's ZooKeeper mode writes there."""


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

    @property
    def endpoint(self) -> str:
        return f"PLAINTEXT://{self.host}:{self.port}"


def encode_broker(reg: BrokerRegistration) -> bytes:
    value: dict[str, Any] = {
        "version": BROKER_VERSION,
        # host/port: the first PLAINTEXT endpoint (all we have), for pre-0.10 readers.
        "host": reg.host,
        "port": reg.port,
        "jmx_port": -1,
        "timestamp": str(reg.timestamp_ms),  # a string in Kafka's encoding
        "endpoints": [reg.endpoint],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "features": {},
    }
    if reg.rack:  # present only when set (v3+)
        value["rack"] = reg.rack
    return json.dumps(value, separators=(",", ":")).encode()


def _json_map(path: str, data: bytes | None) -> dict[str, Any]:
    if not data:
        raise ZnodeError(f"znode {path} is empty")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ZnodeError(f"znode {path} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ZnodeError(f"znode {path} holds {type(value).__name__} JSON, expected an object")
    return value


def _int_field(path: str, value: dict[str, Any], key: str) -> int:
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
    for endpoint in value.get("endpoints") or ():
        if isinstance(endpoint, str) and endpoint.startswith("PLAINTEXT://"):
            address = endpoint[len("PLAINTEXT://"):]
            host, _, port_text = address.rpartition(":")
            host = host.strip("[]")
            try:
                port = int(port_text)
            except ValueError:
                raise ZnodeError(f"znode {path}: endpoint {endpoint!r} has no port") from None
            break
    if not isinstance(host, str) or not host or isinstance(port, bool) or not isinstance(port, int) or port < 0:
        raise ZnodeError(f"znode {path}: no PLAINTEXT endpoint (host {host!r}, port {port!r})")
    rack = value.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise ZnodeError(f"znode {path}: rack is {rack!r}, expected a string")
    try:
        timestamp = int(value.get("timestamp", 0))
    except (TypeError, ValueError):
        raise ZnodeError(f"znode {path}: timestamp {value.get('timestamp')!r} is not milliseconds") from None
    return BrokerRegistration(broker_id, host, port, rack, timestamp)


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
