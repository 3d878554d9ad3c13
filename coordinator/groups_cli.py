"""``groupcoord groups``: kafka-consumer-groups.sh's actions and options (filled in by issue 34)."""
