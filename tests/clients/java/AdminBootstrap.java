// Drives the stock Apache Kafka 3.9.1 Admin client against a groupcoord server.
// Usage: java AdminBootstrap <bootstrap> <topic> <partitions> <grow-to>
// Prints simple key=value lines; each step prints <step>.error=... instead of failing hard,
// so the pytest side can assert on exactly which step broke and why.

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;

public final class AdminBootstrap {
    private static int failures = 0;

    private static void out(String key, Object value) {
        System.out.println(key + "=" + value);
        System.out.flush();
    }

    private static void error(String step, Throwable t) {
        failures++;
        Throwable cause = (t instanceof ExecutionException && t.getCause() != null) ? t.getCause() : t;
        String msg = String.valueOf(cause.getMessage()).replace('\n', ' ');
        out(step + ".error", cause.getClass().getName() + ": " + msg);
    }

    private static String node(Node n) {
        return n == null ? "null" : n.id() + "@" + n.host() + ":" + n.port();
    }

    private static void describeTopic(Admin admin, String step, String topic) {
        try {
            Map<String, TopicDescription> all =
                admin.describeTopics(Collections.singleton(topic)).allTopicNames().get();
            TopicDescription d = all.get(topic);
            out(step + ".name", d.name());
            out(step + ".internal", d.isInternal());
            out(step + ".topic_id_set", d.topicId() != null && !d.topicId().toString().equals("AAAAAAAAAAAAAAAAAAAAAA"));
            out(step + ".partitions", d.partitions().size());
            List<String> leaders = new ArrayList<>();
            for (TopicPartitionInfo p : d.partitions()) {
                leaders.add(p.partition() + ":" + (p.leader() == null ? "null" : String.valueOf(p.leader().id())));
                out(step + ".p" + p.partition() + ".leader", node(p.leader()));
                out(step + ".p" + p.partition() + ".replicas", p.replicas().size());
                out(step + ".p" + p.partition() + ".isr", p.isr().size());
            }
            out(step + ".leaders", String.join(",", leaders));
        } catch (Exception e) {
            error(step, e);
        }
    }

    private static void listTopics(Admin admin, String step, String topic) {
        try {
            Set<String> names = new TreeSet<>(admin.listTopics(new ListTopicsOptions().listInternal(false)).names().get());
            out(step + ".contains", names.contains(topic));
            out(step + ".count", names.size());
        } catch (Exception e) {
            error(step, e);
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        int growTo = Integer.parseInt(args[3]);

        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "groupcoord-java-admin");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "8000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        props.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");

        try (Admin admin = Admin.create(props)) {
            // describeCluster: DescribeCluster API when advertised, Metadata otherwise.
            try {
                DescribeClusterResult c = admin.describeCluster();
                String clusterId = c.clusterId().get();
                out("cluster.id", clusterId);
                out("cluster.controller", node(c.controller().get()));
                List<String> nodes = new ArrayList<>();
                for (Node n : c.nodes().get()) nodes.add(node(n));
                Collections.sort(nodes);
                out("cluster.nodes", String.join(",", nodes));
            } catch (Exception e) {
                error("cluster", e);
            }

            try {
                admin.createTopics(Collections.singleton(new NewTopic(topic, partitions, (short) 1))).all().get();
                out("create.ok", true);
            } catch (Exception e) {
                error("create", e);
            }

            // Creating it again must fail with TopicExistsException.
            try {
                admin.createTopics(Collections.singleton(new NewTopic(topic, partitions, (short) 1))).all().get();
                out("create_again.ok", true);
            } catch (ExecutionException e) {
                out("create_again.exception", e.getCause().getClass().getSimpleName());
            }

            listTopics(admin, "list", topic);
            describeTopic(admin, "describe", topic);

            try {
                admin.createPartitions(Collections.singletonMap(topic, NewPartitions.increaseTo(growTo))).all().get();
                out("grow.ok", true);
            } catch (Exception e) {
                error("grow", e);
            }
            describeTopic(admin, "after_grow", topic);

            try {
                admin.deleteTopics(Collections.singleton(topic)).all().get();
                out("delete.ok", true);
            } catch (Exception e) {
                error("delete", e);
            }
            listTopics(admin, "list_after_delete", topic);
        }
        out("failures", failures);
        System.exit(0);
    }
}
