"""The testing toolkit for applications (docs/testing.md): a pytest plugin with a fresh groupcoord
per test or per session (in process on a thread of its own, or as a subprocess), a 3-node cluster
on a real ZooKeeper, and a handle that injects faults."""
