"""Server behaviours librdkafka's consumer-group tests (its repository's tests/, run with
TEST_CONSUMER_GROUP_PROTOCOL=consumer by bench/librdkafka_suite.sh; bench/RESULTS.md, section
"librdkafka's consumer-group tests, consumer protocol") found to differ from Kafka's, written as
the heartbeats that show them. These tests fail until the consumer group manager
(coordinator/group/consumer/manager.py) is changed; see each test's docstring for what Kafka does."""

from __future__ import annotations

from coordinator.group.config import GroupConfig
from protocol.consumer_group_records import ConsumerGroupRegularExpressionKey
from tests.coordinator.group.consumer.context import ConsumerGroupTestContext, assignment_of


def test_a_new_regex_is_resolved_after_the_heartbeat_that_brings_it() -> None:
    """librdkafka 0045_resubscribe_with_regex (0045-subscribe_update.c, "Subscribe to regex
    ^.*topic_regex.* and topic_a"): the heartbeat that brings a regex no member of the group uses
    yet is answered with the partitions of the literal topics only; the regex's topics follow in a
    later heartbeat. Kafka's GroupMetadataManager.maybeUpdateRegularExpressions compiles the new
    regex at once (an invalid one fails the heartbeat) but resolves it on the coordinator's
    executor; the resolution's result writes the ConsumerGroupRegularExpression record and bumps
    the group epoch, and the member's next heartbeat gets the regex's partitions. Resolving it
    inside the heartbeat, as the manager's ``_regex_records`` does, hands over both at once and the
    test's first await_assignment (topic_a alone) fails with 10 partitions instead of 2."""
    c = ConsumerGroupTestContext(GroupConfig(consumer_assignment_interval_ms=0))
    c.topics.create("foo", 2)
    c.topics.create("bar", 2)
    r = c.cg_heartbeat(topics=["bar"], regex="fo.*")
    assert r.error_code == 0
    assert assignment_of(r, c) == {"bar": [0, 1]}
    assert not any(isinstance(key, ConsumerGroupRegularExpressionKey) for key, _ in c.last_records)
    # The resolution runs off the heartbeat path and bumps the group epoch when it is written.
    epoch = c.cgroups["g"].group_epoch
    written = c.sleep(1_000)
    assert any(isinstance(key, ConsumerGroupRegularExpressionKey) for key, _ in written)
    assert c.cgroups["g"].group_epoch == epoch + 1
    r = c.cg_heartbeat(member_epoch=r.member_epoch)
    assert assignment_of(r, c) == {"bar": [0, 1], "foo": [0, 1]}
