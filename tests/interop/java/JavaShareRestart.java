import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java share consumer on either side of a broker restart (durable share-group state, KIP-932): args mode,
 * bootstrap, topic, group, count.
 * - "accept" (and "accept-halt"): the group starts at the partition's end (share.auto.offset.reset=latest), so it
 *   first sends probe records until it sees one (accepted), then sends 20 records r00..r19, each in a batch of its
 *   own, ACCEPTs the first COUNT of them (commitSync) and ends holding the rest of its last poll: released on
 *   close, or, "accept-halt", halted without closing, as a process killed -9 (they stay acquired until the
 *   broker's locks go).
 * - "rest": ACCEPTs everything it gets until COUNT distinct records came, then polls once more (nothing may come).
 * Each prints one JSON line: the values it accepted, how many deliveries it had and the probes it sent.
 */
public final class JavaShareRestart {
    private static final Duration POLL = Duration.ofMillis(500);
    private static final long DEADLINE_MS = 90_000;

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String bootstrap = args[1];
        String topic = args[2];
        String group = args[3];
        int count = Integer.parseInt(args[4]);
        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        config.put("group.id", group);
        config.put("share.acknowledgement.mode", "explicit");
        config.put("max.poll.records", "5");
        KafkaShareConsumer<String, String> consumer =
            new KafkaShareConsumer<>(config, new StringDeserializer(), new StringDeserializer());
        consumer.subscribe(List.of(topic));
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        List<String> probes = new ArrayList<>();
        if (mode.startsWith("accept")) {
            Properties producerConfig = new Properties();
            producerConfig.put("bootstrap.servers", bootstrap);
            producerConfig.put("linger.ms", "0");
            try (KafkaProducer<String, String> producer =
                     new KafkaProducer<>(producerConfig, new StringSerializer(), new StringSerializer())) {
                boolean seen = false;
                for (int probe = 0; !seen; probe++) {
                    if (System.currentTimeMillis() > deadline) {
                        throw new IllegalStateException("deadline passed waiting for a probe record");
                    }
                    producer.send(new ProducerRecord<>(topic, "probe" + probe)).get();
                    probes.add("probe" + probe);
                    for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                        consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                        seen = true;
                    }
                    consumer.commitSync();
                }
                for (int index = 0; index < 20; index++) {
                    producer.send(new ProducerRecord<>(topic, String.format("r%02d", index))).get();
                }
            }
        }
        TreeSet<String> accepted = new TreeSet<>();
        List<String> deliveries = new ArrayList<>();
        boolean done = false;
        while (!done && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                deliveries.add(record.value());
                if (mode.startsWith("accept") && accepted.size() >= count) {
                    if (mode.equals("accept")) {
                        consumer.acknowledge(record, AcknowledgeType.RELEASE);
                    }
                    continue;
                }
                consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                accepted.add(record.value());
            }
            done = accepted.size() >= count;
        }
        consumer.commitSync();
        if (mode.equals("rest")) {
            for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                deliveries.add(record.value());
                consumer.acknowledge(record, AcknowledgeType.ACCEPT);
            }
            consumer.commitSync();
        }
        JsonLines.emit(mode, "accepted", accepted, "deliveries", deliveries.size(), "probes", probes);
        if (mode.equals("accept-halt")) {
            Runtime.getRuntime().halt(0);
        }
        consumer.close();
    }
}
