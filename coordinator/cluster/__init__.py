"""Room for cluster mode (issue 13): ZooKeeper registration, the controller, replication, the ISR
and leader epochs, serving every partition alike (the group rules never know it is there).
Empty until then; its place in the import order is written in tests/test_layering.py."""
