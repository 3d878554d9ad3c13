import java.io.File;
import java.time.Duration;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One consumer-group member for the group tests (line protocol shared with
 * tests/clients/group_member.py and js/group_consumer.js):
 *
 *   A p,p,...   the member's whole assignment after a rebalance callback (empty: "A ")
 *   REV p,...   partitions revoked (only when non-empty)
 *   LOST p,...  partitions lost
 *   R p o       a consumed record
 *   C p o       a committed offset (the next offset to read), after commitSync returned
 *   CF msg      a commit failed
 *   CLOSED      after close()
 *
 * Args: bootstrap topic group strategy instanceId|- sessionTimeoutMs stopFile pollDelayMs maxPollRecords [seek-committed]
 * strategy: range | roundrobin | cooperative-sticky | sticky (the classic protocol), or consumer |
 * consumer-uniform | consumer-range (group.protocol=consumer, KIP-848: sessionTimeoutMs is unused,
 * the server's group.consumer.session.timeout.ms applies)
 * Runs until stopFile exists (then close(): LeaveGroup for a dynamic member) or until killed.
 *
 * A topic starting with "^" is a regular expression: subscribe(Pattern). kafka-clients 3.9.1 has
 * no SubscriptionPattern (KIP-848's broker-side regex, 4.0+): with group.protocol=consumer too it
 * matches the pattern against its own metadata (refreshed every 2 s here, metadata.max.age.ms)
 * and sends the topic names. Lines then name the topic: "TA t:p,t:p", "TR t p o", "TC t p o".
 */
public class GroupConsumer {
    static synchronized void out(String s) {
        System.out.println(s);
        System.out.flush();
    }

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

    static boolean byPattern = false;

    static String topicParts(Collection<TopicPartition> tps) {
        TreeSet<String> s = new TreeSet<>();
        for (TopicPartition tp : tps) s.add(tp.topic() + ":" + tp.partition());
        return String.join(",", s);
    }

    static boolean commitAndPrint(KafkaConsumer<byte[], byte[]> c, Map<TopicPartition, OffsetAndMetadata> commit) {
        try {
            c.commitSync(commit);
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : commit.entrySet())
                out((byPattern ? "TC " + e.getKey().topic() + " " : "C ") + e.getKey().partition() + " "
                        + e.getValue().offset());
            return true;
        } catch (Exception e) {
            out("CF " + e.getClass().getSimpleName() + ": " + e.getMessage());
            return false;
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], strategy = args[3], instance = args[4];
        int session = Integer.parseInt(args[5]);
        File stop = new File(args[6]);
        long delay = Long.parseLong(args[7]);
        String maxPoll = args[8];
        // Optional 10th argument "seek-committed" (consumer protocol only): onPartitionsAssigned
        // seeks the newly assigned partitions to their committed offsets. kafka-clients 3.9.1's
        // consumer-protocol consumer (AsyncKafkaConsumer) updates fetch positions partly on the
        // application thread and partly on the background thread; a partition assigned while a
        // committed-offsets fetch is in flight can be reset with auto.offset.reset instead of
        // starting at its committed offset (fixed in Kafka 4.0 by KAFKA-17066,
        // https://issues.apache.org/jira/browse/KAFKA-17066). The seek is the application-side
        // workaround; without it such a member re-consumes from the earliest offset and commits
        // offsets lower than the group's.
        boolean seekCommitted = args.length > 9 && args[9].equals("seek-committed");

        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        if (!instance.equals("-")) p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);
        if (strategy.startsWith("consumer")) {
            // KIP-848: the server assigns and sets session timeout and heartbeat interval; the
            // client refuses the classic settings with this protocol. "consumer-<name>" picks
            // the server assignor (group.remote.assignor).
            p.put("group.protocol", "consumer");
            if (strategy.startsWith("consumer-")) p.put("group.remote.assignor", strategy.substring(9));
        } else {
            String assignor;
            switch (strategy) {
                case "range": assignor = "org.apache.kafka.clients.consumer.RangeAssignor"; break;
                case "roundrobin": assignor = "org.apache.kafka.clients.consumer.RoundRobinAssignor"; break;
                case "cooperative-sticky": assignor = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"; break;
                case "sticky": assignor = "org.apache.kafka.clients.consumer.StickyAssignor"; break;
                default: throw new IllegalArgumentException(strategy);
            }
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, String.valueOf(session));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "30000");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, maxPoll);
        p.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(ConsumerConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        byPattern = topic.startsWith("^");
        if (byPattern) p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "2000");

        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p);
        // Processed but not yet committed (a commit can fail while a rebalance is in progress):
        // committed again with the next batch, and before the partitions are revoked.
        Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
                for (TopicPartition tp : tps) if (pending.containsKey(tp)) commit.put(tp, pending.remove(tp));
                if (!commit.isEmpty()) commitAndPrint(c, commit);
                if (!tps.isEmpty()) out(byPattern ? "TREV " + topicParts(tps) : "REV " + parts(tps));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                if (seekCommitted && !tps.isEmpty()) {
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : c.committed(new HashSet<>(tps)).entrySet())
                        if (e.getValue() != null) c.seek(e.getKey(), e.getValue().offset());
                }
                out(byPattern ? "TA " + topicParts(c.assignment()) : "A " + parts(c.assignment()));
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> tps) {
                if (!tps.isEmpty()) out(byPattern ? "TLOST " + topicParts(tps) : "LOST " + parts(tps));
            }
        };
        if (byPattern) c.subscribe(Pattern.compile(topic), listener);
        else c.subscribe(Collections.singletonList(topic), listener);
        out("STARTED");
        try {
            while (!stop.exists()) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) continue;
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    out((byPattern ? "TR " + r.topic() + " " : "R ") + r.partition() + " " + r.offset());
                    pending.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                pending.keySet().retainAll(c.assignment());
                if (commitAndPrint(c, pending)) pending.clear();
                if (delay > 0) Thread.sleep(delay);
            }
        } finally {
            c.close(Duration.ofSeconds(10));
            out("CLOSED");
        }
    }
}
