// Drives the stock Apache Kafka 3.9.1 KafkaProducer / KafkaConsumer against a groupcoord server.
// Line formats: see tests/clients/records_io.py.
//
//   produce <bootstrap> <topic> <records-file> <compression> [prop=value ...]
//       Sends every record of the file (explicit partition, timestamp, key, value, headers),
//       idempotent with acks=all by default; prints "A <index> <partition> <offset>" per ack,
//       "E <index> <exception>" per failure, then produce.acked=N and produce.failed=M.
//       The extra argument x.flush.each=true flushes after every record (one record a batch).
//   stream <bootstrap> <topic> <partitions> <count> [prop=value ...]
//       Sends records seq=0..count-1 to partition seq % partitions, key "k<seq>", value
//       "seq-<seq>", prints "A <seq> <partition> <offset>" per ack as it happens (flushed),
//       "E <seq> <exception>" per failure, then stream.acked=N and stream.failed=M. At most
//       1000 records are unacknowledged at any time, so the stream lasts as long as the server
//       takes to answer it (a crash test can count on being mid-stream at a given ack count).
//       stream.rate=<records/s> (not a producer property) paces the sends, without catching up,
//       so a test that acts at ack counts still finds the stream running when it is slow to wake.
//   consume <bootstrap> <topic> <partitions> <total> <timeout-ms> [start-offsets-csv [leader-epoch]]
//       No group: assign all partitions, seekToBeginning (or seek to the given offsets), poll
//       until <total> records arrived or the timeout; prints "R ..." lines and consume.count=N.

