import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** Sends N records of S bytes to one topic as fast as the producer allows; prints acked MB/s. */
public class ProducerBench {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        long count = Long.parseLong(args[2]);
        int size = Integer.parseInt(args[3]);
        String acks = args[4];
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, acks);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, acks.equals("all") ? "true" : "false");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, args.length > 5 ? args[5] : "262144");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.BUFFER_MEMORY_CONFIG, String.valueOf(256L << 20));
        p.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, String.valueOf(4 << 20));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        byte[] value = new byte[size];
        for (int i = 0; i < size; i++) value[i] = (byte) ('a' + i % 26);
        AtomicLong acked = new AtomicLong();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.partitionsFor(topic);
            long start = System.nanoTime();
            for (long i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, value), (m, e) -> {
                    if (e == null) acked.incrementAndGet(); else System.err.println("error: " + e);
                });
            }
            producer.flush();
            double secs = (System.nanoTime() - start) / 1e9;
            double mb = acked.get() * (double) size / 1e6;
            System.out.printf("records=%d seconds=%.3f mb_per_s=%.1f records_per_s=%.0f%n", acked.get(), secs, mb / secs, acked.get() / secs);
        }
    }
}
