import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Collections;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.ConsumerGroupDescribeRequestData;
import org.apache.kafka.common.message.ConsumerGroupDescribeResponseData;
import org.apache.kafka.common.message.ConsumerGroupHeartbeatRequestData;
import org.apache.kafka.common.message.ConsumerGroupHeartbeatResponseData;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;

/**
 * Serializes KIP-848 messages (version 0: what kafka-clients 3.9.1 knows) with Kafka's own
 * generated classes and prints one "name hex" line each, for tests/protocol/test_consumer_group_messages.py
 * to decode with our codec and to compare with what our codec encodes from the same values.
 */
public final class ConsumerGroupMessagesCheck {
    private static final Uuid TOPIC_ID = new Uuid(0x6ba7b8109dad11d1L, 0x80b400c04fd430c8L);

    private static void print(String name, Message message) {
        ByteBuffer buffer = MessageUtil.toByteBuffer(message, (short) 0);
        StringBuilder hex = new StringBuilder();
        for (byte b : MessageUtil.byteBufferToArray(buffer)) {
            hex.append(String.format("%02x", b));
        }
        System.out.println(name + " " + hex);
    }

    public static void main(String[] args) {
        print("heartbeat_request", new ConsumerGroupHeartbeatRequestData()
            .setGroupId("grp").setMemberId("member-1").setMemberEpoch(0).setInstanceId(null).setRackId("rack-a")
            .setRebalanceTimeoutMs(300000).setSubscribedTopicNames(Arrays.asList("t1", "t2"))
            .setServerAssignor("uniform")
            .setTopicPartitions(Collections.singletonList(new ConsumerGroupHeartbeatRequestData.TopicPartitions()
                .setTopicId(TOPIC_ID).setPartitions(Arrays.asList(0, 7)))));
        print("heartbeat_request_nulls", new ConsumerGroupHeartbeatRequestData()
            .setGroupId("grp").setMemberId("member-1").setMemberEpoch(5));
        print("heartbeat_response", new ConsumerGroupHeartbeatResponseData()
            .setThrottleTimeMs(0).setErrorCode((short) 0).setErrorMessage(null).setMemberId("member-1")
            .setMemberEpoch(1).setHeartbeatIntervalMs(5000)
            .setAssignment(new ConsumerGroupHeartbeatResponseData.Assignment().setTopicPartitions(
                Collections.singletonList(new ConsumerGroupHeartbeatResponseData.TopicPartitions()
                    .setTopicId(TOPIC_ID).setPartitions(Collections.singletonList(3))))));
        print("describe_request", new ConsumerGroupDescribeRequestData()
            .setGroupIds(Arrays.asList("g1", "g2")).setIncludeAuthorizedOperations(true));
        print("describe_response", new ConsumerGroupDescribeResponseData()
            .setThrottleTimeMs(0)
            .setGroups(Collections.singletonList(new ConsumerGroupDescribeResponseData.DescribedGroup()
                .setErrorCode((short) 0).setErrorMessage(null).setGroupId("g1").setGroupState("Stable")
                .setGroupEpoch(4).setAssignmentEpoch(4).setAssignorName("uniform")
                .setMembers(Collections.singletonList(new ConsumerGroupDescribeResponseData.Member()
                    .setMemberId("m1").setInstanceId(null).setRackId(null).setMemberEpoch(4).setClientId("c1")
                    .setClientHost("/10.0.0.1").setSubscribedTopicNames(Collections.singletonList("t1"))
                    .setSubscribedTopicRegex(null)
                    .setAssignment(assignment(0, 1)).setTargetAssignment(assignment(0))))
                .setAuthorizedOperations(Integer.MIN_VALUE))));
    }

    private static ConsumerGroupDescribeResponseData.Assignment assignment(Integer... partitions) {
        return new ConsumerGroupDescribeResponseData.Assignment().setTopicPartitions(Collections.singletonList(
            new ConsumerGroupDescribeResponseData.TopicPartitions()
                .setTopicId(TOPIC_ID).setTopicName("t1").setPartitions(Arrays.asList(partitions))));
    }
}
