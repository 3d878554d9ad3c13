import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.clients.admin.ListConsumerGroupsOptions;
import org.apache.kafka.common.ConsumerGroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Java Admin consumer-group APIs, one command per run (for test_groups_admin_java.py).
 *
 *   list                          G <groupId> <state>             (listConsumerGroups)
 *   list-state STATE              the same, only groups in STATE (e.g. Stable, Empty)
 *   describe GROUP                D state=.. assignor=.. coordinator=.. members=N
 *                                 M <memberId> <instanceId|-> <clientId> <host> <p,p,..>
 *   list-type TYPE                G <groupId> <state> <type>, only groups of TYPE (consumer, classic)
 *   describe-full GROUP           D type=.. state=.. assignor=.. members=N, then
 *                                 M <memberId> <instanceId|-> <p,p,..> target=<p,p,..|->
 *   describe-ops GROUP            OPS <op,op,..|null>  (includeAuthorizedOperations)
 *   offsets GROUP                 O <topic> <p> <offset> epoch=<e|-> metadata=<m>  (listConsumerGroupOffsets)
 *   alter GROUP TOPIC p:o[:epoch[:metadata]],..  (alterConsumerGroupOffsets)
 *   delete-offsets GROUP TOPIC p,p  (deleteConsumerGroupOffsets)
 *   remove-member GROUP INSTANCE  (removeMembersFromConsumerGroup)
 *   delete GROUP                  (deleteConsumerGroups)
 *
 * Every command ends with "OK" or "ERR <ExceptionClass>: <message>" (the cause of an
 * ExecutionException) and exits 0.
 */
public class GroupAdmin {
    static String parts(Collection<TopicPartition> tps) {
        TreeSet<Integer> s = new TreeSet<>();
        for (TopicPartition tp : tps) s.add(tp.partition());
        StringBuilder b = new StringBuilder();
        for (Integer p : s) {
            if (b.length() > 0) b.append(',');
            b.append(p);
        }
        return b.toString();
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        String cmd = args[1];
        try (Admin admin = Admin.create(p)) {
            try {
                run(admin, cmd, args);
                System.out.println("OK");
            } catch (ExecutionException e) {
                Throwable c = e.getCause();
                System.out.println("ERR " + c.getClass().getSimpleName() + ": " + c.getMessage());
            }
        }
    }

