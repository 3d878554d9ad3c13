"""KIP-848 consumer groups in the group shard: the member, the group, reconciliation, the target
assignment and the manager that handles ConsumerGroupHeartbeat.

KIP-848: https://cwiki.apache.org/confluence/display/KAFKA/KIP-848%3A+The+Next+Generation+of+the+Consumer+Rebalance+Protocol
Kafka 4 docs, "Consumer Rebalance Protocol": https://kafka.apache.org/documentation/#consumer_rebalance_protocol
"""
