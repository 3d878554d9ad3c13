import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** Reads one partition from the beginning up to its end offset; prints delivered MB/s. */
public class ConsumerBench {
    public static void main(String[] args) {
        String bootstrap = args[0], topic = args[1];
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, String.valueOf(8 << 20));
        p.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, String.valueOf(64 << 20));
        p.put(ConsumerConfig.CHECK_CRCS_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100000");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            long bytes = 0, records = 0, position = 0;
            long start = System.nanoTime();
            while (position < end) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    bytes += r.serializedValueSize() + Math.max(r.serializedKeySize(), 0);
                    records++;
                    position = r.offset() + 1;
                }
            }
            double secs = (System.nanoTime() - start) / 1e9;
            System.out.printf("records=%d seconds=%.3f mb_per_s=%.1f%n", records, secs, bytes / 1e6 / secs);
        }
    }
}
