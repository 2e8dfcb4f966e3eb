import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Callable;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Kafka's Java Admin client against a broker: args bootstrap, name prefix (unique per run).
 *
 * Runs a fixed script of admin operations on topics "<prefix>-a" and "<prefix>-b" and group "<prefix>-group",
 * and prints one JSON line per step: the result, or {"error": "<exception class>"} when Kafka's client raised.
 * Everything printed is independent of the broker's ids, hosts and timings (the node is reported as "self" when
 * it is the one broker the program talks to), so the same run against Apache Kafka prints the same lines.
 */
public final class JavaAdmin {
    private static Admin admin;
    private static int nodeId;

    public static void main(String[] args) throws Exception {
        String prefix = args[1];
        String topicA = prefix + "-a";
        String topicB = prefix + "-b";
        String group = prefix + "-group";
        Map<String, Object> config = Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0],
                                            AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000,
                                            AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 20000);
        admin = Admin.create(config);
        try {
            Collection<Node> nodes = admin.describeCluster().nodes().get();
            nodeId = nodes.iterator().next().id();
            JsonLines.emit("describe_cluster", "nodes", nodes.size());
            topics(topicA, topicB);
            configs(topicA);
            partitions(topicA);
            groups(topicA, group);
            reassignments(topicA);
            logDirs(topicA);
            elections(topicA);
            deletions(prefix, topicA, topicB);
        } finally {
            admin.close();
        }
    }

    private static void topics(String topicA, String topicB) {
        step("create_topics", () -> {
            NewTopic a = new NewTopic(topicA, 3, (short) 1)
                .configs(Map.of("retention.ms", "123456", "cleanup.policy", "compact"));
            admin.createTopics(List.of(a, new NewTopic(topicB, 1, (short) 1))).all().get();
            return Map.of("created", List.of(topicA, topicB));
        });
        step("create_existing_topic",
             () -> admin.createTopics(List.of(new NewTopic(topicA, 1, (short) 1))).all().get());
        step("create_bad_replication_factor",
             () -> admin.createTopics(List.of(new NewTopic(topicA + "-rf", 1, (short) 3))).all().get());
        step("list_topics", () -> {
            Set<String> names = new TreeSet<>();
            for (TopicListing listing : admin.listTopics().listings().get()) {
                if (listing.name().equals(topicA) || listing.name().equals(topicB)) {
                    names.add(listing.name() + (listing.isInternal() ? " internal" : ""));
                }
            }
            return Map.of("names", names);
        });
        step("describe_topic", () -> describe(topicA));
        step("describe_unknown_topic", () -> admin.describeTopics(List.of(topicA + "-missing")).allTopicNames().get());
    }

    private static Map<String, Object> describe(String topic) throws Exception {
        TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        List<Object> partitions = new ArrayList<>();
        for (TopicPartitionInfo partition : description.partitions()) {
            partitions.add(Map.of("partition", partition.partition(), "leader", node(partition.leader()),
                                  "replicas", nodes(partition.replicas()), "isr", nodes(partition.isr())));
        }
        return Map.of("internal", description.isInternal(), "has_topic_id", description.topicId() != null,
                      "partitions", partitions);
    }

    private static void configs(String topic) {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        List<String> keys = List.of("retention.ms", "cleanup.policy", "segment.bytes", "max.message.bytes");
        step("describe_topic_configs", () -> configEntries(resource, keys));
        step("incremental_alter_topic_configs", () -> {
            admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "654321"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", null), AlterConfigOp.OpType.DELETE),
                new AlterConfigOp(new ConfigEntry("max.message.bytes", "200000"), AlterConfigOp.OpType.SET)
            ))).all().get();
            // The change is committed; the broker answering DescribeConfigs may apply it a moment later (Apache
            // Kafka 4.4 publishes metadata to its broker side asynchronously): wait until it shows.
            long deadline = System.currentTimeMillis() + 30_000;
            Map<String, Object> entries = configEntries(resource, keys);
            while (!List.of("654321", "DYNAMIC_TOPIC_CONFIG", false, false).equals(entries.get("retention.ms"))
                   && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
                entries = configEntries(resource, keys);
            }
            return entries;
        });
        step("alter_config_validate_only", () -> {
            admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "1"), AlterConfigOp.OpType.SET))),
                new AlterConfigsOptions().validateOnly(true)).all().get();
            return configEntries(resource, List.of("retention.ms"));
        });
        step("alter_config_bad_value", () -> admin.incrementalAlterConfigs(Map.of(resource, List.of(
            new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get());
        step("alter_config_unknown_key", () -> admin.incrementalAlterConfigs(Map.of(resource, List.of(
            new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET)))).all().get());
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, Integer.toString(nodeId));
        step("describe_broker_configs",
             () -> configEntries(broker, List.of("log.retention.hours", "message.max.bytes", "num.io.threads")));
    }

    private static Map<String, Object> configEntries(ConfigResource resource, List<String> keys) throws Exception {
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        Map<String, Object> out = new TreeMap<>();
        for (String key : keys) {
            ConfigEntry entry = config.get(key);
            out.put(key, entry == null ? null : List.of(String.valueOf(entry.value()), entry.source().name(),
                                                        entry.isReadOnly(), entry.isSensitive()));
        }
        return out;
    }

    private static void partitions(String topic) {
        step("create_partitions", () -> {
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get();
            return Map.of("count", admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic)
                .partitions().size());
        });
        step("create_partitions_decrease",
             () -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get());
    }

    private static void groups(String topic, String group) {
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        step("alter_group_offsets", () -> {
            admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(0, "zero"),
                                                          p1, new OffsetAndMetadata(0))).all().get();
            return groupOffsets(group);
        });
        step("list_groups", () -> {
            for (ConsumerGroupListing listing : admin.listConsumerGroups().all().get()) {
                if (listing.groupId().equals(group)) {
                    return Map.of("simple", listing.isSimpleConsumerGroup(),
                                  "state", String.valueOf(listing.groupState().orElse(null)),
                                  "type", String.valueOf(listing.type().orElse(null)));
                }
            }
            return Map.of("found", false);
        });
        step("describe_group", () -> {
            ConsumerGroupDescription description =
                admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            return Map.of("state", description.groupState().name(), "members", description.members().size(),
                          "assignor", description.partitionAssignor(), "type", description.type().name(),
                          "coordinator", node(description.coordinator()));
        });
        step("delete_group_offset", () -> {
            admin.deleteConsumerGroupOffsets(group, Set.of(p1)).all().get();
            return groupOffsets(group);
        });
        step("delete_group", () -> {
            admin.deleteConsumerGroups(List.of(group)).all().get();
            return Map.of("deleted", group);
        });
        step("describe_deleted_group", () -> {
            ConsumerGroupDescription description =
                admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            return Map.of("state", description.groupState().name(), "members", description.members().size());
        });
        step("delete_unknown_group", () -> admin.deleteConsumerGroups(List.of(group + "-missing")).all().get());
    }

    private static Map<String, Object> groupOffsets(String group) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().forEach(
            (partition, offset) -> out.put(Integer.toString(partition.partition()),
                                           List.of(offset.offset(), offset.metadata())));
        return out;
    }

    private static void reassignments(String topic) {
        TopicPartition p0 = new TopicPartition(topic, 0);
        step("alter_reassignment_same_replicas", () -> {
            admin.alterPartitionReassignments(Map.of(p0, Optional.of(new NewPartitionReassignment(List.of(nodeId)))))
                .all().get();
            return Map.of("done", true);
        });
        step("list_reassignments", () -> {
            Map<TopicPartition, PartitionReassignment> ongoing =
                admin.listPartitionReassignments(Set.of(p0)).reassignments().get();
            return Map.of("ongoing", ongoing.size());
        });
        step("alter_reassignment_unknown_broker", () -> admin.alterPartitionReassignments(
            Map.of(p0, Optional.of(new NewPartitionReassignment(List.of(nodeId + 100))))).all().get());
        step("cancel_no_reassignment",
             () -> admin.alterPartitionReassignments(Map.of(p0, Optional.empty())).all().get());
    }

    private static void logDirs(String topic) {
        step("describe_log_dirs", () -> {
            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(nodeId)).allDescriptions().get()
                .get(nodeId);
            Set<Integer> partitions = new TreeSet<>();
            boolean sizesKnown = true;
            for (LogDirDescription dir : dirs.values()) {
                for (Map.Entry<TopicPartition, ReplicaInfo> replica : dir.replicaInfos().entrySet()) {
                    if (replica.getKey().topic().equals(topic)) {
                        partitions.add(replica.getKey().partition());
                        sizesKnown &= replica.getValue().size() >= 0 && !replica.getValue().isFuture();
                    }
                }
            }
            LogDirDescription first = dirs.values().iterator().next();
            return Map.of("dirs", dirs.size(), "partitions", partitions, "sizes_known", sizesKnown,
                          "error", String.valueOf(first.error()),
                          "has_space", first.totalBytes().isPresent() && first.usableBytes().isPresent());
        });
    }

    private static void elections(String topic) {
        step("elect_preferred_leader", () -> electionErrors(ElectionType.PREFERRED, topic, 0));
        step("elect_unclean_leader", () -> electionErrors(ElectionType.UNCLEAN, topic, 1));
        step("elect_unknown_partition", () -> electionErrors(ElectionType.PREFERRED, topic, 42));
    }

    /** electLeaders answers per partition; the line shows each partition's error (null when elected). */
    private static Map<String, Object> electionErrors(ElectionType type, String topic, int partition)
            throws Exception {
        Map<String, Object> out = new TreeMap<>();
        admin.electLeaders(type, Set.of(new TopicPartition(topic, partition))).partitions().get().forEach(
            (tp, error) -> out.put(Integer.toString(tp.partition()),
                                   error.map(JsonLines::errorName).orElse(null)));
        return out;
    }

    private static void deletions(String prefix, String topicA, String topicB) {
        step("delete_topics", () -> {
            admin.deleteTopics(List.of(topicB)).all().get();
            Set<String> left = new TreeSet<>();
            for (String name : admin.listTopics().names().get()) {
                if (name.startsWith(prefix)) {
                    left.add(name);
                }
            }
            return Map.of("left", left);
        });
        step("delete_unknown_topic", () -> admin.deleteTopics(List.of(topicB)).all().get());
    }

    private static String node(Node node) {
        return node == null ? null : node.id() == nodeId ? "self" : Integer.toString(node.id());
    }

    private static List<String> nodes(List<Node> nodes) {
        List<String> out = new ArrayList<>();
        for (Node node : nodes) {
            out.add(node(node));
        }
        return out;
    }

    /** Runs one step and prints its result map, or the Kafka exception it ended with. */
    private static void step(String name, Callable<Object> action) {
        try {
            Object result = action.call();
            if (result instanceof Map) {
                Map<String, Object> fields = new TreeMap<>();
                ((Map<?, ?>) result).forEach((key, value) -> fields.put(String.valueOf(key), value));
                Object[] pairs = new Object[fields.size() * 2 + 2];
                int i = 0;
                pairs[i++] = "ok";
                pairs[i++] = true;
                for (Map.Entry<String, Object> field : fields.entrySet()) {
                    pairs[i++] = field.getKey();
                    pairs[i++] = field.getValue();
                }
                JsonLines.emit(name, pairs);
            } else {
                JsonLines.emit(name, "ok", true);
            }
        } catch (Exception error) {
            JsonLines.emit(name, "error", JsonLines.errorName(error));
        }
    }
}
