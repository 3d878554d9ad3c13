"""Fault injection for tests (docs/testing.md): faults a node applies to itself on request — a
forced rebalance, a kicked member, a coordinator move, failed or delayed requests, dropped
connections, paused heartbeats, an unavailable partition leader, a crash-restart. Off unless
``test.faults.enable=true``."""
