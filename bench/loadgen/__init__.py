"""A protocol-level load generator for Kafka group coordinators (issue 6).

It speaks the Kafka wire protocol directly, so any Kafka-compatible server can be measured with
it: OffsetCommit/OffsetFetch storms, heartbeats of a stable group, a rebalance of M members, all
with requests encoded once and pipelined over many connections from several processes.

Modules: ``wire`` (frames, decoding, ApiVersions negotiation), ``messages`` (request builders and
response checks), ``stats`` (latency histogram), ``cpu`` (server CPU from ``/proc``), ``storm``
(one loader process: pipelined or paced connections), ``driver`` (several processes, merged
results, server CPU over the measured window), ``groups`` (joins, syncs, the rebalance timer).
"""
