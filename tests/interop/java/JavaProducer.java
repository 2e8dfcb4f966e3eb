import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java producer against a broker: args bootstrap, topic prefix, records per topic.
 *
 * One idempotent producer (acks=all) per compression type writes to "<prefix>-<compression>", then two plain
 * producers with acks=0 and acks=1 write uncompressed to "<prefix>-acks0" and "<prefix>-acks1". Record i has key
 * "k<i>", value "<topic suffix>-<i>", header "seq"="<i>" and timestamp 1_000_000 + i, all to partition 0, so the
 * test can check every byte with another client. One JSON line per topic tells the offsets the broker returned.
 */
public final class JavaProducer {
    private static final String[] COMPRESSION_TYPES = {"none", "gzip", "snappy", "lz4", "zstd"};

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        int count = Integer.parseInt(args[2]);
        for (String compression : COMPRESSION_TYPES) {
            Properties config = base(bootstrap);
            config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
            config.put(ProducerConfig.ACKS_CONFIG, "all");
            config.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
            produce(config, prefix, compression, count, "all", true);
        }
        for (String acks : new String[] {"0", "1"}) {
            Properties config = base(bootstrap);
            config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
            config.put(ProducerConfig.ACKS_CONFIG, acks);
            produce(config, prefix, "acks" + acks, count, acks, false);
        }
    }

    private static Properties base(String bootstrap) {
        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        // Several records per batch, so compression applies to real multi-record batches.
        config.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        return config;
    }

    private static void produce(Properties config, String prefix, String suffix, int count, String acks,
                                boolean idempotent) throws Exception {
        String topic = prefix + "-" + suffix;
        List<Long> offsets = new ArrayList<>();
        try (Producer<String, String> producer = new KafkaProducer<>(config)) {
            List<Future<RecordMetadata>> sends = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                ProducerRecord<String, String> record =
                    new ProducerRecord<>(topic, 0, 1_000_000L + i, "k" + i, suffix + "-" + i);
                record.headers().add("seq", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                sends.add(producer.send(record));
            }
            producer.flush();
            for (Future<RecordMetadata> send : sends) {
                offsets.add(send.get().offset());
            }
        }
        JsonLines.emit("produce", "topic", topic, "acks", acks, "idempotent", idempotent, "offsets", offsets);
    }
}
