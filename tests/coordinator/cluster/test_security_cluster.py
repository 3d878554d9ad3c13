"""``groupcoord cluster up`` with a secured listener: ``{port}`` / ``{id}`` in a ``--set`` value are
each node's own, and a ``listeners`` setting is not overridden by the PLAINTEXT ``--listen`` the
node's port alone would mean (``--listen`` is applied after ``--set``). Only the command lines are
built here; tests/clients/test_cluster_security.py runs such a cluster."""

from __future__ import annotations

from pathlib import Path

from coordinator.cli import _parser
from coordinator.cluster.local_cluster import LocalCluster, listening_logged
from coordinator.config import Config, load_config


def _config_of(cluster: LocalCluster, broker_id: int) -> Config:
    argv = cluster.node_args(broker_id, cluster.ports[broker_id - 1])[3:]  # after "python -m coordinator"
    args = _parser().parse_args(argv)
    return load_config(None, args.overrides, args.data_dir, args.listen)


def test_each_node_gets_its_own_secured_listener(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, 3, 19092, settings=["listeners=SASL_SSL://127.0.0.1:{port}",
                                                        "inter.broker.listener.name=SASL_SSL",
                                                        "broker.rack=rack-{id}"])
    for broker_id in (1, 2, 3):
        config = _config_of(cluster, broker_id)
        assert config["listeners"] == f"SASL_SSL://127.0.0.1:{19091 + broker_id}"
        assert config["broker.id"] == broker_id
        assert config["broker.rack"] == f"rack-{broker_id}"


def test_without_a_listeners_setting_each_node_listens_on_its_port(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, 2, 19092)
    assert [_config_of(cluster, b)["listeners"] for b in (1, 2)] == ["127.0.0.1:19092", "127.0.0.1:19093"]


def test_a_node_is_ready_whatever_address_its_listener_binds() -> None:
    # `listeners=SASL_SSL://:{port}` binds every interface: the log says 0.0.0.0, not the
    # cluster's 127.0.0.1, and cluster up must not wait 60 s for a line that never comes.
    line = b"ts=x level=INFO logger=groupcoord msg=listening listen=%s:19092 advertised=h:19092 listeners=SASL_SSL://"
    for address in (b"127.0.0.1", b"0.0.0.0", b"::1"):
        assert listening_logged(b"earlier\n" + line % address + b"\n", 19092)
    assert not listening_logged(line % b"127.0.0.1", 9092)
    assert not listening_logged(line % b"127.0.0.1", 190921)
