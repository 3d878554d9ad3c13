// Stock Apache Kafka 3.9.1 Admin: listOffsets and describeConfigs against a groupcoord server.
//
//   offsets <bootstrap> <topic> <partitions> <ts,ts,...>
//       earliest.<p>=<offset>, latest.<p>=<offset>, max.<p>=<offset>:<timestamp>,
//       earliest_local.<p>=<offset>, latest_tiered.<p>=<offset> (KIP-1005),
//       for.<ts>.<p>=<offset>:<timestamp>   (or <step>.error=<exception> on failure)
//   configs <bootstrap> <topic> <broker-id>
//       topic.<name>=<value>|<source>|<isDefault>|<readOnly>|<sensitive>|<synonym-sources>
//       broker.<name>=... the same; topic.count / broker.count
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

public final class OffsetsConfigs {
    static void out(String k, Object v) {
        System.out.println(k + "=" + v);
        System.out.flush();
    }

    static void error(String step, Throwable t) {
        Throwable c = (t instanceof ExecutionException && t.getCause() != null) ? t.getCause() : t;
        out(step + ".error", c.getClass().getSimpleName() + ": " + String.valueOf(c.getMessage()).replace('\n', ' '));
    }

    static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "groupcoord-java-offsets-configs");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "8000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        return Admin.create(props);
    }

    static void list(Admin admin, String step, List<TopicPartition> tps, OffsetSpec spec, boolean withTs) {
        Map<TopicPartition, OffsetSpec> q = new HashMap<>();
        for (TopicPartition tp : tps) q.put(tp, spec);
        try {
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> r = admin.listOffsets(q).all().get();
            for (TopicPartition tp : tps) {
                ListOffsetsResult.ListOffsetsResultInfo i = r.get(tp);
                out(step + "." + tp.partition(), withTs ? i.offset() + ":" + i.timestamp() : String.valueOf(i.offset()));
            }
        } catch (Exception e) {
            error(step, e);
        }
    }

    static void offsets(String[] args) {
        String topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
        try (Admin admin = admin(args[1])) {
            list(admin, "earliest", tps, OffsetSpec.earliest(), false);
            list(admin, "latest", tps, OffsetSpec.latest(), false);
            list(admin, "max", tps, OffsetSpec.maxTimestamp(), true);
            list(admin, "earliest_local", tps, OffsetSpec.earliestLocal(), false);
            list(admin, "latest_tiered", tps, OffsetSpec.latestTiered(), false);
            for (String ts : args[4].split(",")) list(admin, "for." + ts, tps, OffsetSpec.forTimestamp(Long.parseLong(ts)), true);
        }
    }

    static void describe(Admin admin, String prefix, ConfigResource res) {
        try {
            Map<ConfigResource, Config> r = admin.describeConfigs(Arrays.asList(res),
                new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true)).all().get();
            Config c = r.get(res);
            int n = 0;
            for (ConfigEntry e : c.entries()) {
                n++;
                StringBuilder syn = new StringBuilder();
                for (ConfigEntry.ConfigSynonym s : e.synonyms()) {
                    if (syn.length() > 0) syn.append(',');
                    syn.append(s.name()).append(':').append(s.source());
                }
                out(prefix + "." + e.name(), e.value() + "|" + e.source() + "|" + e.isDefault() + "|" + e.isReadOnly()
                    + "|" + e.isSensitive() + "|" + syn + "|" + e.type());
            }
            out(prefix + ".count", n);
        } catch (Exception e) {
            error(prefix, e);
        }
    }

    static void configs(String[] args) {
        try (Admin admin = admin(args[1])) {
            describe(admin, "topic", new ConfigResource(ConfigResource.Type.TOPIC, args[2]));
            describe(admin, "broker", new ConfigResource(ConfigResource.Type.BROKER, args[3]));
            describe(admin, "missing", new ConfigResource(ConfigResource.Type.TOPIC, args[2] + "-missing"));
        }
    }

    public static void main(String[] args) {
        if (args[0].equals("offsets")) offsets(args);
        else if (args[0].equals("configs")) configs(args);
        else throw new IllegalArgumentException(args[0]);
    }
}
