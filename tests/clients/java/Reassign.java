import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

/**
 * What kafka-reassign-partitions.sh does, through the Java Admin client (kafka-clients 3.9.1), one
 * command per run (for test_reassign_java.py):
 *
 *   execute THROTTLE topic:p=b,b,.. ...   --execute [--throttle THROTTLE bytes/s; -1: none]:
 *                                         topic throttled-replica lists and broker rates set with
 *                                         incrementalAlterConfigs, then alterPartitionReassignments
 *   cancel topic:p ...                    --cancel: alterPartitionReassignments with empty Optional
 *   list                                  L <topic> <p> replicas=.. adding=.. removing=..
 *   verify topic:p ...                    --verify: IN_PROGRESS, or COMPLETE after clearing the
 *                                         throttles (topic and broker configs deleted)
 *   describe TOPIC                        P <p> leader=<id> replicas=.. isr=..
 *   broker-config ID KEY                  C <value> <source>
 *   topic-config TOPIC KEY                C <value> <source>
 *
 * Every command ends with "OK" or "ERR <ExceptionClass>: <message>" and exits 0.
 */
public class Reassign {
    static final String LEADER_RATE = "leader.replication.throttled.rate";
    static final String FOLLOWER_RATE = "follower.replication.throttled.rate";
    static final String LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second";
    static final String LEADER_REPLICAS = "leader.replication.throttled.replicas";
    static final String FOLLOWER_REPLICAS = "follower.replication.throttled.replicas";

    static String ids(Collection<Integer> xs) {
        StringBuilder b = new StringBuilder();
        for (Integer x : xs) {
            if (b.length() > 0) b.append(',');
            b.append(x);
        }
        return b.toString();
    }

    static TopicPartition tp(String spec) {
        int colon = spec.lastIndexOf(':');
        return new TopicPartition(spec.substring(0, colon), Integer.parseInt(spec.substring(colon + 1)));
    }

    static Map<TopicPartition, List<Integer>> moves(String[] args, int from) {
        Map<TopicPartition, List<Integer>> out = new HashMap<>();
        for (int i = from; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            List<Integer> target = new ArrayList<>();
            for (String b : kv[1].split(",")) target.add(Integer.parseInt(b));
            out.put(tp(kv[0]), target);
        }
        return out;
    }

    static Map<TopicPartition, List<Integer>> current(Admin admin, Collection<TopicPartition> tps) throws Exception {
        TreeSet<String> topics = new TreeSet<>();
        for (TopicPartition t : tps) topics.add(t.topic());
        Map<String, TopicDescription> described = admin.describeTopics(topics).allTopicNames().get();
        Map<TopicPartition, List<Integer>> out = new HashMap<>();
        for (TopicPartition t : tps) {
            for (TopicPartitionInfo info : described.get(t.topic()).partitions()) {
                if (info.partition() != t.partition()) continue;
                List<Integer> replicas = new ArrayList<>();
                for (Node n : info.replicas()) replicas.add(n.id());
                out.put(t, replicas);
            }
        }
        return out;
    }

