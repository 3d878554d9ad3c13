// Drives the stock Apache Kafka 3.9.1 clients against a groupcoord node with TLS, SASL and ACLs.
// Client settings come from properties files (security.protocol, sasl.*, ssl.*, bootstrap.servers).
// Usage:
//   java SecClient cases <topic> <how>:<tag>=<props>...  how = roundtrip: produce a record, consume it in
//                                                        group sec-<tag>, commit; probe: Admin describeCluster
//   java SecClient reauth <props> <topic> <group> <ms>   produce and consume for <ms>; count re-authentications
//   java SecClient denied <props> <topic> <group> <commit-group>   subscribe in <group>, commit in <commit-group>
//                                                        (groups the principal may not read)
//   java SecClient admin <admin-props> <alice-props> <carol-props> <topic> <group>   ACLs, SCRAM users, operations
// Prints key=value lines; a failed step prints <step>.error=<exception class>: <message>.

import java.io.FileInputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class SecClient {
    private static void out(String key, Object value) {
        System.out.println(key + "=" + value);
        System.out.flush();
    }

    private static void error(String step, Throwable t) {
        Throwable cause = (t instanceof ExecutionException && t.getCause() != null) ? t.getCause() : t;
        out(step + ".error", cause.getClass().getName() + ": " + String.valueOf(cause.getMessage()).replace('\n', ' '));
    }

    private static Properties load(String path) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(path)) {
            props.load(in);
        }
        return props;
    }

    private static KafkaProducer<String, String> producer(Properties base) {
        Properties p = new Properties();
        p.putAll(base);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        return new KafkaProducer<>(p);
    }

    private static KafkaConsumer<String, String> consumer(Properties base, String group) {
        Properties p = new Properties();
        p.putAll(base);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        return new KafkaConsumer<>(p);
    }

    private static Admin admin(Properties base) {
        Properties p = new Properties();
        p.putAll(base);
        p.put("default.api.timeout.ms", "15000");
        p.put("request.timeout.ms", "10000");
        return Admin.create(p);
    }

    private static void roundtrip(String topic, String tag, Properties props) {
        try (KafkaProducer<String, String> producer = producer(props)) {
            producer.send(new ProducerRecord<>(topic, tag, tag)).get();
        } catch (Exception e) {
            error(tag, e);
            return;
        }
        try (KafkaConsumer<String, String> consumer = consumer(props, "sec-" + tag)) {
            consumer.subscribe(Collections.singletonList(topic));
            long deadline = System.currentTimeMillis() + 20000;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    if (tag.equals(r.value())) {
                        consumer.commitSync();
                        out(tag + ".ok", true);
                        return;
                    }
                }
            }
            out(tag + ".error", "timeout: record not consumed");
        } catch (Exception e) {
            error(tag, e);
        }
    }

    private static void probe(String tag, Properties props) {
        try (Admin admin = admin(props)) {
            out(tag + ".ok", admin.describeCluster().nodes().get().size());
        } catch (Exception e) {
            error(tag, e);
        }
    }

    private static double metric(Map<MetricName, ? extends Metric> metrics, String name) {
        double total = 0;
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            if (e.getKey().name().equals(name)) {
                total += ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        return total;
    }

    // Keeps a producer and a group consumer busy for `millis`, several session lifetimes: they must
    // re-authenticate (KIP-368) on the connections they keep, and never see an error.
    private static void reauth(Properties props, String topic, String group, long millis) throws Exception {
        int sent = 0;
        int received = 0;
        try (KafkaProducer<String, String> producer = producer(props);
             KafkaConsumer<String, String> consumer = consumer(props, group)) {
            consumer.subscribe(Collections.singletonList(topic));
            long end = System.currentTimeMillis() + millis;
            while (System.currentTimeMillis() < end) {
                producer.send(new ProducerRecord<>(topic, "r" + sent)).get();
                sent++;
                received += consumer.poll(Duration.ofMillis(300)).count();
                consumer.commitSync();
            }
            long deadline = System.currentTimeMillis() + 10000;
            while (received < sent && System.currentTimeMillis() < deadline) {
                received += consumer.poll(Duration.ofMillis(200)).count();
            }
            out("sent", sent);
            out("received", received);
            out("producer.reauthentications", metric(producer.metrics(), "successful-reauthentication-total"));
            out("consumer.reauthentications", metric(consumer.metrics(), "successful-reauthentication-total"));
            out("producer.reauth_failures", metric(producer.metrics(), "failed-reauthentication-total"));
            out("consumer.reauth_failures", metric(consumer.metrics(), "failed-reauthentication-total"));
        } catch (Exception e) {
            error("reauth", e);
        }
    }

    private static void denied(Properties props, String topic, String group, String commitGroup) {
        try (KafkaConsumer<String, String> consumer = consumer(props, group)) {
            consumer.subscribe(Collections.singletonList(topic));
            long deadline = System.currentTimeMillis() + 15000;
            while (System.currentTimeMillis() < deadline) {
                consumer.poll(Duration.ofMillis(200));
            }
            out("subscribe.error", "none");
        } catch (Exception e) {
            error("subscribe", e);
        }
        try (KafkaConsumer<String, String> consumer = consumer(props, commitGroup)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(Collections.singletonList(tp));
            consumer.commitSync(Collections.singletonMap(tp, new OffsetAndMetadata(2)));
            out("commit.error", "none");
        } catch (Exception e) {
            error("commit", e);
        }
    }

    private static String ops(Set<AclOperation> operations) {
        if (operations == null) {
            return "null";
        }
        Set<String> names = new TreeSet<>();
        for (AclOperation op : operations) {
            names.add(op.name());
        }
        return String.join(",", names);
    }

    private static String bindings(Collection<AclBinding> acls) {
        Set<String> out = new TreeSet<>();
        for (AclBinding b : acls) {
            out.add(b.pattern().resourceType() + ":" + b.pattern().patternType() + ":" + b.pattern().name() + ":"
                    + b.entry().principal() + ":" + b.entry().operation() + ":" + b.entry().permissionType());
        }
        return String.join(";", out);
    }

    // ACLs made, listed and deleted with Admin (as kafka-acls.sh does), a SCRAM user made with
    // alterUserScramCredentials (as kafka-configs.sh does), and KIP-430 authorized operations.
    private static void adminSteps(Properties adminProps, Properties aliceProps, Properties carolProps,
                                   String topic, String group) {
        AccessControlEntry aliceDescribe =
            new AccessControlEntry("User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW);
        AccessControlEntry aliceAlterConfigs =
            new AccessControlEntry("User:alice", "*", AclOperation.ALTER_CONFIGS, AclPermissionType.ALLOW);
        ResourcePattern cluster = new ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL);
        List<AclBinding> acls = new ArrayList<>();
        acls.add(new AclBinding(cluster, aliceDescribe));
        acls.add(new AclBinding(cluster, aliceAlterConfigs));
        acls.add(new AclBinding(new ResourcePattern(ResourceType.GROUP, group, PatternType.LITERAL),
            new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)));
        acls.add(new AclBinding(new ResourcePattern(ResourceType.TOPIC, "java-", PatternType.PREFIXED),
            new AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW)));
        AclBindingFilter aliceFilter = new AclBindingFilter(ResourcePatternFilter.ANY,
            new AccessControlEntryFilter("User:alice", null, AclOperation.ANY, AclPermissionType.ANY));
        try (Admin admin = admin(adminProps); Admin alice = admin(aliceProps)) {
            try {
                admin.createAcls(acls).all().get();
                out("create.ok", true);
                out("describe.acls", bindings(admin.describeAcls(aliceFilter).values().get()));
            } catch (Exception e) {
                error("create", e);
            }
            try {
                out("cluster.ops", ops(alice.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(true)).authorizedOperations().get()));
                ConsumerGroupDescription d = alice.describeConsumerGroups(Collections.singletonList(group),
                    new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).all().get().get(group);
                out("group.ops", ops(d.authorizedOperations()));
            } catch (Exception e) {
                error("ops", e);
            }
            try {
                AclBindingFilter clusterFilter = new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.CLUSTER, null, PatternType.ANY),
                    AccessControlEntryFilter.ANY);
                out("delete.acls", bindings(admin.deleteAcls(Collections.singletonList(clusterFilter)).all().get()));
                out("describe.after_delete", bindings(admin.describeAcls(aliceFilter).values().get()));
                out("cluster.ops_after_delete", ops(alice.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(true)).authorizedOperations().get()));
            } catch (Exception e) {
                error("delete", e);
            }
            try {
                admin.alterUserScramCredentials(Collections.singletonList(new UserScramCredentialUpsertion(
                    "carol", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), "carol-secret")))
                    .all().get();
                out("scram.users", admin.describeUserScramCredentials().all().get().keySet().contains("carol"));
            } catch (Exception e) {
                error("scram", e);
            }
        } catch (Exception e) {
            error("admin", e);
        }
        probe("carol", carolProps);
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        switch (mode) {
            case "cases":
                for (int i = 2; i < args.length; i++) {
                    String[] how = args[i].split(":", 2);
                    String[] kv = how[1].split("=", 2);
                    if (how[0].equals("roundtrip")) {
                        roundtrip(args[1], kv[0], load(kv[1]));
                    } else {
                        probe(kv[0], load(kv[1]));
                    }
                }
                break;
            case "reauth":
                reauth(load(args[1]), args[2], args[3], Long.parseLong(args[4]));
                break;
            case "denied":
                denied(load(args[1]), args[2], args[3], args[4]);
                break;
            case "admin":
                adminSteps(load(args[1]), load(args[2]), load(args[3]), args[4], args[5]);
                break;
            default:
                throw new IllegalArgumentException(mode);
        }
        out("done", true);
    }
}
