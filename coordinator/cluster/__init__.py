"""Cluster mode (issue 13): ZooKeeper registration, and to come the controller, replication, the
ISR and leader epochs, serving every partition alike (the group rules never know it is there).

So far: ``znodes`` (Kafka's paths and znode JSON), ``zookeeper`` (this node's session, the
cluster id, its broker registration), ``controller_election`` (the election and the fenced
writes), ``assignment`` (replica placement, for the controller's topic creation, not yet wired),
``local_zookeeper`` and ``local_cluster`` (ZooKeeper from the machine's installation and
``groupcoord cluster up``).
"""
