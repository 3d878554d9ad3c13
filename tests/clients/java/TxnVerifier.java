// Reads a topic with the stock Apache Kafka 3.9.1 KafkaConsumer at a given isolation level (no
// group: every partition assigned, from the beginning) and prints what it sees.
//
//   TxnVerifier <bootstrap> <topic> <partitions> <expected> <timeout-ms> [read_committed|read_uncommitted]
//
// Polls until it has <expected> records and its position in every partition has reached the end
// offset (for read_committed the last stable offset: ListOffsets with isolation level 1), or until
// the timeout. Started before a copier, it is the concurrent reader of Kafka's transactions test.
// Prints "R <partition> <offset> <key-utf8> <value-utf8>" per record, "end.<p>=<offset>" and
// "verify.count=<n>". Keys and values are expected to be text without spaces.

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class TxnVerifier {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

    static String text(byte[] b) {
        return b == null ? "-" : new String(b, StandardCharsets.UTF_8);
    }

    public static void main(String[] args) {
        String bootstrap = args[0], topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        long expected = Long.parseLong(args[3]);
        long timeoutMs = Long.parseLong(args[4]);
        String isolation = args.length > 5 ? args[5] : "read_committed";
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "txn-verifier");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
        long count = 0;
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = null;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    count++;
                    OUT.println("R " + r.partition() + " " + r.offset() + " " + text(r.key()) + " " + text(r.value()));
                }
                if (count < expected) continue;
                ends = consumer.endOffsets(tps);
                boolean atEnd = true;
                for (TopicPartition tp : tps) atEnd &= consumer.position(tp) >= ends.get(tp);
                if (atEnd) break;
            }
            if (ends != null) for (TopicPartition tp : tps) OUT.println("end." + tp.partition() + "=" + ends.get(tp));
        }
        OUT.println("verify.count=" + count);
    }
}