import java.io.BufferedReader;
import java.io.FileReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ProduceConsume {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

    static synchronized void out(String line) {
        OUT.println(line);
    }

    static String enc(byte[] b) {
        if (b == null) return "-";
        StringBuilder sb = new StringBuilder(1 + 2 * b.length).append('x');
        for (byte x : b) sb.append(String.format("%02x", x & 0xff));
        return sb.toString();
    }

    static byte[] dec(String s) {
        if (s.equals("-")) return null;
        if (!s.startsWith("x")) throw new IllegalArgumentException("bad field " + s);
        int n = (s.length() - 1) / 2;
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) b[i] = (byte) Integer.parseInt(s.substring(1 + 2 * i, 3 + 2 * i), 16);
        return b;
    }

    static List<Header> decHeaders(String s) {
        List<Header> out = new ArrayList<>();
        if (s.equals("h")) return out;
        for (String item : s.substring(1).split(",")) {
            int c = item.indexOf(':');
            String k = new String(dec(item.substring(0, c)), StandardCharsets.UTF_8);
            out.add(new RecordHeader(k, dec(item.substring(c + 1))));
        }
        return out;
    }

    static String encHeaders(Iterable<Header> headers) {
        StringBuilder sb = new StringBuilder("h");
        boolean first = true;
        for (Header h : headers) {
            if (!first) sb.append(',');
            first = false;
            sb.append(enc(h.key().getBytes(StandardCharsets.UTF_8))).append(':').append(enc(h.value()));
        }
        return sb.toString();
    }

    static Properties producerProps(String bootstrap, String[] args, int from) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "groupcoord-java-producer");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            p.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return p;
    }

    static String describe(Exception e) {
        return (e.getClass().getName() + ": " + e.getMessage()).replace('\n', ' ');
    }

    static int produce(String[] args) throws Exception {
        String bootstrap = args[1], topic = args[2], file = args[3], compression = args[4];
        Properties props = producerProps(bootstrap, args, 5);
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        // x.flush.each=true (not a producer setting): flush after every send, one record a batch
        boolean flushEach = "true".equals(props.remove("x.flush.each"));
        List<String[]> lines = new ArrayList<>();
        try (BufferedReader r = new BufferedReader(new FileReader(file, StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) if (!line.isEmpty()) lines.add(line.split(" "));
        }
        AtomicInteger acked = new AtomicInteger(), failed = new AtomicInteger();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < lines.size(); i++) {
                String[] f = lines.get(i);
                final int index = i;
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic, Integer.parseInt(f[0]),
                    Long.parseLong(f[1]), dec(f[2]), dec(f[3]), decHeaders(f[4]));
                producer.send(rec, (md, e) -> {
                    if (e != null) {
                        failed.incrementAndGet();
                        out("E " + index + " " + describe(e));
                    } else {
                        acked.incrementAndGet();
                        out("A " + index + " " + md.partition() + " " + md.offset());
                    }
                });
                if (flushEach) producer.flush();
            }
            producer.flush();
        }
        out("produce.acked=" + acked.get());
        out("produce.failed=" + failed.get());
        return failed.get() == 0 ? 0 : 1;
    }

    static int stream(String[] args) throws Exception {
        String bootstrap = args[1], topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        int count = Integer.parseInt(args[4]);
        Properties props = producerProps(bootstrap, args, 5);
        Object rateProp = props.remove("stream.rate");
        double rate = rateProp == null ? 0 : Double.parseDouble((String) rateProp);
        long nextNs = System.nanoTime();
        AtomicInteger acked = new AtomicInteger(), failed = new AtomicInteger();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            out("stream.started=true");
            for (int seq = 0; seq < count; seq++) {
                final int s = seq;
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic, seq % partitions,
                    ("k" + seq).getBytes(StandardCharsets.UTF_8), ("seq-" + seq).getBytes(StandardCharsets.UTF_8));
                producer.send(rec, (md, e) -> {
                    if (e != null) {
                        failed.incrementAndGet();
                        out("E " + s + " " + describe(e));
                    } else {
                        acked.incrementAndGet();
                        out("A " + s + " " + md.partition() + " " + md.offset());
                    }
                });
                // a stream, not one burst: at most 1000 records unacknowledged at a time
                while (seq + 1 - acked.get() - failed.get() > 1000) Thread.sleep(1);
                if (rate > 0) {
                    // at most 50 ms of credit: sleep overshoot is made up, time spent blocked on a
                    // server restart is not, so the stream resumes at its rate instead of bursting
                    nextNs = Math.max(nextNs, System.nanoTime() - 50_000_000L) + (long) (1e9 / rate);
                    long waitNs = nextNs - System.nanoTime();
                    if (waitNs > 0) Thread.sleep(waitNs / 1_000_000, (int) (waitNs % 1_000_000));
                }
            }
            producer.flush();
        }
        out("stream.acked=" + acked.get());
        out("stream.failed=" + failed.get());
        return failed.get() == 0 ? 0 : 1;
    }

    static int consume(String[] args) {
        String bootstrap = args[1], topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        long total = Long.parseLong(args[4]);
        long timeoutMs = Long.parseLong(args[5]);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "groupcoord-java-consumer");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        p.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "1000");
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
        long count = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(tps);
            if (args.length > 7) {
                // seek with a leader epoch: the consumer validates the position with
                // OffsetsForLeaderEpoch before fetching (KIP-320)
                String[] offs = args[6].split(",");
                int epoch = Integer.parseInt(args[7]);
                for (int i = 0; i < partitions; i++)
                    consumer.seek(tps.get(i), new OffsetAndMetadata(Long.parseLong(offs[i]), Optional.of(epoch), ""));
            } else if (args.length > 6) {
                String[] offs = args[6].split(",");
                for (int i = 0; i < partitions; i++) consumer.seek(tps.get(i), Long.parseLong(offs[i]));
            } else {
                consumer.seekToBeginning(tps);
            }
            out("consume.started=true");
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (count < total && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                StringBuilder sb = new StringBuilder();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    count++;
                    sb.append("R ").append(r.partition()).append(' ').append(r.offset()).append(' ')
                      .append(r.timestamp()).append(' ').append(r.timestampType().name.replace(" ", ""))
                      .append(' ').append(enc(r.key())).append(' ').append(enc(r.value())).append(' ')
                      .append(encHeaders(r.headers())).append('\n');
                }
                if (sb.length() > 0) {
                    synchronized (ProduceConsume.class) {
                        OUT.print(sb);
                        OUT.flush();
                    }
                }
            }
            StringBuilder pos = new StringBuilder();
            for (TopicPartition tp : tps) pos.append(tp.partition()).append(':').append(consumer.position(tp)).append(',');
            out("consume.positions=" + pos);
        }
        out("consume.count=" + count);
        return count >= total ? 0 : 1;
    }

    public static void main(String[] args) throws Exception {
        int rc;
        switch (args[0]) {
            case "produce": rc = produce(args); break;
            case "stream": rc = stream(args); break;
            case "consume": rc = consume(args); break;
            default: throw new IllegalArgumentException("unknown mode " + args[0]);
        }
        System.exit(rc);
    }
}
