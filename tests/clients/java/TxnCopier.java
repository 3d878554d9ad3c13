// A consume-transform-produce copier with the stock Apache Kafka 3.9.1 clients, in the manner of
// Kafka's own TransactionalMessageCopier (tools/src/main/java/org/apache/kafka/tools/
// TransactionalMessageCopier.java): a read_committed consumer reads the input topic, a
// transactional producer writes every record to the same partition of the output topic and
// commits the consumer's offsets inside the same transaction with
// sendOffsetsToTransaction(offsets, consumer.groupMetadata()) (KIP-447).
//
//   TxnCopier <bootstrap> <input> <output> <group> <transactional-id> <batch> <abort-probability>
//             <assign|subscribe> [seed] [prop=value ...]
//
// One transaction per poll of at most <batch> records (max.poll.records). With probability
// <abort-probability> a transaction is flushed and aborted instead of committed; the consumer seeks back
// to the group's committed offsets, so the batch is copied again by a later transaction.
// "assign" assigns every input partition (the group holds offsets only, generation -1);
// "subscribe" joins the group, so TxnOffsetCommit carries the member id and generation.
// Stops once the group's committed offset of every input partition reaches its end offset at start
// (several copiers in one group, each with its own transactional id, stop together).
// Consumer properties are given as consumer.<name>=value, producer ones as producer.<name>=value;
// copier.pause.ms=<n> sleeps that long after each transaction (a slower copier, so that a second
// one can join its group while it works).
//
// Prints, flushed as it goes: "copier.ready" after initTransactions, "C <n> <records>" after each
// commit, "A <n> <records>" after each abort, "copier.done copied=<records> commits=<n>
// aborts=<n>" at the end; "copier.fatal=<exception>" (exit 3) when the producer is fenced.

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TxnCopier {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

    static void out(String line) {
        OUT.println(line);
    }

    static String describe(Throwable e) {
        return (e.getClass().getName() + ": " + e.getMessage()).replace('\n', ' ');
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], input = args[1], output = args[2], group = args[3], txnId = args[4];
        int batch = Integer.parseInt(args[5]);
        double abortProbability = Double.parseDouble(args[6]);
        boolean subscribe = args[7].equals("subscribe");
        int from = 8;
        long seed = System.nanoTime();
        if (args.length > 8 && !args[8].contains("=")) {
            seed = Long.parseLong(args[8]);
            from = 9;
        }
        Random random = new Random(seed);
        long pauseMs = 0;

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "txn-copier-consumer");
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(batch));
        cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        cp.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());

        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.CLIENT_ID_CONFIG, "txn-copier-producer");
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "2");
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "20000");
        pp.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            String key = args[i].substring(0, eq), value = args[i].substring(eq + 1);
            if (key.equals("copier.pause.ms")) pauseMs = Long.parseLong(value);
            else if (key.startsWith("consumer.")) cp.put(key.substring(9), value);
            else if (key.startsWith("producer.")) pp.put(key.substring(9), value);
            else throw new IllegalArgumentException("property without consumer./producer. prefix: " + key);
        }

        long copied = 0, commits = 0, aborts = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp);
             KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            // First fence any previous incarnation with this transactional id: its open transaction
            // is aborted (with its pending offsets) before this one reads the committed offsets.
            producer.initTransactions();
            out("copier.ready");
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(input)) tps.add(new TopicPartition(input, info.partition()));
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps);
            if (subscribe) consumer.subscribe(List.of(input));
            else consumer.assign(tps);

            while (true) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    if (done(consumer, ends)) break;
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (TopicPartition tp : records.partitions()) {
                    List<ConsumerRecord<byte[], byte[]>> part = records.records(tp);
                    offsets.put(tp, new OffsetAndMetadata(part.get(part.size() - 1).offset() + 1));
                }
                boolean abort = random.nextDouble() < abortProbability;
                try {
                    producer.beginTransaction();
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        producer.send(new ProducerRecord<>(output, r.partition(), r.timestamp(), r.key(), r.value(),
                                                           r.headers()));
                    }
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    if (abort) {
                        // Flushed first, so the aborted records are in the log (read_uncommitted
                        // consumers see them; read_committed ones must skip them).
                        producer.flush();
                        producer.abortTransaction();
                        aborts++;
                        out("A " + aborts + " " + records.count());
                        rewind(consumer);
                    } else {
                        producer.commitTransaction();
                        commits++;
                        copied += records.count();
                        out("C " + commits + " " + records.count());
                    }
                } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException e) {
                    out("copier.fatal=" + describe(e));
                    System.exit(3);
                } catch (KafkaException e) {
                    // Abortable (e.g. CommitFailedException after a rebalance): abort, go back to
                    // the committed offsets and carry on, as Kafka's copier does.
                    out("copier.abortable=" + describe(e));
                    producer.abortTransaction();
                    aborts++;
                    rewind(consumer);
                }
                if (pauseMs > 0) Thread.sleep(pauseMs);
            }
        }
        out("copier.done copied=" + copied + " commits=" + commits + " aborts=" + aborts);
    }

    /** The group's committed offset of every input partition at its end: this copier's work, or in
     *  a group of copiers everyone's (each member only sees its own share by its positions). */
    static boolean done(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> ends) {
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(ends.keySet());
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            OffsetAndMetadata om = committed.get(e.getKey());
            if ((om == null ? 0 : om.offset()) < e.getValue()) return false;
        }
        return true;
    }

    /** Seek every assigned partition back to its committed offset (the start when none). */
    static void rewind(KafkaConsumer<byte[], byte[]> consumer) {
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(consumer.assignment());
        for (TopicPartition tp : consumer.assignment()) {
            OffsetAndMetadata om = committed.get(tp);
            if (om == null) consumer.seekToBeginning(List.of(tp));
            else consumer.seek(tp, om.offset());
        }
    }
}
