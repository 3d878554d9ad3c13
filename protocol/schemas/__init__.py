"""Kafka JSON message definitions for APIs kafka-python does not ship (loaded by protocol/consumer_group_messages.py)."""
