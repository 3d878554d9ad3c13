"""Cluster mode on ZooKeeper (docs/architecture.md, "Cluster mode"): every node reads the cluster's
state from ZooKeeper and drives the partitions of ``topics/``; the group rules never know it is
there.

``znodes`` (Kafka's paths and znode JSON), ``zookeeper`` (this node's session, the cluster id, its
broker registration), ``zk_watcher`` → ``view`` (this node's picture of the cluster),
``controller_election`` (the election and the fenced writes), ``plan`` (the controller's pure
decisions) and ``controller`` (the loop that applies them, topic deletion included),
``replica_manager`` and ``replica_fetcher`` (this node's replicas), ``topic_store`` (topics
written to ZooKeeper), ``assignment`` (replica placement), ``liveness``, ``warming``,
``dynamic_configs``, ``producer_id_blocks``, and ``local_zookeeper`` / ``local_cluster``
(``groupcoord cluster up``).
"""
