import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Kafka's Java consumer against a broker: args bootstrap, topic, group prefix, records per partition.
 *
 * The topic has 4 partitions that the test filled with another client: in each partition, record i has value
 * "p<partition>-<i>" and timestamp 2_000_000 + 1000 * i. The program checks, one JSON line each:
 * - "group-range", "group-cooperative-sticky" (one per assignor; the classic group protocol): consumer a joins alone, b
 *   joins (a rebalance), both consume everything and commit, then b leaves and a takes all partitions back. The
 *   line tells every assignment and revocation each consumer saw, so the test checks the eager and the
 *   incremental protocol apart.
 * - "committed": the group's committed offsets as a fresh consumer reads them.
 * - "seek": seek, seekToBeginning, seekToEnd and position on an assigned partition.
 * - "offsets_for_times": offsetsForTimes, beginningOffsets and endOffsets.
 */
public final class JavaConsumer {
    private static final Duration POLL = Duration.ofMillis(100);
    private static final long DEADLINE_MS = 60_000;

    public static void main(String[] args) {
        String bootstrap = args[0];
        String topic = args[1];
        String groupPrefix = args[2];
        int perPartition = Integer.parseInt(args[3]);
        for (String assignor : new String[] {"range", "cooperative-sticky"}) {
            group(bootstrap, topic, groupPrefix + "-" + assignor, assignor, perPartition);
        }
        positions(bootstrap, topic, groupPrefix + "-range");
    }

    /** A consumer and the assignment history its rebalance listener saw. */
    private static final class Member implements ConsumerRebalanceListener {
        final KafkaConsumer<String, String> consumer;
        final List<List<Integer>> assigned = new ArrayList<>();
        final List<List<Integer>> revoked = new ArrayList<>();
        final Set<String> values = new HashSet<>();

        Member(String bootstrap, String group, String assignor, String clientId, String topic) {
            Properties config = properties(bootstrap, group);
            config.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
            config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignorClass(assignor));
            config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            consumer = new KafkaConsumer<>(config);
            consumer.subscribe(List.of(topic), this);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            assigned.add(numbers(partitions));
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            revoked.add(numbers(partitions));
        }

        void poll() {
            for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                values.add(record.value());
            }
        }

        /** Whether this member's position is at the end of every partition it owns now (so it commits them). */
        boolean readAll(int perPartition) {
            for (TopicPartition partition : consumer.assignment()) {
                if (consumer.position(partition) < perPartition) {
                    return false;
                }
            }
            return true;
        }

        List<Integer> assignment() {
            return numbers(consumer.assignment());
        }
    }

    private static void group(String bootstrap, String topic, String group, String assignor, int perPartition) {
        Member a = new Member(bootstrap, group, assignor, "a", topic);
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (a.assignment().size() < 4) {
            a.poll();
            check(deadline, "a never got all four partitions");
        }
        List<Integer> alone = a.assignment();
        Member b = new Member(bootstrap, group, assignor, "b", topic);
        // Both poll until they share the partitions and have read every record (cooperative-sticky needs a
        // second rebalance to hand out what the first one revoked).
        Set<String> union = new HashSet<>();
        while (a.assignment().size() + b.assignment().size() < 4 || a.assignment().isEmpty()
               || b.assignment().isEmpty() || union.size() < 4 * perPartition
               || !a.readAll(perPartition) || !b.readAll(perPartition)) {
            a.poll();
            b.poll();
            union.addAll(a.values);
            union.addAll(b.values);
            check(deadline, "the two consumers never shared the topic");
        }
        List<Integer> sharedA = a.assignment();
        List<Integer> sharedB = b.assignment();
        int generation = a.consumer.groupMetadata().generationId();
        a.consumer.commitSync();
        b.consumer.commitSync();
        b.consumer.close();
        while (a.assignment().size() < 4) {
            a.poll();
            check(deadline, "a never took the partitions back after b left");
        }
        JsonLines.emit("group-" + assignor, "alone", alone, "a", sharedA, "b", sharedB,
                       "a_assigned", a.assigned, "a_revoked", a.revoked, "b_assigned", b.assigned,
                       "b_revoked", b.revoked, "generation", generation, "distinct_values", union.size(),
                       "after_leave", a.assignment());
        a.consumer.close();
    }

    private static void positions(String bootstrap, String topic, String group) {
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(properties(bootstrap, group))) {
            Set<TopicPartition> partitions = new HashSet<>();
            for (int p = 0; p < 4; p++) {
                partitions.add(new TopicPartition(topic, p));
            }
            Map<String, Long> committed = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : consumer.committed(partitions).entrySet()) {
                committed.put(Integer.toString(entry.getKey().partition()),
                              entry.getValue() == null ? null : entry.getValue().offset());
            }
            JsonLines.emit("committed", "group", group, "offsets", committed);

            TopicPartition p1 = new TopicPartition(topic, 1);
            consumer.assign(List.of(p1));
            consumer.seek(p1, 5);
            ConsumerRecord<String, String> first = null;
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (first == null) {
                for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                    first = first == null ? record : first;
                }
                check(deadline, "nothing fetched after seek");
            }
            consumer.seekToBeginning(List.of(p1));
            long beginning = consumer.position(p1);
            consumer.seekToEnd(List.of(p1));
            long end = consumer.position(p1);
            JsonLines.emit("seek", "offset", first.offset(), "value", first.value(), "timestamp", first.timestamp(),
                           "beginning", beginning, "end", end);

            Map<TopicPartition, Long> query = new HashMap<>();
            for (TopicPartition partition : partitions) {
                // Partition p asks for 2_000_000 + 1000 * p + 500: the first record at or after it is p + 1.
                query.put(partition, 2_000_000L + 1000L * partition.partition() + 500);
            }
            query.put(new TopicPartition(topic, 3), 9_000_000L);  // after every record: no answer
            Map<String, Object> found = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndTimestamp> entry : consumer.offsetsForTimes(query).entrySet()) {
                OffsetAndTimestamp answer = entry.getValue();
                found.put(Integer.toString(entry.getKey().partition()),
                          answer == null ? null : List.of(answer.offset(), answer.timestamp()));
            }
            JsonLines.emit("offsets_for_times", "found", found,
                           "beginning", byPartition(consumer.beginningOffsets(partitions)),
                           "end", byPartition(consumer.endOffsets(partitions)));
        }
    }

    private static Properties properties(String bootstrap, String group) {
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        // Short timeouts: a member that stops polling is noticed in seconds, not the default minutes.
        config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        config.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "30000");
        return config;
    }

    private static String assignorClass(String assignor) {
        return assignor.equals("range")
            ? org.apache.kafka.clients.consumer.RangeAssignor.class.getName()
            : org.apache.kafka.clients.consumer.CooperativeStickyAssignor.class.getName();
    }

    private static List<Integer> numbers(Collection<TopicPartition> partitions) {
        Set<Integer> sorted = new TreeSet<>();
        for (TopicPartition partition : partitions) {
            sorted.add(partition.partition());
        }
        return new ArrayList<>(sorted);
    }

    private static Map<String, Long> byPartition(Map<TopicPartition, Long> offsets) {
        Map<String, Long> out = new TreeMap<>();
        offsets.forEach((partition, offset) -> out.put(Integer.toString(partition.partition()), offset));
        return out;
    }

    private static void check(long deadline, String what) {
        if (System.currentTimeMillis() > deadline) {
            throw new IllegalStateException(what);
        }
    }
}
