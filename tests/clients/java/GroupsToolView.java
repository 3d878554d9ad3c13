import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;

/**
 * What the Java AdminClient reports of some consumer groups, for test_groups_tool_java.py to compare
 * with every cell of `groupcoord groups --describe`. Arguments: BOOTSTRAP GROUP...; output lines:
 *
 *   G <group> state=<state> type=<type> assignor=<name|-> coordinator=<host>:<port>:<id> members=<n>
 *   M <group> <memberId> <instanceId|-> <clientId> <host> <topic:p,..;topic:p|->
 *   O <group> <topic> <partition> <offset> <leaderEpoch|->      (listConsumerGroupOffsets)
 *   E <topic> <partition> <offset>                               (listOffsets latest)
 *   OK
 */
public class GroupsToolView {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        List<String> groups = new ArrayList<>();
        for (int i = 1; i < args.length; i++) groups.add(args[i]);
        try (Admin admin = Admin.create(p)) {
            Map<String, ConsumerGroupDescription> described = admin.describeConsumerGroups(groups).all().get();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (String g : groups) {
                ConsumerGroupDescription d = described.get(g);
                Node c = d.coordinator();
                String assignor = d.partitionAssignor() == null || d.partitionAssignor().isEmpty() ? "-" : d.partitionAssignor();
                System.out.println("G " + g + " state=" + d.state() + " type=" + d.type() + " assignor=" + assignor
                    + " coordinator=" + c.host() + ":" + c.port() + ":" + c.id() + " members=" + d.members().size());
                for (MemberDescription m : d.members()) {
                    Map<String, TreeSet<Integer>> byTopic = new java.util.TreeMap<>();
                    for (TopicPartition tp : m.assignment().topicPartitions()) {
                        byTopic.computeIfAbsent(tp.topic(), k -> new TreeSet<>()).add(tp.partition());
                        latest.put(tp, OffsetSpec.latest());
                    }
                    StringBuilder b = new StringBuilder();
                    for (Map.Entry<String, TreeSet<Integer>> e : byTopic.entrySet()) {
                        if (b.length() > 0) b.append(';');
                        b.append(e.getKey()).append(':');
                        StringBuilder ps = new StringBuilder();
                        for (Integer part : e.getValue()) {
                            if (ps.length() > 0) ps.append(',');
                            ps.append(part);
                        }
                        b.append(ps);
                    }
                    System.out.println("M " + g + " " + m.consumerId() + " " + m.groupInstanceId().orElse("-") + " "
                        + m.clientId() + " " + m.host() + " " + (b.length() == 0 ? "-" : b.toString()));
                }
                Map<TopicPartition, OffsetAndMetadata> offsets =
                    admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                    if (e.getValue() == null) continue;
                    latest.put(e.getKey(), OffsetSpec.latest());
                    System.out.println("O " + g + " " + e.getKey().topic() + " " + e.getKey().partition() + " "
                        + e.getValue().offset() + " " + e.getValue().leaderEpoch().map(Object::toString).orElse("-"));
                }
            }
            if (!latest.isEmpty()) {
                Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ends = admin.listOffsets(latest).all().get();
                for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e : ends.entrySet())
                    System.out.println("E " + e.getKey().topic() + " " + e.getKey().partition() + " " + e.getValue().offset());
            }
        }
        System.out.println("OK");
    }
}