    static void run(Admin admin, String cmd, String[] a) throws Exception {
        switch (cmd) {
            case "list": {
                for (ConsumerGroupListing g : admin.listConsumerGroups().all().get(30, TimeUnit.SECONDS))
                    System.out.println("G " + g.groupId() + " " + g.state().map(Object::toString).orElse("?"));
                break;
            }
            case "list-state": {  // listConsumerGroups(inStates(STATE)): ListGroups v4+ StatesFilter
                ListConsumerGroupsOptions o = new ListConsumerGroupsOptions()
                        .inStates(Collections.singleton(ConsumerGroupState.parse(a[2])));
                for (ConsumerGroupListing g : admin.listConsumerGroups(o).all().get(30, TimeUnit.SECONDS))
                    System.out.println("G " + g.groupId() + " " + g.state().map(Object::toString).orElse("?"));
                break;
            }
            case "describe": {
                ConsumerGroupDescription d = admin.describeConsumerGroups(Collections.singletonList(a[2]))
                        .all().get(30, TimeUnit.SECONDS).get(a[2]);
                System.out.println("D state=" + d.state() + " assignor=" + d.partitionAssignor()
                        + " coordinator=" + (d.coordinator() == null ? "null" : d.coordinator().id())
                        + " members=" + d.members().size() + " simple=" + d.isSimpleConsumerGroup());
                for (MemberDescription m : d.members())
                    System.out.println("M " + m.consumerId() + " " + m.groupInstanceId().orElse("-") + " "
                            + m.clientId() + " " + m.host() + " " + parts(m.assignment().topicPartitions()));
                break;
            }
            case "list-type": {  // listConsumerGroups(withTypes(TYPE)): ListGroups v5 TypesFilter
                ListConsumerGroupsOptions o = new ListConsumerGroupsOptions()
                        .withTypes(Collections.singleton(GroupType.parse(a[2])));
                for (ConsumerGroupListing g : admin.listConsumerGroups(o).all().get(30, TimeUnit.SECONDS))
                    System.out.println("G " + g.groupId() + " " + g.state().map(Object::toString).orElse("?")
                            + " " + g.type().map(Object::toString).orElse("?"));
                break;
            }
            case "describe-full": {  // a consumer group: ConsumerGroupDescribe (the client falls back to DescribeGroups)
                ConsumerGroupDescription d = admin.describeConsumerGroups(Collections.singletonList(a[2]))
                        .all().get(30, TimeUnit.SECONDS).get(a[2]);
                System.out.println("D type=" + d.type() + " state=" + d.state() + " assignor=" + d.partitionAssignor()
                        + " members=" + d.members().size());
                for (MemberDescription m : d.members())
                    System.out.println("M " + m.consumerId() + " " + m.groupInstanceId().orElse("-") + " "
                            + parts(m.assignment().topicPartitions()) + " target="
                            + m.targetAssignment().map(t -> parts(t.topicPartitions())).orElse("-"));
                break;
            }
            case "describe-ops": {  // DescribeGroups with include_authorized_operations
                ConsumerGroupDescription d = admin.describeConsumerGroups(Collections.singletonList(a[2]),
                        new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true))
                        .all().get(30, TimeUnit.SECONDS).get(a[2]);
                Set<AclOperation> ops = d.authorizedOperations();
                TreeSet<String> names = new TreeSet<>();
                if (ops != null) for (AclOperation op : ops) names.add(op.toString());
                System.out.println("OPS " + (ops == null ? "null" : String.join(",", names)));
                break;
            }
            case "offsets": {
                Map<TopicPartition, OffsetAndMetadata> o = admin.listConsumerGroupOffsets(a[2])
                        .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : o.entrySet())
                    System.out.println("O " + e.getKey().topic() + " " + e.getKey().partition() + " "
                            + (e.getValue() == null ? "null" : e.getValue().offset() + " epoch="
                            + e.getValue().leaderEpoch().map(String::valueOf).orElse("-") + " metadata="
                            + e.getValue().metadata()));
                break;
            }
            case "alter": {
                Map<TopicPartition, OffsetAndMetadata> o = new HashMap<>();
                for (String po : a[4].split(",")) {
                    String[] x = po.split(":");
                    // optional third and fourth fields: leader epoch, metadata
                    Optional<Integer> epoch = x.length > 2 ? Optional.of(Integer.parseInt(x[2])) : Optional.empty();
                    String meta = x.length > 3 ? x[3] : "";
                    o.put(new TopicPartition(a[3], Integer.parseInt(x[0])),
                            new OffsetAndMetadata(Long.parseLong(x[1]), epoch, meta));
                }
                admin.alterConsumerGroupOffsets(a[2], o).all().get(30, TimeUnit.SECONDS);
                break;
            }
            case "delete-offsets": {
                Set<TopicPartition> tps = new HashSet<>();
                for (String s : a[4].split(",")) tps.add(new TopicPartition(a[3], Integer.parseInt(s)));
                admin.deleteConsumerGroupOffsets(a[2], tps).all().get(30, TimeUnit.SECONDS);
                break;
            }
            case "remove-member": {
                List<MemberToRemove> ms = new ArrayList<>();
                ms.add(new MemberToRemove(a[3]));
                admin.removeMembersFromConsumerGroup(a[2], new RemoveMembersFromConsumerGroupOptions(ms))
                        .all().get(30, TimeUnit.SECONDS);
                break;
            }
            case "delete": {
                admin.deleteConsumerGroups(Collections.singletonList(a[2])).all().get(30, TimeUnit.SECONDS);
                break;
            }
            default:
                throw new IllegalArgumentException(cmd);
        }
    }
}
