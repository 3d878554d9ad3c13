"""``groupcoord groups``: kafka-consumer-groups.sh over the wire, against any Kafka-compatible bootstrap."""
