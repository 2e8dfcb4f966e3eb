import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java share consumer (KIP-932) against a broker: args bootstrap, topic prefix, group prefix. The test
 * created the one-partition topics PREFIX-spread, -close, -lock, -ack and -poison, and runs the broker with
 * group.share.delivery.count.limit=2 and a short group.share.record.lock.duration.ms. Each check prints one JSON
 * line of what any broker must show (no timings, no member ids):
 * - "spread": two members of one group on one partition: while the first holds its records the second gets
 *   others; every record is delivered once.
 * - "close": records a member held when it closed are delivered to the other with delivery count 2.
 * - "lock": records a member holds without acknowledging come to the other, delivery count 2, once the
 *   acquisition lock expired.
 * - "ack": RELEASE redelivers a record (delivery count 2), REJECT never does, ACCEPT is final.
 * - "poison": a record released at every delivery is archived at the delivery count limit.
 *
 * Share groups start at the partition's end (share.auto.offset.reset=latest): each check first sends probe records
 * until a member sees one, so that the group's share partition exists before the records of the check are sent.
 */
public final class JavaShareConsumer {
    private static final Duration POLL = Duration.ofMillis(200);
    private static final long DEADLINE_MS = 90_000;

    private static KafkaProducer<String, String> producer;
    private static String bootstrap;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        String topics = args[1];
        String groups = args[2];
        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        config.put("linger.ms", "0");
        producer = new KafkaProducer<>(config, new StringSerializer(), new StringSerializer());
        try {
            spread(topics + "-spread", groups + "-spread");
            close(topics + "-close", groups + "-close");
            lock(topics + "-lock", groups + "-lock");
            ack(topics + "-ack", groups + "-ack");
            poison(topics + "-poison", groups + "-poison");
        } finally {
            producer.close();
        }
    }

    private static KafkaShareConsumer<String, String> member(String group, String topic, int maxPollRecords) {
        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        config.put("group.id", group);
        config.put("share.acknowledgement.mode", "explicit");
        config.put("share.acquire.mode", "record_limit");
        config.put("max.poll.records", String.valueOf(maxPollRecords));
        KafkaShareConsumer<String, String> consumer =
            new KafkaShareConsumer<>(config, new StringDeserializer(), new StringDeserializer());
        consumer.subscribe(List.of(topic));
        return consumer;
    }

    /** Send each record in a batch of its own (the brokers may acquire whole batches). */
    private static void send(String topic, String... values) throws Exception {
        for (String value : values) {
            producer.send(new ProducerRecord<>(topic, value)).get();
        }
    }

    private static String[] values(String prefix, int count) {
        String[] values = new String[count];
        for (int i = 0; i < count; i++) {
            values[i] = prefix + i;
        }
        return values;
    }

    private static void check(boolean condition, String what) {
        if (!condition) {
            throw new IllegalStateException("deadline passed waiting for " + what);
        }
    }

    /** Poll, accepting (and leaving out) the probes: what the check's records are. */
    private static List<ConsumerRecord<String, String>> poll(KafkaShareConsumer<String, String> consumer) {
        List<ConsumerRecord<String, String>> records = new ArrayList<>();
        for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
            if (record.value().startsWith("probe")) {
                consumer.acknowledge(record, AcknowledgeType.ACCEPT);
            } else {
                records.add(record);
            }
        }
        return records;
    }

    /** Send probes until one of the members sees one: the group then reads the partition. */
    private static void warmUp(String topic, List<KafkaShareConsumer<String, String>> members) throws Exception {
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        for (int probe = 0; ; probe++) {
            check(System.currentTimeMillis() < deadline, "a probe record");
            send(topic, "probe" + probe);
            boolean seen = false;
            for (KafkaShareConsumer<String, String> member : members) {
                for (ConsumerRecord<String, String> record : member.poll(POLL)) {
                    member.acknowledge(record, AcknowledgeType.ACCEPT);
                    seen = true;
                }
                member.commitSync();
            }
            if (seen) {
                return;
            }
        }
    }

    private static int deliveryCount(ConsumerRecord<String, String> record) {
        return record.deliveryCount().map(Short::intValue).orElse(-1);
    }

    private static void spread(String topic, String group) throws Exception {
        KafkaShareConsumer<String, String> a = member(group, topic, 5);
        KafkaShareConsumer<String, String> b = member(group, topic, 5);
        warmUp(topic, List.of(a, b));
        int count = 30;
        send(topic, values("r", count));
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        List<ConsumerRecord<String, String>> heldByA = new ArrayList<>();
        while (heldByA.isEmpty()) {
            check(System.currentTimeMillis() < deadline, "a's first records");
            heldByA.addAll(poll(a));
        }
        List<ConsumerRecord<String, String>> gotByB = new ArrayList<>();
        while (gotByB.isEmpty()) {
            check(System.currentTimeMillis() < deadline, "b's first records");
            gotByB.addAll(poll(b));
        }
        Set<String> held = new TreeSet<>();
        heldByA.forEach(record -> held.add(record.value()));
        boolean disjoint = gotByB.stream().noneMatch(record -> held.contains(record.value()));
        List<String> delivered = new ArrayList<>();
        Set<Integer> counts = new TreeSet<>();
        for (ConsumerRecord<String, String> record : heldByA) {
            a.acknowledge(record, AcknowledgeType.ACCEPT);
            delivered.add(record.value());
            counts.add(deliveryCount(record));
        }
        for (ConsumerRecord<String, String> record : gotByB) {
            b.acknowledge(record, AcknowledgeType.ACCEPT);
            delivered.add(record.value());
            counts.add(deliveryCount(record));
        }
        while (delivered.size() < count) {
            check(System.currentTimeMillis() < deadline, "every record");
            for (KafkaShareConsumer<String, String> member : List.of(a, b)) {
                for (ConsumerRecord<String, String> record : poll(member)) {
                    member.acknowledge(record, AcknowledgeType.ACCEPT);
                    delivered.add(record.value());
                    counts.add(deliveryCount(record));
                }
            }
        }
        a.commitSync();
        b.commitSync();
        a.close();
        b.close();
        JsonLines.emit("spread", "disjoint", disjoint, "distinct", new TreeSet<>(delivered).size(),
                       "deliveries", delivered.size(), "delivery_counts", counts);
    }

    /** a takes records and holds them; `handOver` makes it give them up; b must then get them, delivery count 2. */
    private static Map<String, Object> handOver(String topic, String group, boolean closeA) throws Exception {
        KafkaShareConsumer<String, String> a = member(group, topic, 3);
        KafkaShareConsumer<String, String> b = member(group, topic, 10);
        warmUp(topic, List.of(a, b));
        send(topic, values("r", 6));
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        Set<String> held = new TreeSet<>();
        while (held.isEmpty()) {
            check(System.currentTimeMillis() < deadline, "a's records");
            poll(a).forEach(record -> held.add(record.value()));
        }
        if (closeA) {
            a.close();
        }
        Map<String, Integer> countsOfHeld = new HashMap<>();
        Set<String> delivered = new TreeSet<>(held);
        while (countsOfHeld.size() < held.size() || delivered.size() < 6) {
            check(System.currentTimeMillis() < deadline, "the held records at b");
            for (ConsumerRecord<String, String> record : poll(b)) {
                b.acknowledge(record, AcknowledgeType.ACCEPT);
                delivered.add(record.value());
                if (held.contains(record.value())) {
                    countsOfHeld.put(record.value(), deliveryCount(record));
                }
            }
        }
        b.commitSync();
        b.close();
        if (!closeA) {
            a.close();
        }
        Map<String, Object> line = new HashMap<>();
        line.put("delivery_counts_of_held", new TreeSet<>(countsOfHeld.values()));
        line.put("distinct", delivered.size());
        return line;
    }

    private static void close(String topic, String group) throws Exception {
        Map<String, Object> line = handOver(topic, group, true);
        JsonLines.emit("close", "delivery_counts_of_held",
                       line.get("delivery_counts_of_held"), "distinct", line.get("distinct"));
    }

    private static void lock(String topic, String group) throws Exception {
        Map<String, Object> line = handOver(topic, group, false);
        JsonLines.emit("lock", "delivery_counts_of_held",
                       line.get("delivery_counts_of_held"), "distinct", line.get("distinct"));
    }

    private static void ack(String topic, String group) throws Exception {
        KafkaShareConsumer<String, String> c = member(group, topic, 10);
        warmUp(topic, List.of(c));
        send(topic, values("r", 5));
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        List<String> seen = new ArrayList<>();
        boolean sentEnd = false;
        boolean end = false;
        while (!end) {
            check(System.currentTimeMillis() < deadline, "the end record");
            for (ConsumerRecord<String, String> record : poll(c)) {
                String value = record.value();
                seen.add(value + "#" + deliveryCount(record));
                if (value.equals("r0") && deliveryCount(record) == 1) {
                    c.acknowledge(record, AcknowledgeType.RELEASE);
                } else if (value.equals("r1")) {
                    c.acknowledge(record, AcknowledgeType.REJECT);
                } else {
                    c.acknowledge(record, AcknowledgeType.ACCEPT);
                }
                end |= value.equals("end");
            }
            c.commitSync();
            if (!sentEnd && seen.contains("r0#2")) {
                send(topic, "end");
                sentEnd = true;
            }
        }
        c.close();
        JsonLines.emit("ack", "seen", new TreeSet<>(seen));
    }

    private static void poison(String topic, String group) throws Exception {
        KafkaShareConsumer<String, String> c = member(group, topic, 10);
        warmUp(topic, List.of(c));
        send(topic, "poison");
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        List<Integer> poisonCounts = new ArrayList<>();
        boolean sentEnd = false;
        boolean end = false;
        while (!end) {
            check(System.currentTimeMillis() < deadline, "the end record");
            for (ConsumerRecord<String, String> record : poll(c)) {
                if (record.value().equals("poison")) {
                    poisonCounts.add(deliveryCount(record));
                    c.acknowledge(record, AcknowledgeType.RELEASE);
                } else {
                    c.acknowledge(record, AcknowledgeType.ACCEPT);
                    end |= record.value().equals("end");
                }
            }
            c.commitSync();
            if (!sentEnd && poisonCounts.size() == 2) {
                send(topic, "end");
                sentEnd = true;
            }
        }
        c.close();
        JsonLines.emit("poison", "poison_delivery_counts", poisonCounts);
    }
}
