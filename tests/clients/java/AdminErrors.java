// Error paths of the stock Apache Kafka 3.9.1 Admin client against a groupcoord server.
// Usage: java AdminErrors <bootstrap> <topic-prefix>
// Prints <case>=ok or <case>=<exception simple name> lines.

import java.util.Collections;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.KafkaFuture;

public final class AdminErrors {
    interface Step {
        KafkaFuture<?> run() throws Exception;
    }

    private static void check(String name, Step step) {
        String result;
        try {
            step.run().get();
            result = "ok";
        } catch (ExecutionException e) {
            Throwable c = e.getCause() == null ? e : e.getCause();
            result = c.getClass().getSimpleName();
            System.out.println(name + ".message=" + String.valueOf(c.getMessage()).replace('\n', ' '));
        } catch (Exception e) {
            result = "thrown:" + e.getClass().getSimpleName();
        }
        System.out.println(name + "=" + result);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String p = args[1];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "8000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        try (Admin admin = Admin.create(props)) {
            check("zero_partitions", () -> admin.createTopics(Collections.singleton(
                new NewTopic(p + "-zero", 0, (short) 1))).all());
            check("replication_3", () -> admin.createTopics(Collections.singleton(
                new NewTopic(p + "-rf3", 1, (short) 3))).all());
            check("bad_name", () -> admin.createTopics(Collections.singleton(
                new NewTopic(p + " bad!", 1, (short) 1))).all());
            check("validate_only", () -> admin.createTopics(Collections.singleton(
                new NewTopic(p + "-val", 2, (short) 1)), new CreateTopicsOptions().validateOnly(true)).all());
            check("validate_only_listed", () -> admin.listTopics().names().thenApply(names -> {
                if (names.contains(p + "-val")) throw new IllegalStateException("validate-only topic was created");
                return names;
            }));
            check("create_defaults", () -> admin.createTopics(Collections.singleton(
                new NewTopic(p + "-def", java.util.Optional.empty(), java.util.Optional.empty()))).all());
            check("create", () -> admin.createTopics(Collections.singleton(
                new NewTopic(p + "-ok", 3, (short) 1))).all());
            check("shrink", () -> admin.createPartitions(Collections.singletonMap(
                p + "-ok", NewPartitions.increaseTo(2))).all());
            check("grow_unknown", () -> admin.createPartitions(Collections.singletonMap(
                p + "-missing", NewPartitions.increaseTo(4))).all());
            check("delete_unknown", () -> admin.deleteTopics(Collections.singleton(p + "-missing")).all());
        }
        System.exit(0);
    }
}
