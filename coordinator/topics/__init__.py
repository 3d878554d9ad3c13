"""Hosted topics: the topic registry and configs, the partition logs (``log_manager``), and the
Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, InitProducerId and topic-admin handlers."""
