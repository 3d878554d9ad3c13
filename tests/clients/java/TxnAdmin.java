import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.common.TopicPartition;

/**
 * The KIP-664 admin APIs of kafka-clients 3.9.1 (for test_txn_admin_java.py), one command per run.
 *
 *   inspect TXN_ID TOPIC PARTITIONS
 *       L <filter> <transactionalId> <producerId> <state>   listTransactions, per filter:
 *           all, ongoing (filterStates ONGOING), complete-commit (filterStates COMPLETE_COMMIT),
 *           pid (filterProducerIds: the id's producer), other-pid (filterProducerIds: a pid no one
 *           has), dur-short (filterOnDuration 1 ms, ListTransactions v1), dur-long (1 hour)
 *       D state=.. pid=.. epoch=.. timeout=.. start=.. coordinator=.. partitions=t-0,t-1
 *       P <partition> <pid> <epoch> <lastSequence> <lastTimestamp> <coordinatorEpoch|-> <txnStartOffset|->
 *       H candidates=N ids=pid:id,.. hanging=<topic-partition,..|->   find-hanging as
 *           kafka-transactions.sh does it (TransactionsCommand.FindHangingTransactionsCommand),
 *           with a maximum transaction timeout of 0 so that every open transaction is a candidate
 *       U <exception class>          describeTransactions of an id nobody uses
 *   abort TOPIC PARTITION
 *       F <exception|none> open=<txnStartOffset|->   abortTransaction with the coordinator epoch
 *           DescribeProducers shows minus one (a fenced coordinator), and the transaction afterwards
 *       A pid=.. epoch=.. coordinatorEpoch=..   the open transaction DescribeProducers shows there,
 *           aborted with abortTransaction (WriteTxnMarkers ABORT from the admin client)
 *       P ...                        DescribeProducers of the partition afterwards
 *   describe TXN_ID                  D ... as above, then L complete-abort ... (filterStates COMPLETE_ABORT)
 *
 * Each run ends with OK; a failure prints ERR <exception> and exits 1.
 */
