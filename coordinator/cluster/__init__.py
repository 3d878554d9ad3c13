"""Cluster mode (issue 13): ZooKeeper registration, and to come the controller, replication, the
ISR and leader epochs, serving every partition alike (the group rules never know it is there).

So far: ``znodes`` (Kafka's paths and znode JSON), ``zookeeper`` (this node's session, the
cluster id, its broker registration), ``local_zookeeper`` (a ZooKeeper server from the machine's
installation, for tests and local clusters).
"""
