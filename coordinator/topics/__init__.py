"""Hosted topics: the topic registry and configs, the partition logs (``partition_log``: one
partition; ``log_manager``: all of them), and the Produce, Fetch, ListOffsets,
OffsetForLeaderEpoch, InitProducerId and topic-admin handlers."""