public final class TxnAdmin {
    private TxnAdmin() {}

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        try (Admin admin = Admin.create(props)) {
            switch (args[1]) {
                case "inspect":
                    inspect(admin, args[2], args[3], Integer.parseInt(args[4]));
                    break;
                case "abort":
                    abort(admin, new TopicPartition(args[2], Integer.parseInt(args[3])));
                    break;
                case "describe":
                    describe(admin, args[2]);
                    list(admin, "complete-abort",
                        new ListTransactionsOptions().filterStates(Collections.singleton(TransactionState.COMPLETE_ABORT)));
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + args[1]);
            }
        } catch (ExecutionException e) {
            System.out.println("ERR " + e.getCause());
            System.out.flush();
            System.exit(1);
        }
        System.out.println("OK");
        System.out.flush();
    }

    private static void list(Admin admin, String name, ListTransactionsOptions options) throws Exception {
        for (TransactionListing l : admin.listTransactions(options).all().get(20, TimeUnit.SECONDS)) {
            System.out.println("L " + name + " " + l.transactionalId() + " " + l.producerId() + " " + l.state());
        }
    }

    private static TransactionDescription describe(Admin admin, String txnId) throws Exception {
        TransactionDescription d = admin.describeTransactions(Collections.singleton(txnId))
            .description(txnId).get(20, TimeUnit.SECONDS);
        Set<String> parts = new TreeSet<>();
        for (TopicPartition tp : d.topicPartitions()) {
            parts.add(tp.toString());
        }
        System.out.println("D state=" + d.state() + " pid=" + d.producerId() + " epoch=" + d.producerEpoch()
            + " timeout=" + d.transactionTimeoutMs()
            + " start=" + (d.transactionStartTimeMs().isPresent() ? d.transactionStartTimeMs().getAsLong() : -1)
            + " coordinator=" + d.coordinatorId() + " partitions=" + String.join(",", parts));
        return d;
    }

    private static Map<TopicPartition, PartitionProducerState> producers(Admin admin, List<TopicPartition> tps)
            throws Exception {
        Map<TopicPartition, PartitionProducerState> states = admin.describeProducers(tps).all().get(20, TimeUnit.SECONDS);
        for (TopicPartition tp : tps) {
            for (ProducerState p : states.get(tp).activeProducers()) {
                System.out.println("P " + tp.partition() + " " + p.producerId() + " " + p.producerEpoch() + " "
                    + p.lastSequence() + " " + p.lastTimestamp() + " "
                    + (p.coordinatorEpoch().isPresent() ? String.valueOf(p.coordinatorEpoch().getAsInt()) : "-") + " "
                    + (p.currentTransactionStartOffset().isPresent()
                        ? String.valueOf(p.currentTransactionStartOffset().getAsLong()) : "-"));
            }
        }
        return states;
    }

    private static void inspect(Admin admin, String txnId, String topic, int partitions) throws Exception {
        list(admin, "all", new ListTransactionsOptions());
        list(admin, "ongoing", new ListTransactionsOptions().filterStates(Collections.singleton(TransactionState.ONGOING)));
        list(admin, "complete-commit",
            new ListTransactionsOptions().filterStates(Collections.singleton(TransactionState.COMPLETE_COMMIT)));
        TransactionDescription d = describe(admin, txnId);
        list(admin, "pid", new ListTransactionsOptions().filterProducerIds(Collections.singleton(d.producerId())));
        list(admin, "other-pid",
            new ListTransactionsOptions().filterProducerIds(Collections.singleton(d.producerId() + 1_000_000L)));
        list(admin, "dur-short", new ListTransactionsOptions().filterOnDuration(1));
        list(admin, "dur-long", new ListTransactionsOptions().filterOnDuration(3_600_000L));

        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        Map<TopicPartition, PartitionProducerState> states = producers(admin, tps);
        findHanging(admin, states);

        try {
            String unknown = txnId + "-nobody";
            admin.describeTransactions(Collections.singleton(unknown)).description(unknown).get(20, TimeUnit.SECONDS);
            System.out.println("U none");
        } catch (ExecutionException e) {
            System.out.println("U " + e.getCause().getClass().getSimpleName());
        }
    }

    /** TransactionsCommand.FindHangingTransactionsCommand with --max-transaction-timeout 0. */
    private static void findHanging(Admin admin, Map<TopicPartition, PartitionProducerState> states) throws Exception {
        long maxTransactionTimeoutMs = 0;
        long now = System.currentTimeMillis();
        Map<Long, List<TopicPartition>> candidates = new HashMap<>();
        int count = 0;
        for (Map.Entry<TopicPartition, PartitionProducerState> e : states.entrySet()) {
            for (ProducerState p : e.getValue().activeProducers()) {
                if (p.currentTransactionStartOffset().isPresent() && now - p.lastTimestamp() >= maxTransactionTimeoutMs) {
                    candidates.computeIfAbsent(p.producerId(), k -> new ArrayList<>()).add(e.getKey());
                    count++;
                }
            }
        }
        Map<Long, String> ids = new HashMap<>();
        if (!candidates.isEmpty()) {
            Collection<TransactionListing> listings = admin.listTransactions(
                new ListTransactionsOptions().filterProducerIds(candidates.keySet())).all().get(20, TimeUnit.SECONDS);
            for (TransactionListing l : listings) {
                if (candidates.containsKey(l.producerId())) {
                    ids.put(l.producerId(), l.transactionalId());
                }
            }
        }
        Map<String, TransactionDescription> descriptions = new HashMap<>();
        if (!ids.isEmpty()) {
            Set<String> wanted = new HashSet<>(ids.values());
            var result = admin.describeTransactions(wanted);
            for (String id : wanted) {
                try {
                    descriptions.put(id, result.description(id).get(20, TimeUnit.SECONDS));
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof org.apache.kafka.common.errors.TransactionalIdNotFoundException)) {
                        throw e;
                    }
                }
            }
        }
        Set<String> hanging = new TreeSet<>();
        Set<String> idPairs = new TreeSet<>();
        for (Map.Entry<Long, List<TopicPartition>> e : candidates.entrySet()) {
            String id = ids.get(e.getKey());
            TransactionDescription d = id == null ? null : descriptions.get(id);
            if (id != null) {
                idPairs.add(e.getKey() + ":" + id);
            }
            for (TopicPartition tp : e.getValue()) {
                if (d == null || !d.topicPartitions().contains(tp)) {
                    hanging.add(tp.toString());
                }
            }
        }
        System.out.println("H candidates=" + count + " ids=" + (idPairs.isEmpty() ? "-" : String.join(",", idPairs))
            + " hanging=" + (hanging.isEmpty() ? "-" : String.join(",", hanging)));
    }

    private static void abort(Admin admin, TopicPartition tp) throws Exception {
        PartitionProducerState state = admin.describeProducers(Collections.singleton(tp)).partitionResult(tp)
            .get(20, TimeUnit.SECONDS);
        ProducerState open = null;
        for (ProducerState p : state.activeProducers()) {
            if (p.currentTransactionStartOffset().isPresent()) {
                open = p;
            }
        }
        if (open == null) {
            throw new IllegalStateException("no open transaction on " + tp + ": " + state.activeProducers());
        }
        // First from a coordinator older than the one whose marker the partition last saw: refused.
        int coordinatorEpoch = open.coordinatorEpoch().orElse(0);
        try {
            admin.abortTransaction(new AbortTransactionSpec(tp, open.producerId(), (short) open.producerEpoch(),
                coordinatorEpoch - 1)).all().get(20, TimeUnit.SECONDS);
            System.out.print("F none");
        } catch (ExecutionException e) {
            System.out.print("F " + e.getCause().getClass().getSimpleName());
        }
        ProducerState still = null;
        for (ProducerState p : admin.describeProducers(Collections.singleton(tp)).partitionResult(tp)
                .get(20, TimeUnit.SECONDS).activeProducers()) {
            if (p.producerId() == open.producerId()) {
                still = p;
            }
        }
        System.out.println(" open=" + (still != null && still.currentTransactionStartOffset().isPresent()
            ? String.valueOf(still.currentTransactionStartOffset().getAsLong()) : "-"));
        // As kafka-transactions.sh abort --topic --partition --start-offset does it.
        AbortTransactionSpec spec = new AbortTransactionSpec(tp, open.producerId(), (short) open.producerEpoch(),
            open.coordinatorEpoch().orElse(0));
        System.out.println("A pid=" + open.producerId() + " epoch=" + open.producerEpoch()
            + " coordinatorEpoch=" + open.coordinatorEpoch().orElse(0));
        admin.abortTransaction(spec).all().get(20, TimeUnit.SECONDS);
        producers(admin, Collections.singletonList(tp));
    }
}
