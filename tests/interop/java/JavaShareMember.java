import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One member of a share group, for a group mixed with other clients: args bootstrap, topic, group, max.poll.records.
 * It prints "joined" once subscribed, then one line "OFFSET DELIVERY_COUNT" per record it gets (accepted implicitly
 * at the next poll), until a line arrives on stdin; then it closes (acknowledging the last poll) and prints "closed".
 */
public final class JavaShareMember {
    public static void main(String[] args) throws Exception {
        Properties config = new Properties();
        config.put("bootstrap.servers", args[0]);
        config.put("group.id", args[2]);
        config.put("max.poll.records", args[3]);
        try (KafkaShareConsumer<String, String> consumer =
                 new KafkaShareConsumer<>(config, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(args[1]));
            System.out.println("joined");
            System.out.flush();
            while (System.in.available() == 0) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    System.out.println(record.offset() + " " + record.deliveryCount().orElse((short) -1));
                }
                System.out.flush();
            }
        }
        System.out.println("closed");
    }
}
