import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * bench_streams_restore.py's Apache Kafka Streams side: the same topology as kfk's (a reduce keeping each key's last
 * value in store "store"), started on an empty state directory so that it restores store's changelog; prints one
 * line, "records first-start-to-last-end-seconds start-to-running-seconds", then closes.
 * Arguments: bootstrap servers, application id, input topic, state directory, number of tasks.
 */
public final class RestoreBench {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], applicationId = args[1], input = args[2], stateDir = args[3];
        int tasks = Integer.parseInt(args[4]);
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.ByteArray()))
            .groupByKey(Grouped.with(Serdes.String(), Serdes.ByteArray()))
            .reduce((older, newer) -> newer,
                    Materialized.<String, byte[], KeyValueStore<Bytes, byte[]>>as("store")
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.ByteArray()));
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        AtomicLong firstStart = new AtomicLong(Long.MAX_VALUE), lastEnd = new AtomicLong(), restored = new AtomicLong();
        CountDownLatch ended = new CountDownLatch(tasks);
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            public void onRestoreStart(TopicPartition partition, String store, long start, long end) {
                firstStart.accumulateAndGet(System.nanoTime(), Math::min);
            }
            public void onBatchRestored(TopicPartition partition, String store, long batchEnd, long records) {
                restored.addAndGet(records);
            }
            public void onRestoreEnd(TopicPartition partition, String store, long total) {
                lastEnd.accumulateAndGet(System.nanoTime(), Math::max);
                ended.countDown();
            }
        });
        CountDownLatch running = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) running.countDown();
        });
        long started = System.nanoTime();
        streams.start();
        if (!ended.await(600, TimeUnit.SECONDS) || !running.await(600, TimeUnit.SECONDS)) {
            System.out.println("timeout");
            System.exit(1);
        }
        long runningAt = System.nanoTime();
        System.out.printf("%d %.3f %.3f%n", restored.get(), (lastEnd.get() - firstStart.get()) / 1e9,
                          (runningAt - started) / 1e9);
        streams.close(Duration.ofSeconds(30));
    }
}