    /** The tool's throttles: leader side on the existing replicas, follower side on the new ones. */
    static void throttle(Admin admin, long rate, Map<TopicPartition, List<Integer>> moves,
                         Map<TopicPartition, List<Integer>> existing) throws Exception {
        Map<String, List<String>> leaders = new TreeMap<>();
        Map<String, List<String>> followers = new TreeMap<>();
        TreeSet<Integer> brokers = new TreeSet<>();
        for (Map.Entry<TopicPartition, List<Integer>> e : moves.entrySet()) {
            TopicPartition t = e.getKey();
            List<Integer> old = existing.get(t);
            for (Integer b : old) leaders.computeIfAbsent(t.topic(), k -> new ArrayList<>()).add(t.partition() + ":" + b);
            for (Integer b : e.getValue()) {
                if (!old.contains(b)) followers.computeIfAbsent(t.topic(), k -> new ArrayList<>()).add(t.partition() + ":" + b);
            }
            brokers.addAll(old);
            brokers.addAll(e.getValue());
        }
        Map<ConfigResource, Collection<AlterConfigOp>> ops = new HashMap<>();
        TreeSet<String> topics = new TreeSet<>(leaders.keySet());
        topics.addAll(followers.keySet());
        for (String topic : topics) {
            List<AlterConfigOp> list = new ArrayList<>();
            list.add(new AlterConfigOp(new ConfigEntry(LEADER_REPLICAS,
                String.join(",", leaders.getOrDefault(topic, Collections.emptyList()))), AlterConfigOp.OpType.SET));
            list.add(new AlterConfigOp(new ConfigEntry(FOLLOWER_REPLICAS,
                String.join(",", followers.getOrDefault(topic, Collections.emptyList()))), AlterConfigOp.OpType.SET));
            ops.put(new ConfigResource(ConfigResource.Type.TOPIC, topic), list);
        }
        for (Integer b : brokers) {
            ops.put(new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(b)), Arrays.asList(
                new AlterConfigOp(new ConfigEntry(LEADER_RATE, String.valueOf(rate)), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry(FOLLOWER_RATE, String.valueOf(rate)), AlterConfigOp.OpType.SET)));
        }
        admin.incrementalAlterConfigs(ops).all().get();
    }

    static void clearThrottles(Admin admin, Collection<TopicPartition> tps) throws Exception {
        Map<ConfigResource, Collection<AlterConfigOp>> ops = new HashMap<>();
        TreeSet<String> topics = new TreeSet<>();
        for (TopicPartition t : tps) topics.add(t.topic());
        for (String topic : topics) {
            ops.put(new ConfigResource(ConfigResource.Type.TOPIC, topic), Arrays.asList(
                new AlterConfigOp(new ConfigEntry(LEADER_REPLICAS, ""), AlterConfigOp.OpType.DELETE),
                new AlterConfigOp(new ConfigEntry(FOLLOWER_REPLICAS, ""), AlterConfigOp.OpType.DELETE)));
        }
        for (Node n : admin.describeCluster().nodes().get()) {
            ops.put(new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(n.id())), Arrays.asList(
                new AlterConfigOp(new ConfigEntry(LEADER_RATE, ""), AlterConfigOp.OpType.DELETE),
                new AlterConfigOp(new ConfigEntry(FOLLOWER_RATE, ""), AlterConfigOp.OpType.DELETE),
                new AlterConfigOp(new ConfigEntry(LOG_DIRS_RATE, ""), AlterConfigOp.OpType.DELETE)));
        }
        admin.incrementalAlterConfigs(ops).all().get();
    }

    static void printResults(Map<TopicPartition, KafkaFuture<Void>> results) {
        for (Map.Entry<TopicPartition, KafkaFuture<Void>> e : new TreeMap<String, Map.Entry<TopicPartition, KafkaFuture<Void>>>() {{
                for (Map.Entry<TopicPartition, KafkaFuture<Void>> x : results.entrySet()) put(x.getKey().toString(), x);
            }}.values()) {
            String outcome;
            try {
                e.getValue().get();
                outcome = "NONE";
            } catch (ExecutionException ex) {
                outcome = ex.getCause().getClass().getSimpleName();
            } catch (InterruptedException ex) {
                outcome = "Interrupted";
            }
            System.out.println("R " + e.getKey().topic() + " " + e.getKey().partition() + " " + outcome);
        }
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "40000");
        String cmd = args[1];
        try (Admin admin = Admin.create(p)) {
            switch (cmd) {
                case "execute": {
                    long rate = Long.parseLong(args[2]);
                    Map<TopicPartition, List<Integer>> moves = moves(args, 3);
                    if (rate > 0) throttle(admin, rate, moves, current(admin, moves.keySet()));
                    Map<TopicPartition, Optional<NewPartitionReassignment>> req = new HashMap<>();
                    for (Map.Entry<TopicPartition, List<Integer>> e : moves.entrySet()) {
                        req.put(e.getKey(), Optional.of(new NewPartitionReassignment(e.getValue())));
                    }
                    printResults(admin.alterPartitionReassignments(req).values());
                    break;
                }
                case "cancel": {
                    Map<TopicPartition, Optional<NewPartitionReassignment>> req = new HashMap<>();
                    for (int i = 2; i < args.length; i++) req.put(tp(args[i]), Optional.empty());
                    printResults(admin.alterPartitionReassignments(req).values());
                    break;
                }
                case "list": {
                    Map<TopicPartition, PartitionReassignment> all = admin.listPartitionReassignments().reassignments().get();
                    for (Map.Entry<TopicPartition, PartitionReassignment> e : all.entrySet()) {
                        PartitionReassignment r = e.getValue();
                        System.out.println("L " + e.getKey().topic() + " " + e.getKey().partition() + " replicas="
                            + ids(r.replicas()) + " adding=" + ids(r.addingReplicas()) + " removing=" + ids(r.removingReplicas()));
                    }
                    break;
                }
                case "verify": {
                    List<TopicPartition> tps = new ArrayList<>();
                    for (int i = 2; i < args.length; i++) tps.add(tp(args[i]));
                    Map<TopicPartition, PartitionReassignment> all = admin.listPartitionReassignments().reassignments().get();
                    boolean moving = false;
                    for (TopicPartition t : tps) moving |= all.containsKey(t);
                    if (moving) {
                        System.out.println("IN_PROGRESS");
                    } else {
                        clearThrottles(admin, tps);
                        System.out.println("COMPLETE");
                    }
                    break;
                }
                case "describe": {
                    TopicDescription d = admin.describeTopics(Collections.singleton(args[2])).allTopicNames().get().get(args[2]);
                    for (TopicPartitionInfo info : d.partitions()) {
                        List<Integer> replicas = new ArrayList<>();
                        for (Node n : info.replicas()) replicas.add(n.id());
                        List<Integer> isr = new ArrayList<>();
                        for (Node n : info.isr()) isr.add(n.id());
                        System.out.println("P " + info.partition() + " leader=" + (info.leader() == null ? -1 : info.leader().id())
                            + " replicas=" + ids(replicas) + " isr=" + ids(isr));
                    }
                    break;
                }
                case "broker-config":
                case "topic-config": {
                    ConfigResource res = new ConfigResource(cmd.equals("broker-config") ? ConfigResource.Type.BROKER
                        : ConfigResource.Type.TOPIC, args[2]);
                    Config c = admin.describeConfigs(Collections.singleton(res)).all().get().get(res);
                    ConfigEntry e = c.get(args[3]);
                    System.out.println("C " + (e == null ? "null" : e.value() + " " + e.source()));
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown command " + cmd);
            }
            System.out.println("OK");
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            System.out.println("ERR " + c.getClass().getSimpleName() + ": " + c.getMessage());
        }
    }
}
