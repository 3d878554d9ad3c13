"""``groupcoord cluster up`` with a secured listener: ``{port}`` / ``{id}`` in a ``--set`` value are
each node's own, and a ``listeners`` setting is not overridden by the PLAINTEXT ``--listen`` the
node's port alone would mean (``--listen`` is applied after ``--set``). Only the command lines are
built here; tests/clients/test_cluster_security.py runs such a cluster."""

from __future__ import annotations

from pathlib import Path

from coordinator.cli import _parser
from coordinator.cluster.local_cluster import LocalCluster
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
