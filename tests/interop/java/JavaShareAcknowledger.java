import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One member of a share group for tests/interop/test_share_acceptance.py, Kafka's KafkaShareConsumer in explicit
 * acknowledgement mode: args bootstrap, topic, group. It behaves as tests/interop/share_member.py (its Python twin,
 * which documents the lines and the decision hash): it prints "joined", then per delivery "PARTITION OFFSET
 * DELIVERY_COUNT DECISION POLL_START_US POLL_RETURN_US ACK_START_US RESULT" once the commit carrying the
 * acknowledgement answered, until a line arrives on stdin; then it closes and prints "closed".
 */
public final class JavaShareAcknowledger {
    static String decision(int partition, long offset, int deliveryCount) {
        if (deliveryCount > 1) {
            return "ACCEPT";
        }
        long bucket = ((((partition * 1_000_003L + offset) * 2_654_435_761L) & 0xFFFFFFFFL) >>> 16) % 100;
        if (bucket < 1) {
            return "REJECT";
        }
        return bucket < 11 ? "RELEASE" : "ACCEPT";
    }

    static long nowMicros() {
        return ChronoUnit.MICROS.between(Instant.EPOCH, Instant.now());
    }

    public static void main(String[] args) throws Exception {
        Properties config = new Properties();
        config.put("bootstrap.servers", args[0]);
        config.put("group.id", args[2]);
        config.put("share.acknowledgement.mode", "explicit");
        try (KafkaShareConsumer<byte[], byte[]> consumer =
                 new KafkaShareConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.subscribe(List.of(args[1]));
            System.out.println("joined");
            System.out.flush();
            StringBuilder lines = new StringBuilder();
            long pollStart = -1;
            while (System.in.available() == 0) {
                if (pollStart < 0) {
                    pollStart = nowMicros();
                }
                List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
                consumer.poll(Duration.ofMillis(500)).forEach(records::add);
                long pollReturn = nowMicros();
                if (records.isEmpty()) {
                    continue;
                }
                List<String> decisions = new ArrayList<>();
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    String chosen =
                        decision(record.partition(), record.offset(), record.deliveryCount().orElse((short) -1));
                    decisions.add(chosen);
                    consumer.acknowledge(record, AcknowledgeType.valueOf(chosen));
                }
                long ackStart = nowMicros();
                Map<Integer, String> results = new HashMap<>();
                for (Map.Entry<TopicIdPartition, Optional<KafkaException>> entry : consumer.commitSync().entrySet()) {
                    results.put(entry.getKey().partition(),
                                entry.getValue().map(error -> error.getClass().getSimpleName()).orElse("ok"));
                }
                lines.setLength(0);
                for (int index = 0; index < records.size(); index++) {
                    ConsumerRecord<byte[], byte[]> record = records.get(index);
                    lines.append(record.partition()).append(' ').append(record.offset()).append(' ')
                        .append(record.deliveryCount().orElse((short) -1)).append(' ').append(decisions.get(index))
                        .append(' ').append(pollStart).append(' ').append(pollReturn).append(' ').append(ackStart)
                        .append(' ').append(results.getOrDefault(record.partition(), "unanswered")).append('\n');
                }
                System.out.print(lines);
                System.out.flush();
                pollStart = -1;
            }
        }
        System.out.println("closed");
    }
}
