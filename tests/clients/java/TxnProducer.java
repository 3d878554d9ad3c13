// A stream of transactions from the stock Apache Kafka 3.9.1 transactional KafkaProducer, some
// committed and some aborted, that survives the server going away: a crash test kills the server
// in the middle and then checks each transaction's fate against what this program was told.
//
//   TxnProducer <bootstrap> <topic> <partitions> <transactions> <records-per-txn> <transactional-id>
//               [prop=value ...]
//
// Transaction n (from 0) sends records "t<n>-<i>" (key "t<n>"), record i to partition
// i % partitions, and is aborted when n % 4 == 3, else committed. Prints, flushed:
//   "COMMITTED <n>"  commitTransaction() returned: every record of n must be readable, once;
//   "ABORTED <n>"    abortTransaction() returned: no record of n may ever be readable;
//   "FAILED <n> <exception>"  the outcome is unknown to the client (the server went away): n must
//                    be all there or all absent. The producer is closed and a new one with the same
//                    transactional id takes over (its initTransactions() settles n), retrying
//                    until the server answers.
// and "producer.done committed=<n> aborted=<n> failed=<n>" at the end.

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TxnProducer {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

    static String describe(Throwable e) {
        return (e.getClass().getName() + ": " + e.getMessage()).replace('\n', ' ');
    }

    static KafkaProducer<String, String> open(Properties props) throws InterruptedException {
        while (true) {
            KafkaProducer<String, String> producer = new KafkaProducer<>(props);
            try {
                producer.initTransactions();
                return producer;
            } catch (Exception e) {
                OUT.println("init.retry " + describe(e));
                producer.close(Duration.ZERO);
                Thread.sleep(200);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        int transactions = Integer.parseInt(args[3]);
        int perTxn = Integer.parseInt(args[4]);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "txn-producer");
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[5]);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "2");
        // Short limits, so a call made while the server is down fails in seconds, not minutes.
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "4000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "8000");
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "20000");
        props.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "300");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        for (int i = 6; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        int committed = 0, aborted = 0, failed = 0;
        KafkaProducer<String, String> producer = open(props);
        OUT.println("producer.ready");
        for (int n = 0; n < transactions; n++) {
            boolean abort = n % 4 == 3;
            try {
                producer.beginTransaction();
                for (int i = 0; i < perTxn; i++) {
                    producer.send(new ProducerRecord<>(topic, i % partitions, "t" + n, "t" + n + "-" + i));
                }
                if (abort) {
                    producer.abortTransaction();
                    aborted++;
                    OUT.println("ABORTED " + n);
                } else {
                    producer.commitTransaction();
                    committed++;
                    OUT.println("COMMITTED " + n);
                }
            } catch (Exception e) {
                failed++;
                OUT.println("FAILED " + n + " " + describe(e));
                producer.close(Duration.ZERO);
                producer = open(props);
            }
        }
        producer.close(Duration.ofSeconds(5));
        OUT.println("producer.done committed=" + committed + " aborted=" + aborted + " failed=" + failed);
    }
}
