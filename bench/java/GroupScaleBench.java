import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Scale a group of N consumers (threads of this JVM) by one while a producer writes at a steady
 * rate; prints one line of key=value results. Each member commits synchronously after every
 * non-empty poll (its position: everything it polled was processed), nothing on revocation.
 *
 * Args: bootstrap topic group strategy members partitions recordsPerSecond quietMs timeoutMs
 * strategy: range | cooperative-sticky (classic protocol) | consumer (KIP-848, server assignor).
 *
 * moved: partitions whose owner differs between the stable assignment before and after the join;
 * revoked: partitions taken from a member (revoked or lost) after the join, counted per event;
 * redelivered: records processed again after the join that some member had processed before;
 * unowned_partition_s: partition-seconds without an owner after the join (no consumption);
 * settle_ms: from the join until the last assignment change.
 */
public class GroupScaleBench {
    static final ConcurrentHashMap<Long, Integer> processed = new ConcurrentHashMap<>();
    static final ConcurrentHashMap<Integer, Integer> owner = new ConcurrentHashMap<>();
    static final ConcurrentHashMap<Integer, Long> unownedSince = new ConcurrentHashMap<>();
    static final AtomicLong unownedMs = new AtomicLong(), revoked = new AtomicLong(), redelivered = new AtomicLong();
    static final AtomicLong commitFailures = new AtomicLong(), processedAfter = new AtomicLong();
    static volatile long lastChange = System.currentTimeMillis();
    static volatile long scaleAt = Long.MAX_VALUE;
    static volatile boolean stop = false;

    static void taken(int member, Collection<TopicPartition> tps) {
        long now = System.currentTimeMillis();
        for (TopicPartition tp : tps) {
            if (owner.remove(tp.partition(), member)) unownedSince.put(tp.partition(), now);
            if (now >= scaleAt) revoked.incrementAndGet();
        }
        if (!tps.isEmpty()) lastChange = now;
    }

    static void given(int member, Collection<TopicPartition> tps) {
        long now = System.currentTimeMillis();
        for (TopicPartition tp : tps) {
            owner.put(tp.partition(), member);
            Long since = unownedSince.remove(tp.partition());
            if (since != null && now >= scaleAt) unownedMs.addAndGet(now - Math.max(since, scaleAt));
        }
        if (!tps.isEmpty()) lastChange = now;
    }

    static Thread member(int idx, String bootstrap, String topic, String group, String strategy) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "scale-" + idx);
        if (strategy.equals("consumer")) {
            p.put("group.protocol", "consumer");
        } else {
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, strategy.equals("range")
                    ? RangeAssignor.class.getName() : CooperativeStickyAssignor.class.getName());
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "45000");
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "3000");
        }
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "60000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        Thread t = new Thread(() -> {
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    public void onPartitionsRevoked(Collection<TopicPartition> tps) { taken(idx, tps); }
                    public void onPartitionsLost(Collection<TopicPartition> tps) { taken(idx, tps); }
                    public void onPartitionsAssigned(Collection<TopicPartition> tps) { given(idx, tps); }
                });
                while (!stop) {
                    ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(100));
                    if (recs.isEmpty()) continue;
                    long now = System.currentTimeMillis();
                    for (ConsumerRecord<byte[], byte[]> r : recs) {
                        int n = processed.merge(((long) r.partition() << 40) | r.offset(), 1, Integer::sum);
                        if (now >= scaleAt) {
                            processedAfter.incrementAndGet();
                            if (n > 1) redelivered.incrementAndGet();
                        }
                    }
                    try {
                        c.commitSync();
                    } catch (Exception e) {
                        commitFailures.incrementAndGet();
                    }
                }
            }
        }, "member-" + idx);
        t.setDaemon(true);
        t.start();
        return t;
    }

    /** Waits until every partition has an owner, ``members`` distinct owners, and no change for quietMs. */
    static boolean stable(int members, int partitions, long quietMs, long deadline) throws InterruptedException {
        while (System.currentTimeMillis() < deadline) {
            if (owner.size() == partitions && new HashSet<>(owner.values()).size() == members
                    && System.currentTimeMillis() - lastChange >= quietMs) return true;
            Thread.sleep(100);
        }
        return false;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], strategy = args[3];
        int members = Integer.parseInt(args[4]), partitions = Integer.parseInt(args[5]);
        int rate = Integer.parseInt(args[6]);
        long quietMs = Long.parseLong(args[7]), timeoutMs = Long.parseLong(args[8]);

        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        pp.put(ProducerConfig.ACKS_CONFIG, "1");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        AtomicLong produced = new AtomicLong();
        Thread producer = new Thread(() -> {
            try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(pp)) {
                byte[] value = new byte[16];
                long start = System.nanoTime();
                while (!stop) {
                    long due = (long) ((System.nanoTime() - start) / 1e9 * rate);
                    while (produced.get() < due) {
                        int part = (int) (produced.getAndIncrement() % partitions);
                        prod.send(new ProducerRecord<>(topic, part, null, value));
                    }
                    Thread.sleep(10);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "producer");
        producer.setDaemon(true);
        producer.start();

        long t0 = System.currentTimeMillis();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < members; i++) threads.add(member(i, bootstrap, topic, group, strategy));
        long deadline = t0 + timeoutMs;
        if (!stable(members, partitions, quietMs, deadline)) {
            System.out.println("error=initial group not stable owners=" + owner.size()
                    + " distinct=" + new HashSet<>(owner.values()).size());
            System.exit(2);
        }
        long formed = System.currentTimeMillis() - t0;
        Map<Integer, Integer> before = new HashMap<>(owner);
        scaleAt = System.currentTimeMillis();
        threads.add(member(members, bootstrap, topic, group, strategy));
        boolean ok = stable(members + 1, partitions, quietMs, scaleAt + timeoutMs);
        long settle = lastChange - scaleAt;
        Map<Integer, Integer> after = new HashMap<>(owner);
        long now = System.currentTimeMillis();
        for (long since : unownedSince.values()) unownedMs.addAndGet(now - Math.max(since, scaleAt));
        int moved = 0;
        for (int part = 0; part < partitions; part++)
            if (!Objects.equals(before.get(part), after.get(part))) moved++;
        int newMember = 0;
        for (int o : after.values()) if (o == members) newMember++;
        System.out.printf("strategy=%s members=%d partitions=%d stable=%s formed_ms=%d settle_ms=%d moved=%d "
                        + "new_member_got=%d revoked=%d redelivered=%d processed_after=%d unowned_partition_s=%.1f "
                        + "commit_failures=%d produced=%d%n",
                strategy, members, partitions, ok, formed, settle, moved, newMember, revoked.get(),
                redelivered.get(), processedAfter.get(), unownedMs.get() / 1000.0, commitFailures.get(),
                produced.get());
        stop = true;
        for (Thread t : threads) t.join(15000);
        System.exit(0);
    }
}
