import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * Members of one consumer group speaking the consumer protocol (group.protocol=consumer), driven line by line on
 * stdin so that a test can add and remove them while records flow:
 *
 *   add [INSTANCE_ID]   start a member (a static one with an instance id) in a thread of its own
 *   remove ID           close member ID (a static member leaves with epoch -2, a dynamic one with -1)
 *   stop                close every member and exit
 *
 * Arguments: bootstrap servers, group id, and the subscription: topic names separated by commas, "re:REGEX" (a
 * java.util.regex Pattern the client resolves itself) or "re2:REGEX" (a SubscriptionPattern: RE2 syntax, resolved by
 * the broker). Every member polls, commits synchronously after each batch and reports, as JSON lines
 * on stdout: its assignment changes with a microsecond wall-clock timestamp taken inside the callbacks (assigned,
 * revoked, lost: the test checks that no partition has two owners at a time), every record, every commit that
 * succeeded, and its close.
 */
public final class ConsumerProtocolMembers {
    private static final List<Member> MEMBERS = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String group = args[1];
        String subscription = args[2];
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = commands.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words[0].equals("add")) {
                Member member = new Member(MEMBERS.size(), bootstrap, group, subscription,
                        words.length > 1 ? words[1] : null);
                MEMBERS.add(member);
                member.thread.start();
            } else if (words[0].equals("remove")) {
                MEMBERS.get(Integer.parseInt(words[1])).stop();
            } else if (words[0].equals("stop")) {
                break;
            }
        }
        for (Member member : MEMBERS) {
            member.stop();
        }
        JsonLines.emit("stopped");
    }

    static long micros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    static List<String> names(Collection<TopicPartition> partitions) {
        TreeSet<String> names = new TreeSet<>();
        for (TopicPartition partition : partitions) {
            names.add(partition.toString());
        }
        return new ArrayList<>(names);
    }

    static final class Member implements ConsumerRebalanceListener {
        final int id;
        final String instanceId;
        final Thread thread;
        final KafkaConsumer<byte[], byte[]> consumer;
        final String subscription;
        volatile boolean running = true;

        Member(int id, String bootstrap, String group, String subscription, String instanceId) {
            this.id = id;
            this.instanceId = instanceId;
            this.subscription = subscription;
            Properties props = new Properties();
            props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
            props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            props.put(ConsumerConfig.CLIENT_ID_CONFIG, "member-" + id);
            props.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
            if (instanceId != null) {
                props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
            }
            consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
            thread = new Thread(this::run, "member-" + id);
        }

        void stop() throws InterruptedException {
            running = false;
            consumer.wakeup();
            thread.join();
        }

        void run() {
            try {
                if (subscription.startsWith("re:")) {
                    consumer.subscribe(Pattern.compile(subscription.substring(3)), this);
                } else if (subscription.startsWith("re2:")) {
                    consumer.subscribe(new SubscriptionPattern(subscription.substring(4)), this);
                } else {
                    consumer.subscribe(List.of(subscription.split(",")), this);
                }
                JsonLines.emit("started", "member", id, "instance", instanceId);
                while (running) {
                    ConsumerRecords<byte[], byte[]> records;
                    try {
                        records = consumer.poll(Duration.ofMillis(100));
                    } catch (org.apache.kafka.common.errors.WakeupException e) {
                        break;
                    }
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (ConsumerRecord<byte[], byte[]> record : records) {
                        JsonLines.emit("record", "member", id, "topic", record.topic(), "partition",
                                record.partition(), "offset", record.offset());
                        offsets.put(new TopicPartition(record.topic(), record.partition()),
                                new OffsetAndMetadata(record.offset() + 1));
                    }
                    if (!offsets.isEmpty()) {
                        commit(offsets);
                    }
                }
            } finally {
                consumer.close();
                JsonLines.emit("closed", "member", id, "us", micros());
            }
        }

        void commit(Map<TopicPartition, OffsetAndMetadata> offsets) {
            try {
                consumer.commitSync(offsets);
                long at = micros();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : offsets.entrySet()) {
                    JsonLines.emit("commit", "member", id, "partition", entry.getKey().toString(), "offset",
                            entry.getValue().offset(), "us", at);
                }
            } catch (org.apache.kafka.common.errors.WakeupException e) {
                running = false;
            } catch (RuntimeException e) {
                // A commit refused across a rebalance (STALE_MEMBER_EPOCH...) or a coordinator move: the records
                // are consumed again by the partition's next owner.
                JsonLines.emit("commit-failed", "member", id, "error", JsonLines.errorName(e));
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            JsonLines.emit("assigned", "member", id, "partitions", names(partitions), "us", micros());
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            JsonLines.emit("revoked", "member", id, "partitions", names(partitions), "us", micros());
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            JsonLines.emit("lost", "member", id, "partitions", names(partitions), "us", micros());
        }
    }
}
